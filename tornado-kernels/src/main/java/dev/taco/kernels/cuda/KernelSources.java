package dev.taco.kernels.cuda;

import dev.taco.kernels.compiler.KernelCompileException;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.compiler.KernelTranslator;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.classfile.Attributes;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.constantpool.PoolEntry;
import java.lang.classfile.constantpool.Utf8Entry;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CUDA C of a Java kernel ({@link KernelRequest}; docs/design.md §5: Java kernel → CUDA C → NVRTC): a pre-translated file
 * when there is one, else a translation on the spot by {@link KernelTranslator}. The GPU machine's jlink'd runtime has
 * no {@code jdk.compiler}, so there the files are all there is: {@link #main} writes them on a CPU machine
 * ({@code bench/gpu-prepare.sh} fills {@code .device/cuda/}, which travels with the bundle).
 *
 * <h2>Keys</h2>
 * One file per request, {@code <directory>/<SimpleClass>.<method>-<key>.cu}, where the key is the SHA-256 of
 * <ul>
 *   <li>the request: the class's binary name, the method, the constants sorted by name with their types;
 *   <li>the text of every source file of the kernel's <em>source set</em>: the kernel's class and, transitively,
 *       every project class (binary name under {@value #PROJECT_PACKAGE}) or class with a source file under the
 *       source roots (a user's own helpers, in any package) that a class file of the set refers to
 *       (constant-pool class entries and descriptors, read with {@code java.lang.classfile}, nested classes
 *       included), which covers every static method the kernel can call;
 *   <li>the class files of the translator ({@code KernelTranslator}, {@code SubsetCheck}, {@code FunctionEmitter},
 *       {@code ParallelRaces}, {@code CudaPrelude}, {@code CTypes}, {@code CNames}, {@code Intrinsics} and their nested
 *       classes).
 * </ul>
 * So a key is deterministic: the CPU machine that writes a file and the GPU machine that reads it compute the same
 * one from the same jar. And it changes whenever a source the kernel may depend on, or the translator, changes: a
 * stale file is never used, because its name no longer matches; the lookup then falls back to translating, or fails
 * saying which file it expected. Keys are computed once per request and {@code KernelSources}.
 *
 * <h2>Sources</h2>
 * The source of a class is {@code <root>/<package path>/<TopLevel>.java} in the first source root that has it, else
 * the class path resource of that name (the tornado-kernels jar carries the sources of {@code dev.taco.kernels} and
 * {@code dev.taco.kernels.gpu}); class files are class path resources of the thread's context class loader. A
 * translation on the spot needs {@code jdk.compiler}; it reads a source found only on the class path from there (named
 * by its path under the root in the CUDA C's comments), so a user's kernel needs only the user's own source roots.
 *
 * <p>Thread-safe.
 */
public final class KernelSources {
  private static final Logger LOG = LoggerFactory.getLogger(KernelSources.class);

  /**
   * Classes under this package (and classes whose source is under a source root) are part of a kernel's source set
   * when its class files refer to them.
   */
  public static final String PROJECT_PACKAGE = "dev.taco";

  private static final Pattern DESCRIPTOR_REF = Pattern.compile("L(dev/taco/[\\w/$]+);");
  private static final List<String> TRANSLATOR = Stream.of("KernelTranslator", "SubsetCheck", "FunctionEmitter",
      "ParallelRaces", "CudaPrelude", "CTypes", "CNames", "Intrinsics").map(n -> "dev/taco/kernels/compiler/" + n)
      .toList();
  private static KernelSources defaults;

  private final Path directory;
  private final List<Path> roots;
  private final Map<KernelRequest, String> keys = new ConcurrentHashMap<>();
  private final Map<String, String> cuda = new HashMap<>();
  private final Map<List<String>, KernelTranslator> translators = new HashMap<>();
  private volatile String translatorFingerprint;

  /**
   * @param directory   where pre-translated files are looked up ({@link #pretranslate} writes there)
   * @param sourceRoots directories holding Java sources by package, searched in order before the class path
   */
  public KernelSources(Path directory, List<Path> sourceRoots) {
    this.directory = directory;
    this.roots = List.copyOf(sourceRoots);
  }

  /**
   * The process-wide instance, configured at first use: the directory is {@code -Dtaco.cuda.dir}, else
   * {@code $TACO_CUDA_DIR}, else {@code .device/cuda}; the source roots are {@code -Dtaco.kernel.sources}, else
   * {@code $TACO_KERNEL_SOURCES} (both a {@link File#pathSeparator} list), else those of
   * {@code tornado-kernels/src/main/java} and {@code src/main/java} that exist (relative to the working directory).
   *
   * @return the default kernel sources
   */
  public static synchronized KernelSources defaults() {
    if (defaults == null) {
      String dir = setting("taco.cuda.dir", "TACO_CUDA_DIR");
      String roots = setting("taco.kernel.sources", "TACO_KERNEL_SOURCES");
      List<Path> found = Stream.of("tornado-kernels/src/main/java", "src/main/java").map(Path::of)
          .filter(Files::isDirectory).toList();
      defaults = new KernelSources(Path.of(dir == null ? ".device/cuda" : dir), roots == null ? found : paths(roots));
    }
    return defaults;
  }

  private static String setting(String property, String variable) {
    String v = System.getProperty(property, System.getenv(variable));
    return v == null || v.isBlank() ? null : v;
  }

  private static List<Path> paths(String list) {
    return Arrays.stream(list.split(File.pathSeparator)).filter(s -> !s.isBlank()).map(Path::of).toList();
  }

  /** @return the directory of pre-translated files */
  public Path directory() {
    return directory;
  }

  /** @return the source roots, in search order */
  public List<Path> sourceRoots() {
    return roots;
  }

  /**
   * The request's key (class doc).
   *
   * @param request a kernel
   * @return 64 lowercase hex digits
   * @throws IllegalStateException if a class file or source of the kernel's source set cannot be found
   */
  public String key(KernelRequest request) {
    return keys.computeIfAbsent(request, this::computeKey);
  }

  /**
   * @param request a kernel
   * @return where its pre-translated CUDA C is (or would be)
   * @throws IllegalStateException as {@link #key}
   */
  public Path file(KernelRequest request) {
    String cls = request.className();
    return directory.resolve(cls.substring(cls.lastIndexOf('.') + 1) + "." + request.methodName() + "-" + key(request)
        + ".cu");
  }

  /**
   * The CUDA C translation unit of one kernel (CUDA's entry point is {@code extern "C"} and named like the method;
   * {@code @Constant} parameters are gone from its signature): {@link #file} if it exists, else translated here.
   * Cached in memory per key.
   *
   * @param request a kernel
   * @return its CUDA C
   * @throws IllegalStateException  if a source of the kernel's set is neither under a root nor on the class path
   *                                ({@link #key}), or there is no file and this runtime has no {@code jdk.compiler}
   *                                to translate: the message names the file expected and how to write it
   * @throws KernelCompileException if the translator rejects the kernel ({@code file:line: reason})
   * @throws UncheckedIOException   if the file exists but cannot be read
   */
  public synchronized String cudaSource(KernelRequest request) {
    String key = key(request);
    String src = cuda.get(key);
    if (src == null) {
      Path f = file(request);
      if (Files.isRegularFile(f)) {
        src = read(f);
        LOG.debug("CUDA C of {} from {}", describe(request), f);
      } else {
        src = translate(request, f);
      }
      cuda.put(key, src);
    }
    return src;
  }

  private String translate(KernelRequest request, Path expected) {
    if (ModuleLayer.boot().findModule("jdk.compiler").isEmpty()) {
      throw new IllegalStateException("no pre-translated CUDA C for " + describe(request) + " (" + expected
          + ") and it cannot be translated here: this Java runtime has no jdk.compiler. Write the directory on a"
          + " machine with a JDK: java " + KernelSources.class.getName() + " <source-roots> <directory> <class with"
          + " static List<KernelRequest> kernels()> (bench/gpu-prepare.sh does it for every GPU kernel of the"
          + " project)");
    }
    List<String> set = sourceSet(request.className());
    KernelTranslator translator = translators.computeIfAbsent(set, classes -> {
      List<Path> files = new ArrayList<>();
      Map<String, String> fromClassPath = new TreeMap<>(); // the project's sources that only its jar carries
      for (String c : classes) {
        Path f = sourceFile(c);
        if (f != null) {
          files.add(f);
        } else {
          fromClassPath.put(c.replace('.', '/') + ".java", sourceText(c));
        }
      }
      return new KernelTranslator(files, fromClassPath);
    });
    long t0 = System.nanoTime();
    String src = translator.translate(List.of(request));
    LOG.info("translated {} to CUDA C in {} ms", describe(request), (System.nanoTime() - t0) / 1_000_000);
    return src;
  }

  /**
   * Writes the file of every request that has none yet (atomically: a temporary file, then a rename), translating
   * here; existing files are kept, since equal keys mean equal inputs.
   *
   * @param requests kernels (duplicates are written once)
   * @return the files, in request order
   * @throws IllegalStateException  as {@link #cudaSource}
   * @throws KernelCompileException if the translator rejects a kernel
   * @throws UncheckedIOException   if the directory cannot be written
   */
  public List<Path> pretranslate(Collection<KernelRequest> requests) {
    List<Path> out = new ArrayList<>();
    for (KernelRequest r : new LinkedHashSet<>(requests)) {
      Path f = file(r);
      if (!Files.isRegularFile(f)) {
        String src = cudaSource(r);
        try {
          Files.createDirectories(directory);
          Path tmp = Files.createTempFile(directory, f.getFileName().toString(), ".tmp");
          Files.writeString(tmp, src, StandardCharsets.UTF_8);
          try {
            Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
          } catch (AtomicMoveNotSupportedException e) {
            Files.move(tmp, f, StandardCopyOption.REPLACE_EXISTING);
          }
        } catch (IOException e) {
          throw new UncheckedIOException("cannot write " + f, e);
        }
      }
      out.add(f);
    }
    return out;
  }

  // ------------------------------------------------------------------ keys

  private String computeKey(KernelRequest r) {
    MessageDigest md = sha256();
    PtxCache.field(md, "taco-kernel-v1");
    PtxCache.field(md, r.className());
    PtxCache.field(md, r.methodName());
    for (Map.Entry<String, Object> c : new TreeMap<>(r.constants()).entrySet()) {
      PtxCache.field(md, c.getKey());
      PtxCache.field(md, c.getValue().getClass().getSimpleName() + ":" + c.getValue());
    }
    for (String c : sourceSet(r.className())) {
      PtxCache.field(md, c);
      PtxCache.field(md, sourceText(c));
    }
    PtxCache.field(md, translatorFingerprint());
    return HexFormat.of().formatHex(md.digest());
  }

  /**
   * The kernel's source set (class doc).
   *
   * @param className a class's binary name
   * @return binary names of top-level classes, sorted
   * @throws IllegalStateException if a class file cannot be found
   */
  List<String> sourceSet(String className) {
    Set<String> set = new TreeSet<>();
    Deque<String> work = new ArrayDeque<>(List.of(topLevel(className)));
    while (!work.isEmpty()) {
      String t = work.pop();
      if (set.add(t)) {
        work.addAll(references(t));
      }
    }
    return List.copyOf(set);
  }

  /** Project top-level classes that the class files of {@code topLevel} and its nest members refer to. */
  private Set<String> references(String topLevel) {
    Set<String> out = new TreeSet<>();
    Deque<String> files = new ArrayDeque<>(List.of(topLevel.replace('.', '/')));
    Set<String> seen = new HashSet<>();
    while (!files.isEmpty()) {
      String f = files.pop();
      if (!seen.add(f)) {
        continue;
      }
      ClassModel cm = ClassFile.of().parse(classBytes(f));
      cm.findAttribute(Attributes.nestMembers())
          .ifPresent(a -> a.nestMembers().forEach(m -> files.add(m.asInternalName())));
      for (PoolEntry e : cm.constantPool()) {
        if (e instanceof ClassEntry c) {
          addProjectClass(c.asInternalName(), out);
        } else if (e instanceof Utf8Entry u) {
          Matcher m = DESCRIPTOR_REF.matcher(u.stringValue());
          while (m.find()) {
            addProjectClass(m.group(1), out);
          }
        }
      }
    }
    return out;
  }

  private void addProjectClass(String internalName, Set<String> out) {
    String n = internalName.replace('/', '.');
    if (n.startsWith(PROJECT_PACKAGE + ".") || !n.startsWith("java.") && sourceFile(topLevel(n)) != null) {
      out.add(topLevel(n));
    }
  }

  private static String topLevel(String binaryName) {
    int d = binaryName.indexOf('$');
    return d < 0 ? binaryName : binaryName.substring(0, d);
  }

  private String translatorFingerprint() {
    String fp = translatorFingerprint;
    if (fp == null) {
      MessageDigest md = sha256();
      for (String c : TRANSLATOR) {
        byte[] b = classBytes(c);
        PtxCache.field(md, c);
        PtxCache.field(md, b);
        List<String> nested = new ArrayList<>();
        ClassFile.of().parse(b).findAttribute(Attributes.nestMembers())
            .ifPresent(a -> a.nestMembers().forEach(m -> nested.add(m.asInternalName())));
        for (String n : new TreeSet<>(nested)) {
          PtxCache.field(md, n);
          PtxCache.field(md, classBytes(n));
        }
      }
      fp = translatorFingerprint = HexFormat.of().formatHex(md.digest());
    }
    return fp;
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 unavailable", e);
    }
  }

  // ------------------------------------------------------------------ files

  private static ClassLoader loader() {
    ClassLoader l = Thread.currentThread().getContextClassLoader();
    return l != null ? l : KernelSources.class.getClassLoader();
  }

  private static byte[] classBytes(String internalName) {
    byte[] b = resource(internalName + ".class");
    if (b == null) {
      throw new IllegalStateException("no class file " + internalName + ".class on the class path");
    }
    return b;
  }

  private static byte[] resource(String name) {
    try (InputStream in = loader().getResourceAsStream(name)) {
      return in == null ? null : in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read class path resource " + name, e);
    }
  }

  private Path sourceFile(String topLevel) {
    String rel = topLevel.replace('.', '/') + ".java";
    return roots.stream().map(r -> r.resolve(rel)).filter(Files::isRegularFile).findFirst().orElse(null);
  }

  private String sourceText(String topLevel) {
    Path f = sourceFile(topLevel);
    if (f != null) {
      return read(f);
    }
    String rel = topLevel.replace('.', '/') + ".java";
    byte[] b = resource(rel);
    if (b == null) {
      throw new IllegalStateException("no source of " + topLevel + " (" + rel + ") under " + roots + " or on the class "
          + "path: a kernel's key covers the sources it may call; package the source in the jar's resources or give "
          + "its root with -Dtaco.kernel.sources");
    }
    return new String(b, StandardCharsets.UTF_8);
  }

  private static String read(Path f) {
    try {
      return Files.readString(f, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + f, e);
    }
  }

  private static String describe(KernelRequest r) {
    String cls = r.className();
    return cls.substring(cls.lastIndexOf('.') + 1) + "." + r.methodName()
        + (r.constants().isEmpty() ? "" : new TreeMap<>(r.constants()).toString());
  }

  // ------------------------------------------------------------------ build step

  /**
   * Build step: {@code KernelSources <source-root[:root...]> <directory> <class>...} writes the CUDA C of every kernel
   * that each class's {@code public static List<KernelRequest> kernels()} lists (e.g.
   * {@code dev.taco.kernels.gpu.TacoCudaSources}) into the directory, under the names {@link #file} looks up. Exits
   * with 1 and the {@code file:line: reason} message on a translation error, 2 on a usage error.
   *
   * @param args source roots ({@link File#pathSeparator}-separated), output directory, class names
   * @throws ReflectiveOperationException if a class or its {@code kernels()} cannot be found or called
   */
  public static void main(String[] args) throws ReflectiveOperationException {
    int status = run(args);
    if (status != 0) {
      System.exit(status);
    }
  }

  /** {@link #main} without the exit: 0, 1 (translation error, printed) or 2 (usage). */
  static int run(String[] args) throws ReflectiveOperationException {
    if (args.length < 3) {
      System.err.println("usage: KernelSources <source-root[" + File.pathSeparator + "root...]> <directory> "
          + "<class with static List<KernelRequest> kernels()>...");
      return 2;
    }
    KernelSources ks = new KernelSources(Path.of(args[1]), paths(args[0]));
    List<KernelRequest> all = new ArrayList<>();
    for (int i = 2; i < args.length; i++) {
      all.addAll(kernelsOf(args[i]));
    }
    try {
      List<Path> files = ks.pretranslate(all);
      System.out.println("KernelSources: " + files.size() + " kernels in " + ks.directory());
      return 0;
    } catch (KernelCompileException e) {
      System.err.println(e.getMessage());
      return 1;
    }
  }

  /** The list a class's {@code public static List<KernelRequest> kernels()} returns. */
  static List<KernelRequest> kernelsOf(String className) throws ReflectiveOperationException {
    Method m = Class.forName(className).getMethod("kernels");
    if (!Modifier.isStatic(m.getModifiers()) || !List.class.isAssignableFrom(m.getReturnType())) {
      throw new NoSuchMethodException(className + " has no public static List<KernelRequest> kernels()");
    }
    List<?> list = (List<?>) m.invoke(null);
    return list.stream().map(KernelRequest.class::cast).toList();
  }
}
