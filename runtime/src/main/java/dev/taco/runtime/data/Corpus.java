package dev.taco.runtime.data;

import java.io.IOException;
import java.io.InputStream;
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
import java.util.SplittableRandom;
import java.util.zip.GZIPInputStream;

/**
 * A byte-level text corpus: every UTF-8 byte is one token (vocabulary 256), split into a training part and a
 * held-out validation part (the last {@code valFraction} of the bytes), as in llm.c's tinyshakespeare loader.
 *
 * <p>The bundled default is the Jargon File 4.4.7 (public domain), from Debian's {@code dict-jargon} package
 * ({@code jargon.dict.dz}, a gzip stream), so a run needs no download.
 */
public final class Corpus {
  /** Vocabulary size of byte-level tokens. */
  public static final int VOCAB = 256;

  private static final String BUNDLED = "/jargon.dict.dz";
  /** The largest file {@link #fromFile} reads: one Java array ({@code Files.readAllBytes}'s limit). */
  static final long MAX_FILE_BYTES = Integer.MAX_VALUE - 8;

  private final String name;
  private final byte[] train;
  private final byte[] val;

  private Corpus(String name, byte[] text, double valFraction) {
    this.name = name;
    int nVal = (int) Math.round(text.length * valFraction);
    this.train = Arrays.copyOfRange(text, 0, text.length - nVal);
    this.val = Arrays.copyOfRange(text, text.length - nVal, text.length);
  }

  /** The bundled Jargon File corpus. */
  public static Corpus bundled(double valFraction) {
    try (InputStream in = Corpus.class.getResourceAsStream(BUNDLED)) {
      if (in == null) throw new IllegalStateException("bundled corpus " + BUNDLED + " is missing from the class path");
      byte[] text = new GZIPInputStream(in).readAllBytes();
      return of("Jargon File 4.4.7 (bundled)", text, valFraction);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read the bundled corpus: " + e.getMessage(), e);
    }
  }

  /**
   * Reads a UTF-8 text file.
   *
   * @throws IllegalArgumentException if the file is missing, unreadable, empty, larger than {@value #MAX_FILE_BYTES}
   *     bytes (a Java array's limit, whatever the heap), larger than the heap, or not UTF-8 text (a NUL byte or an
   *     invalid UTF-8 sequence; the message gives the byte offset)
   */
  public static Corpus fromFile(Path file, double valFraction) {
    if (file.toString().isEmpty()) throw new IllegalArgumentException("the data file name is empty");
    if (Files.isDirectory(file))
      throw new IllegalArgumentException("data file " + file.toAbsolutePath() + " is a directory");
    byte[] text;
    try {
      long size = Files.size(file);
      if (size > MAX_FILE_BYTES) {
        throw new IllegalArgumentException(String.format(java.util.Locale.ROOT, "data file %s holds %d bytes (%.1f"
            + " GiB); a --data file holds at most %d bytes (2 GiB, the largest Java array, whatever the heap): train"
            + " on a part of it (split -C 1G %s part- cuts it at line ends)", file, size, size / (double) (1L << 30),
            MAX_FILE_BYTES, file));
      }
      text = Files.readAllBytes(file);
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

  /** Wraps text bytes after validating them (see {@link #fromFile}). */
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
    while (true) {
      CoderResult r = dec.decode(in, chars.clear(), true);
      if (r.isError()) {
        throw new IllegalArgumentException("data file " + name + " is not UTF-8 text (invalid byte sequence at offset "
            + in.position() + ")");
      }
      if (r.isUnderflow()) break;
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
    crc.update(train);
    crc.update(val);
    return String.format(java.util.Locale.ROOT, "%d+%d bytes, crc32c %08x", train.length, val.length, crc.getValue());
  }

  /** Bytes (= tokens) in the training split. */
  public int trainBytes() {
    return train.length;
  }

  /** Bytes (= tokens) in the validation split. */
  public int valBytes() {
    return val.length;
  }

  /**
   * Checks that both splits hold at least one window of {@code seqLength + 1} tokens.
   *
   * @throws IllegalArgumentException naming the split and the sizes otherwise
   */
  public void requireWindow(int seqLength) {
    if (train.length < seqLength + 1L || val.length < seqLength + 1L) {
      throw new IllegalArgumentException(
          "data " + name + " is too short for --seq-length " + seqLength + ": train split "
              + train.length + " bytes, validation split " + val.length + " bytes, each needs at least "
              + (seqLength + 1L));
    }
  }

  /**
   * Fills a micro-batch of {@code b} windows of {@code t} tokens drawn uniformly from one split: {@code inputs} and
   * {@code targets} are (B,T) row-major, targets shifted by one token.
   */
  public void batch(boolean validation, SplittableRandom rng, int b, int t, int[] inputs, int[] targets) {
    byte[] src = validation ? val : train;
    for (int i = 0; i < b; i++) {
      int start = rng.nextInt(src.length - t);
      for (int j = 0; j < t; j++) {
        inputs[i * t + j] = src[start + j] & 0xFF;
        targets[i * t + j] = src[start + j + 1] & 0xFF;
      }
    }
  }
}
