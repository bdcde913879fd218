package dev.taco.runtime.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.zip.CRC32C;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The corpus: text read plain or gzip-compressed (dictd's .dict.dz among them) gives the same bytes; the validation
 * split is the last tenth; stray non-UTF-8 bytes in a text are kept, a text mostly not UTF-8 and other compressions
 * are refused by name.
 */
class CorpusTest {
  @TempDir
  Path tmp;

  /** {@code n} bytes of printable ASCII lines from {@code seed}. */
  private static byte[] text(long seed, int n) {
    System.out.println("CorpusTest text seed " + seed);
    SplittableRandom rng = new SplittableRandom(seed);
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) b[i] = (byte) (rng.nextInt(60) == 0 ? '\n' : ' ' + rng.nextInt(95));
    return b;
  }

  private static byte[] gzip(byte[] text) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (OutputStream z = new GZIPOutputStream(out)) {
      z.write(text);
    }
    return out.toByteArray();
  }

  @Test
  void gzipAndDictzipFilesReadAsTheirText() throws IOException {
    byte[] text = text(20261207L, 300_000);
    Path plain = Files.write(tmp.resolve("t.txt"), text), gz = Files.write(tmp.resolve("t.txt.gz"), gzip(text));
    Corpus fromPlain = Corpus.fromFile(plain, 0.1), fromGz = Corpus.fromFile(gz, 0.1);
    assertThat(fromGz.fingerprint()).isEqualTo(fromPlain.fingerprint());
    assertThat(fromGz.trainBytes() + fromGz.valBytes()).isEqualTo(text.length);
    // two gzip members: the trailer's size is the second's alone, and the reader grows past it
    byte[] half = Arrays.copyOf(text, text.length / 2), rest = Arrays.copyOfRange(text, text.length / 2, text.length);
    byte[] twoMembers = concat(gzip(half), gzip(rest));
    assertThat(Corpus.fromFile(Files.write(tmp.resolve("two.gz"), twoMembers), 0.1).fingerprint())
        .isEqualTo(fromPlain.fingerprint());
    // dictd's .dict.dz (gzip with dictzip's random-access table in the header): the bundled Jargon File, as a file
    Path dz = tmp.resolve("jargon.dict.dz");
    try (InputStream in = Corpus.class.getResourceAsStream("/jargon.dict.dz")) {
      Files.copy(in, dz);
    }
    byte[] jargon;
    try (InputStream in = new GZIPInputStream(Files.newInputStream(dz))) {
      jargon = in.readAllBytes();
    }
    assertThat(Files.readAllBytes(dz)[3] & 4).as("FEXTRA: a dictzip header").isEqualTo(4);
    assertThat(Corpus.fromFile(dz, 0.1).fingerprint()).isEqualTo(Corpus.bundled(0.1).fingerprint())
        .isEqualTo(Corpus.of("jargon", jargon, 0.1).fingerprint());
  }

  @Test
  void aStreamLongerThanItsSizeHintIsReadWhole() throws IOException {
    byte[] text = text(77L, 200_000);
    for (int hint : new int[] {0, 1, 65_536, text.length - 1, text.length, text.length + 5}) {
      byte[] got = Corpus.readAll(new java.io.ByteArrayInputStream(text), hint, "t");
      assertThat(got).as("hint %d", hint).isEqualTo(text);
    }
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] c = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }

  @Test
  void theValidationSplitIsTheLastTenthAndTheFingerprintCoversBoth() {
    byte[] text = new byte[10_000];
    Arrays.fill(text, 0, 9_000, (byte) 'a');
    Arrays.fill(text, 9_000, text.length, (byte) 'b');
    Corpus c = Corpus.of("ab", text, 0.1);
    assertThat(c.trainBytes()).isEqualTo(9_000);
    assertThat(c.valBytes()).isEqualTo(1_000);
    int b = 64, t = 32;
    int[] in = new int[b * t], tgt = new int[b * t];
    SplittableRandom rng = new SplittableRandom(5);
    for (int i = 0; i < 50; i++) {
      c.batch(false, rng, b, t, in, tgt);
      assertThat(in).as("training inputs").containsOnly('a');
      assertThat(tgt).as("training targets").containsOnly('a');
      c.batch(true, rng, b, t, in, tgt);
      assertThat(in).as("validation inputs").containsOnly('b');
      assertThat(tgt).as("validation targets").containsOnly('b');
    }
    CRC32C crc = new CRC32C();
    crc.update(text, 0, 9_000);
    crc.update(text, 9_000, 1_000);
    assertThat(c.fingerprint()).isEqualTo(String.format(Locale.ROOT, "9000+1000 bytes, crc32c %08x", crc.getValue()));
  }

  @Test
  void strayBytesThatAreNotUtf8AreKeptButATextMostlyNotUtf8IsRefused() {
    byte[] text = text(99L, 400_000);
    text[123_456] = (byte) 0x92; // Windows-1252's right quote, as in GCIDE
    text[300_001] = (byte) 0xE7;
    Corpus c = Corpus.of("stray", text, 0.1);
    CRC32C crc = new CRC32C();
    crc.update(text);
    assertThat(c.fingerprint()).as("every byte kept").isEqualTo(String.format(Locale.ROOT,
        "360000+40000 bytes, crc32c %08x", crc.getValue()));
    byte[] latin1 = "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e ".repeat(20).getBytes(StandardCharsets.ISO_8859_1);
    assertThatThrownBy(() -> Corpus.of("latin1.txt", latin1, 0.1))
        .hasMessage("data file latin1.txt is not UTF-8 text (invalid byte sequence at offset 3; 80 in all)");
    // one stray byte per 100,000 is the most a text may hold
    byte[] edge = text(5L, 200_000);
    edge[10] = (byte) 0x92;
    edge[20] = (byte) 0x92;
    assertThat(Corpus.of("two in 200000", edge, 0.1).valBytes()).isEqualTo(20_000);
    edge[30] = (byte) 0x92;
    assertThatThrownBy(() -> Corpus.of("three in 200000", edge, 0.1)).hasMessageContaining("3 in all");
  }

  @Test
  void damagedGzipAndOtherCompressionsAreNamed() throws IOException {
    byte[] gz = gzip(text(3L, 50_000));
    Path cut = Files.write(tmp.resolve("cut.gz"), Arrays.copyOf(gz, gz.length / 2));
    assertThatThrownBy(() -> Corpus.fromFile(cut, 0.1)).hasMessageStartingWith("data file " + cut + " is damaged gzip");
    Path xz = Files.write(tmp.resolve("t.xz"), new byte[] {(byte) 0xFD, '7', 'z', 'X', 'Z', 0, 0, 4});
    assertThatThrownBy(() -> Corpus.fromFile(xz, 0.1))
        .hasMessage("data file " + xz + " is xz-compressed: --data reads text or gzip; unpack it first (xz -d)");
    Path zst = Files.write(tmp.resolve("t.zst"), new byte[] {0x28, (byte) 0xB5, 0x2F, (byte) 0xFD, 0, 0});
    assertThatThrownBy(() -> Corpus.fromFile(zst, 0.1)).hasMessageContaining("is zstd-compressed");
    Path zip = Files.write(tmp.resolve("t.zip"), new byte[] {'P', 'K', 3, 4, 20, 0});
    assertThatThrownBy(() -> Corpus.fromFile(zip, 0.1)).hasMessageContaining("is zip-compressed");
    // a text that merely starts like "PK" is text
    Path pk = Files.writeString(tmp.resolve("pk.txt"), "PK is a pair of letters. ".repeat(10));
    assertThat(Corpus.fromFile(pk, 0.1).trainBytes()).isPositive();
  }

  /** GCIDE as bench/fetch-corpus.sh leaves it (skipped where it has not been fetched): the whole text, read once. */
  @Test
  void theFetchedGcideReadsWholeWithItsStrayBytes() throws IOException {
    Path gcide = Path.of("..", "data", "gcide.dict.dz");
    assumeTrue(Files.exists(gcide), "no ../data/gcide.dict.dz: bash bench/fetch-corpus.sh gcide fetches it");
    byte[] text;
    try (InputStream in = new GZIPInputStream(Files.newInputStream(gcide))) {
      text = in.readAllBytes();
    }
    Corpus c = Corpus.fromFile(gcide, 0.1);
    assertThat(c.fingerprint()).isEqualTo(Corpus.of("gcide", text, 0.1).fingerprint());
    assertThat(c.valBytes()).isEqualTo(Math.round(text.length * 0.1));
  }
}
