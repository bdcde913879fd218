package dev.taco.runtime.data;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.zip.GZIPInputStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A byte-level text corpus: every byte is one token (vocabulary 256), split into a training part and a held-out
 * validation part (the last {@code valFraction} of the bytes), as in llm.c's tinyshakespeare loader. The text is held
 * once: both splits are ranges of one array.
 *
 * <p>The bundled default is the Jargon File 4.4.7 (public domain), from Debian's {@code dict-jargon} package
 * ({@code jargon.dict.dz}, a gzip stream), so a run needs no download. A data file may be gzip-compressed (a
 * {@code .gz} or dictd's {@code .dict.dz}, found by its first bytes), as GCIDE's {@code gcide.dict.dz} is.
 */
public final class Corpus {
  private static final Logger log = LoggerFactory.getLogger(Corpus.class);

  /** Vocabulary size of byte-level tokens. */
  public static final int VOCAB = 256;

  private static final String BUNDLED = "/jargon.dict.dz";
  /** The largest text {@link #fromFile} reads, after unpacking: one Java array's limit. */
  static final long MAX_FILE_BYTES = Integer.MAX_VALUE - 8;
  /**
   * A text may hold one byte sequence that is not UTF-8 per this many bytes (GCIDE has three stray Windows-1252 bytes
   * in 40 MB); more, and the file is refused as not UTF-8.
   */
  static final int BYTES_PER_STRAY = 100_000;
  /** Deflate's largest compression ratio: a gzip trailer's size beyond it is not believed. */
  private static final long MAX_DEFLATE_RATIO = 1032;
  /** First bytes of compressed formats that --data does not unpack: the format's name and the command that unpacks. */
  private static final Object[][] OTHER_COMPRESSIONS = {
      {new byte[] {(byte) 0xFD, '7', 'z', 'X', 'Z', 0}, "xz", "xz -d"},
      {new byte[] {0x28, (byte) 0xB5, 0x2F, (byte) 0xFD}, "zstd", "zstd -d"},
      {new byte[] {'P', 'K', 3, 4}, "zip", "unzip"}};

  private final String name;
  /** The text: the training split is {@code [0, trainBytes)}, the validation split the rest. */
  private final byte[] text;
  private final int trainBytes;

  private Corpus(String name, byte[] text, double valFraction) {
    this.name = name;
    this.text = text;
    this.trainBytes = text.length - (int) Math.round(text.length * valFraction);
  }

  /** The bundled Jargon File corpus. */
  public static Corpus bundled(double valFraction) {
    try (InputStream in = Corpus.class.getResourceAsStream(BUNDLED)) {
      if (in == null) throw new IllegalStateException("bundled corpus " + BUNDLED + " is missing from the class path");
      byte[] text = readAll(new GZIPInputStream(in, 1 << 16), 0, BUNDLED);
      return of("Jargon File 4.4.7 (bundled)", text, valFraction);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read the bundled corpus: " + e.getMessage(), e);
    }
  }

  /**
   * Reads a UTF-8 text file, or a gzip-compressed one ({@code .gz}, dictd's {@code .dict.dz}: gzip's first two bytes
   * tell), unpacked as it is read into one array of the text's size.
   *
   * @throws IllegalArgumentException if the file is missing, unreadable, empty, larger than {@value #MAX_FILE_BYTES}
   *     bytes once unpacked (a Java array's limit, whatever the heap), larger than the heap, damaged gzip, compressed
   *     in another format (naming it), or not UTF-8 text (a NUL byte, or more than one invalid UTF-8 sequence per
   *     {@value #BYTES_PER_STRAY} bytes; the message gives the first one's offset)
   */
  public static Corpus fromFile(Path file, double valFraction) {
    if (file.toString().isEmpty()) throw new IllegalArgumentException("the data file name is empty");
    if (Files.isDirectory(file))
      throw new IllegalArgumentException("data file " + file.toAbsolutePath() + " is a directory");
    byte[] text;
    try {
      long size = Files.size(file);
      if (size > MAX_FILE_BYTES)
        throw tooLarge(file, String.format(Locale.ROOT, "holds %d bytes (%.1f GiB)", size,
            size / (double) (1L << 30)));
      byte[] head = new byte[6];
      int got;
      try (InputStream in = Files.newInputStream(file)) {
        got = in.readNBytes(head, 0, head.length);
      }
      if (got >= 2 && head[0] == 0x1f && head[1] == (byte) 0x8b) {
        text = gunzip(file, size);
      } else {
        refuseOtherCompression(file, Arrays.copyOf(head, got));
        text = Files.readAllBytes(file);
      }
    } catch (NoSuchFileException e) {
      throw new IllegalArgumentException("data file not found: " + file.toAbsolutePath());
    } catch (OutOfMemoryError e) {
      throw new IllegalArgumentException(
          "data file " + file + " is too large for the heap (" + (Runtime.getRuntime().maxMemory() >> 20) + " MiB)");
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read data file " + file + ": " + e.getMessage());
    }
    return of(file.toString(), text, valFraction);
  }

  /** The text of the gzip file {@code file} of {@code size} bytes, sized by gzip's trailer where that is credible. */
  private static byte[] gunzip(Path file, long size) throws IOException {
    long trailer = 0; // ISIZE: the last member's unpacked size mod 2^32, little-endian (RFC 1952)
    if (size >= 18) {
      try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "r")) {
        f.seek(size - 4);
        trailer = Integer.toUnsignedLong(Integer.reverseBytes(f.readInt()));
      }
    }
    int hint = trailer <= Math.min(MAX_FILE_BYTES, MAX_DEFLATE_RATIO * size) ? (int) trailer : 0;
    try (InputStream in = new GZIPInputStream(new BufferedInputStream(Files.newInputStream(file), 1 << 16), 1 << 16)) {
      return readAll(in, hint, file.toString());
    } catch (java.util.zip.ZipException | java.io.EOFException e) {
      throw new IllegalArgumentException("data file " + file + " is damaged gzip (" + e.getMessage() + ")");
    }
  }

  /**
   * Every byte of {@code in}, into an array of {@code hint} bytes (one array when that is the stream's length; else it
   * grows, or is cut to the length at the end).
   *
   * @throws IllegalArgumentException if the stream holds more than {@value #MAX_FILE_BYTES} bytes
   */
  static byte[] readAll(InputStream in, int hint, String name) throws IOException {
    byte[] buf = new byte[Math.max(hint, 1 << 16)];
    int n = 0;
    while (true) {
      int r = in.read(buf, n, buf.length - n);
      if (r < 0) break;
      n += r;
      if (n == buf.length) {
        int next = in.read();
        if (next < 0) break;
        if (buf.length >= MAX_FILE_BYTES) throw tooLarge(Path.of(name), "unpacks to more than that");
        buf = Arrays.copyOf(buf, (int) Math.min(MAX_FILE_BYTES, 2L * buf.length));
        buf[n++] = (byte) next;
      }
    }
    return n == buf.length ? buf : Arrays.copyOf(buf, n);
  }

  private static IllegalArgumentException tooLarge(Path file, String what) {
    return new IllegalArgumentException(String.format(Locale.ROOT, "data file %s %s; a --data file holds at most %d"
        + " bytes (2 GiB, the largest Java array, whatever the heap): train on a part of it (split -C 1G %s part- cuts"
        + " it at line ends)", file, what, MAX_FILE_BYTES, file));
  }

  /** Refuses a file that starts as a compressed format other than gzip does, naming the format. */
  private static void refuseOtherCompression(Path file, byte[] head) {
    for (Object[] c : OTHER_COMPRESSIONS) {
      byte[] magic = (byte[]) c[0];
      if (head.length >= magic.length && Arrays.equals(head, 0, magic.length, magic, 0, magic.length)) {
        throw new IllegalArgumentException("data file " + file + " is " + c[1] + "-compressed: --data reads text or"
            + " gzip; unpack it first (" + c[2] + ")");
      }
    }
  }

  /**
   * Wraps text bytes after validating them (see {@link #fromFile}); {@code text} is the corpus's from then on, not
   * copied.
   */
  public static Corpus of(String name, byte[] text, double valFraction) {
    if (!(valFraction > 0 && valFraction < 0.5))
      throw new IllegalArgumentException("validation fraction must be in (0, 0.5), got " + valFraction);
    if (text.length == 0) throw new IllegalArgumentException("data file " + name + " is empty");
    for (int i = 0; i < text.length; i++) {
      if (text[i] == 0)
        throw new IllegalArgumentException("data file " + name + " is binary, not text (NUL byte at offset " + i + ")");
    }
    ByteBuffer in = ByteBuffer.wrap(text);
    CharBuffer chars = CharBuffer.allocate(1 << 16);
    CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT);
    long stray = 0, first = -1;
    while (true) {
      CoderResult r = dec.decode(in, chars.clear(), true);
      if (r.isError()) {
        if (stray++ == 0) first = in.position();
        in.position(in.position() + r.length());
      } else if (r.isUnderflow()) {
        break;
      }
    }
    if (stray * BYTES_PER_STRAY > text.length) {
      throw new IllegalArgumentException("data file " + name + " is not UTF-8 text (invalid byte sequence at offset "
          + first + (stray > 1 ? "; " + stray + " in all" : "") + ")");
    }
    if (stray > 0) {
      log.warn("data file {} holds {} byte sequence(s) that are not UTF-8 (the first at offset {}): trained on as the"
          + " bytes they are", name, stray, first);
    }
    return new Corpus(name, text, valFraction);
  }

  /** The corpus's name: the data file's, or the bundled one's. */
  public String name() {
    return name;
  }

  /**
   * What identifies the text whatever its file is called: both splits' sizes and the CRC32C of their bytes, e.g.
   * {@code 1234567+12345 bytes, crc32c 0a1b2c3d}. A resumed run compares it with its checkpoint's.
   */
  public String fingerprint() {
    java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
    crc.update(text);
    return String.format(Locale.ROOT, "%d+%d bytes, crc32c %08x", trainBytes, valBytes(), crc.getValue());
  }

  /** Bytes (= tokens) in the training split. */
  public int trainBytes() {
    return trainBytes;
  }

  /** Bytes (= tokens) in the validation split. */
  public int valBytes() {
    return text.length - trainBytes;
  }

  /**
   * Checks that both splits hold at least one window of {@code seqLength + 1} tokens.
   *
   * @throws IllegalArgumentException naming the split and the sizes otherwise
   */
  public void requireWindow(int seqLength) {
    if (trainBytes() < seqLength + 1L || valBytes() < seqLength + 1L) {
      throw new IllegalArgumentException(
          "data " + name + " is too short for --seq-length " + seqLength + ": train split "
              + trainBytes() + " bytes, validation split " + valBytes() + " bytes, each needs at least "
              + (seqLength + 1L));
    }
  }

  /**
   * Fills a micro-batch of {@code b} windows of {@code t} tokens drawn uniformly from one split: {@code inputs} and
   * {@code targets} are (B,T) row-major, targets shifted by one token.
   */
  public void batch(boolean validation, SplittableRandom rng, int b, int t, int[] inputs, int[] targets) {
    int from = validation ? trainBytes : 0, length = validation ? valBytes() : trainBytes;
    for (int i = 0; i < b; i++) {
      int start = from + rng.nextInt(length - t);
      for (int j = 0; j < t; j++) {
        inputs[i * t + j] = text[start + j] & 0xFF;
        targets[i * t + j] = text[start + j + 1] & 0xFF;
      }
    }
  }
}
