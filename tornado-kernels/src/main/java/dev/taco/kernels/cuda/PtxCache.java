package dev.taco.kernels.cuda;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A disk cache of PTX keyed by what determines it: SHA-256 over the CUDA C source, the target
 * architecture, the compiler options and the compiler's version. NVRTC takes about 80 ms even for a
 * trivial kernel (docs/design.md §5); a hit reads one small file.
 *
 * <p>Layout: one file {@code <key>.ptx} per entry in the directory, whose first line is
 * {@code // taco-ptx-cache <key>} and the rest the PTX. Entries are written atomically (a temporary file
 * in the same directory, then a rename), so a reader never sees half an entry and concurrent writers of
 * the same key both leave a complete one; a file whose header does not match its key is treated as a
 * miss and replaced.
 *
 * <p>The default directory ({@link #defaultCache()}) is {@code $TACO_CACHE/ptx} when the environment
 * variable {@code TACO_CACHE} (or the system property {@code taco.cache}) is set, else
 * {@code ~/.cache/taco/ptx}.
 */
public final class PtxCache {
  private static final Logger LOG = LoggerFactory.getLogger(PtxCache.class);
  private static final String HEADER = "// taco-ptx-cache ";
  private static volatile PtxCache defaultCache;

  private final Path dir;
  private final AtomicLong hits = new AtomicLong();
  private final AtomicLong misses = new AtomicLong();

  /**
   * @param dir the cache directory (created on first write)
   */
  public PtxCache(Path dir) {
    this.dir = dir;
  }

  /** @return the process-wide cache in the default directory (see class comment) */
  public static PtxCache defaultCache() {
    PtxCache c = defaultCache;
    if (c == null) {
      synchronized (PtxCache.class) {
        if (defaultCache == null) defaultCache = new PtxCache(defaultDirectory());
        c = defaultCache;
      }
    }
    return c;
  }

  /** @return {@code $TACO_CACHE/ptx} (or {@code taco.cache}/ptx) if set, else {@code ~/.cache/taco/ptx} */
  public static Path defaultDirectory() {
    String root = System.getProperty("taco.cache");
    if (root == null || root.isBlank()) root = System.getenv("TACO_CACHE");
    if (root != null && !root.isBlank()) return Path.of(root, "ptx");
    return Path.of(System.getProperty("user.home"), ".cache", "taco", "ptx");
  }

  /** @return the cache directory */
  public Path directory() { return dir; }

  /**
   * The cache key: lowercase hex SHA-256 over the length-prefixed UTF-8 fields (so no two different
   * field lists hash the same bytes).
   *
   * @param source          CUDA C source
   * @param arch            target, e.g. {@code "compute_90"}
   * @param options         compiler options, in order
   * @param compilerVersion e.g. {@code "nvrtc 13.0"}
   * @return 64 hex digits
   */
  public static String key(String source, String arch, List<String> options, String compilerVersion) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      field(md, "taco-ptx-v1");
      field(md, source);
      field(md, arch);
      field(md, Integer.toString(options.size()));
      for (String o : options) field(md, o);
      field(md, compilerVersion);
      return HexFormat.of().formatHex(md.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 unavailable", e);
    }
  }

  /** Adds a length-prefixed UTF-8 field to a digest (also {@link KernelSources}' keys). */
  static void field(MessageDigest md, String s) {
    field(md, s.getBytes(StandardCharsets.UTF_8));
  }

  /** Adds length-prefixed bytes to a digest. */
  static void field(MessageDigest md, byte[] b) {
    md.update(
        new byte[] {(byte) (b.length >>> 24), (byte) (b.length >>> 16), (byte) (b.length >>> 8), (byte) b.length});
    md.update(b);
  }

  /**
   * @param key a key from {@link #key}
   * @return the file holding that entry (it may not exist)
   */
  public Path file(String key) { return dir.resolve(key + ".ptx"); }

  /**
   * Reads an entry.
   *
   * @param key a key from {@link #key}
   * @return the PTX, or empty if absent or not a valid entry for this key
   * @throws UncheckedIOException if the file exists but cannot be read
   */
  public Optional<String> get(String key) {
    Path f = file(key);
    String text;
    try {
      text = Files.readString(f, StandardCharsets.UTF_8);
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read PTX cache entry " + f, e);
    }
    String head = HEADER + key + "\n";
    if (!text.startsWith(head)) {
      LOG.warn("PTX cache entry {} has a wrong header; ignoring it", f);
      return Optional.empty();
    }
    return Optional.of(text.substring(head.length()));
  }

  /**
   * Writes an entry atomically (temporary file in the cache directory, then rename).
   *
   * @param key a key from {@link #key}
   * @param ptx the PTX
   * @throws UncheckedIOException if the directory or file cannot be written
   */
  public void put(String key, String ptx) {
    Path f = file(key);
    Path tmp = null;
    try {
      Files.createDirectories(dir);
      tmp = Files.createTempFile(dir, key + ".", ".tmp");
      Files.writeString(tmp, HEADER + key + "\n" + ptx, StandardCharsets.UTF_8);
      try {
        Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(tmp, f, StandardCopyOption.REPLACE_EXISTING);
      }
      tmp = null;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write PTX cache entry " + f, e);
    } finally {
      if (tmp != null) {
        try {
          Files.deleteIfExists(tmp);
        } catch (IOException ignored) { /* best effort */ }
      }
    }
  }

  /**
   * Returns the cached PTX for these inputs, or runs {@code compiler}, stores its result and returns it.
   * A cache directory that cannot be written costs a warning, not a failure.
   *
   * @param source          CUDA C source
   * @param arch            target architecture
   * @param options         compiler options
   * @param compilerVersion compiler version string
   * @param compiler        produces the PTX on a miss (its exceptions propagate, nothing is stored)
   * @return the PTX
   */
  public String getOrCompile(String source, String arch, List<String> options, String compilerVersion,
      Supplier<String> compiler) {
    String key = key(source, arch, options, compilerVersion);
    Optional<String> hit;
    try {
      hit = get(key);
    } catch (UncheckedIOException e) {
      LOG.warn("{}", e.getMessage());
      hit = Optional.empty();
    }
    if (hit.isPresent()) {
      hits.incrementAndGet();
      LOG.debug("PTX cache hit {}", key);
      return hit.get();
    }
    misses.incrementAndGet();
    String ptx = compiler.get();
    try {
      put(key, ptx);
    } catch (UncheckedIOException e) {
      LOG.warn("{} (continuing without caching)", e.getMessage());
    }
    return ptx;
  }

  /** @return how many {@link #getOrCompile} calls were served from disk */
  public long hits() { return hits.get(); }

  /** @return how many {@link #getOrCompile} calls ran the compiler */
  public long misses() { return misses.get(); }
}
