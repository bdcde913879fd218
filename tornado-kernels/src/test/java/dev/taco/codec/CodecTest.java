package dev.taco.codec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.kernels.Bytes;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Properties every codec must have: round trip accuracy, argument checks, malformed payload rejection. */
class CodecTest {

  record Case(AbstractCodec codec, double gaussBound, double heavyBound) {
    @Override
    public String toString() {
      return codec.toString();
    }
  }

  static Stream<Case> codecs() {
    return Stream.of(
        new Case(new Fp32Codec(), 0, 0),
        new Case(new Bf16Codec(), 0.004, 0.004),
        new Case(new Int8GroupCodec(), 0.01, 0.05),
        new Case(new Int8GroupCodec(32), 0.01, 0.05),
        new Case(new TacoCodec(), 0.035, 0.035),
        new Case(new TacoCodec(32, Fp8Format.E4M3, 1f, true), 0.035, 0.035),
        new Case(new TacoCodec(256, Fp8Format.E4M3, 0f, true), 0.035, 0.035),
        new Case(new TacoCodec(64, Fp8Format.E5M2, 1f, true), 0.07, 0.07),
        new Case(new TacoCodec(128, Fp8Format.E4M3, 1f, false), 0.035, 0.035),
        new Case(Codecs.byName("fp8-tensor"), 0.035, 0.035),
        new Case(Codecs.byName("fp8-group"), 0.035, 0.035),
        new Case(Codecs.byName("fp8-group:g=32"), 0.035, 0.035),
        new Case(Codecs.byName("int4-group"), 0.12, 0.15),
        new Case(Codecs.byName("int4-group:g=128"), 0.15, 0.2),
        new Case(Codecs.byName("hadamard-int8"), 0.012, 0.05),
        new Case(Codecs.byName("hadamard-int8:g=32"), 0.012, 0.05),
        new Case(Codecs.byName("taco-no-ash"), 0.035, 0.035),
        new Case(Codecs.byName("taco-no-hadamard:e5m2"), 0.07, 0.07),
        new Case(Codecs.byName("taco-no-ds"), 0.035, 0.06),
        new Case(Codecs.byName("taco,nonfinite=propagate"), 0.035, 0.035),
        new Case(Codecs.byName("int8-group:nonfinite=propagate"), 0.01, 0.05));
  }

  static byte[] encode(Codec c, float[] x, int rows, int cols) {
    byte[] buf = new byte[c.encodedSize(rows, cols)];
    assertThat(c.encode(x, 0, rows, cols, buf, 0)).isEqualTo(buf.length);
    return buf;
  }

  static float[] roundTrip(Codec c, float[] x, int rows, int cols) {
    byte[] buf = encode(c, x, rows, cols);
    float[] y = new float[rows * cols];
    assertThat(c.decode(buf, 0, buf.length, y, 0, false)).isEqualTo(rows * cols);
    return y;
  }

  @ParameterizedTest
  @MethodSource("codecs")
  void roundTripErrorOnGaussianAndHeavyTailed(Case k) {
    int rows = 16;
    int cols = 1000; // not a multiple of any G
    for (int seed = 1; seed <= 2; seed++) {
      CodecStats g = CodecStats.measure(k.codec, Inputs.gaussian(seed, rows * cols), rows, cols);
      CodecStats h = CodecStats.measure(k.codec, Inputs.heavyTailed(seed, rows * cols), rows, cols);
      assertThat(g.relL2()).as("gaussian %s", g).isLessThanOrEqualTo(k.gaussBound);
      assertThat(h.relL2()).as("heavy %s", h).isLessThanOrEqualTo(k.heavyBound);
      assertThat(g.saturated()).isZero();
      assertThat(h.saturated()).isZero();
      assertThat(g.cosine()).isGreaterThanOrEqualTo(1 - k.gaussBound * k.gaussBound);
    }
  }

  @ParameterizedTest
  @MethodSource("codecs")
  void groupsSpanning2To40HaveNoCollapseNoSaturationAndSmallPerGroupError(Case k) {
    int rows = 8;
    int cols = 960;
    int g = k.codec.groupSize() > 0 ? k.codec.groupSize() : 64;
    float[] x = Inputs.wideGroups(3, rows, cols, g, 40);
    byte[] buf = encode(k.codec, x, rows, cols);
    EncodeResult r = k.codec.encodeWithStats(x, 0, rows, cols, new byte[buf.length], 0);
    float[] y = new float[x.length];
    k.codec.decode(buf, 0, buf.length, y, 0, false);
    CodecStats s = CodecStats.of(x, y, rows, cols, g, buf.length, r.saturated());
    assertThat(s.saturated()).isZero();
    if (!hasGroupScale(k.codec)) {
      // one scale per tensor / per row: groups 2^-40 below the max fall under FP8's subnormals and collapse
      assertThat(s.groupCollapseRate()).as("%s", s).isGreaterThan(0.1);
      return;
    }
    assertThat(s.groupCollapseRate()).as("%s", s).isZero();
    // element level: only values below a group's quantisation step (or exact cancellations in the inverse WHT)
    boolean int4 = k.codec instanceof Int4GroupCodec;
    assertThat(s.zeroCollapseRate()).as("%s", s)
        .isLessThan(int4 ? 0.25 : k.codec instanceof Int8GroupCodec ? 0.02 : 1e-3);
    double bound = k.codec instanceof Int8GroupCodec ? 0.02 : Math.max(k.gaussBound, 1e-9) * (int4 ? 2 : 1.5);
    assertThat(Inputs.worstGroupRelErr(x, y, rows, cols, g)).isLessThanOrEqualTo(bound);
  }

  /** False for the codecs with one scale per tensor or per row (no per-group scale): fp8-tensor, taco-no-ds. */
  static boolean hasGroupScale(AbstractCodec c) {
    return !(c instanceof Fp8TensorCodec) && !(c instanceof TacoCodec t && !t.dualScale());
  }

  @Test
  void dualScaleIsWhatPreventsZeroCollapse() {
    // each row: one group at ~1, every other group 2^-40 below it (fresh Gaussian values)
    int rows = 4;
    int cols = 512;
    long seed = Long.getLong("taco.seed", System.nanoTime());
    float[] x = Inputs.gaussian(seed, rows * cols);
    for (int i = 0; i < x.length; i++) {
      if (i % cols >= 64) {
        x[i] = Math.scalb(x[i], -40);
      }
    }
    for (String spec : new String[] {"taco", "taco:e5m2", "taco-no-hadamard"}) {
      float[] y = roundTrip(Codecs.byName(spec), x, rows, cols);
      assertThat(CodecStats.collapsedGroups(x, y, rows, cols, 64)).as(spec + " seed " + seed).isZero();
      assertThat(Inputs.worstGroupRelErr(x, y, rows, cols, 64)).as(spec + " seed " + seed)
          .isLessThan(spec.contains("e5m2") ? 0.12 : 0.06);
    }
    float[] z = roundTrip(Codecs.byName("taco-no-ds"), x, rows, cols);
    assertThat(CodecStats.collapsedGroups(x, z, rows, cols, 64)).as("seed " + seed).isEqualTo(rows * 7L); // all quiet
    float[] xl = new float[rows * 64];
    float[] zl = new float[rows * 64];
    for (int r = 0; r < rows; r++) {
      System.arraycopy(x, r * cols, xl, r * 64, 64);
      System.arraycopy(z, r * cols, zl, r * 64, 64);
    }
    assertThat(Inputs.worstGroupRelErr(xl, zl, rows, 64, 64)).isLessThan(0.06); // the loud groups are fine
    float[] t = roundTrip(Codecs.byName("fp8-tensor"), x, rows, cols);
    assertThat(CodecStats.collapsedGroups(x, t, rows, cols, 64)).isEqualTo(rows * 7L);
  }

  @Test
  void tacoHandlesGroupsSpanning2To100AndExtremeRows() {
    for (Fp8Format f : Fp8Format.values()) {
      TacoCodec c = new TacoCodec(64, f, 1f, true);
      double bound = f == Fp8Format.E4M3 ? 0.06 : 0.12;
      float[] x = Inputs.wideGroups(5, 4, 640, 64, 100);
      float[] y = roundTrip(c, x, 4, 640);
      assertThat(CodecStats.collapsedGroups(x, y, 4, 640, 64)).isZero();
      assertThat(Inputs.worstGroupRelErr(x, y, 4, 640, 64)).isLessThan(bound);
      // rows near the float32 limits: huge, tiny normal, subnormal, and a lone max value
      float[] z = new float[4 * 64];
      for (int i = 0; i < 64; i++) {
        z[i] = (i % 2 == 0 ? 1 : -1) * Float.MAX_VALUE * (1 - i / 128f);
        z[64 + i] = Float.MIN_NORMAL * (i + 1);
        z[128 + i] = Float.MIN_VALUE * (i + 1);
      }
      z[192] = Float.MAX_VALUE;
      AbstractCodec ac = c;
      EncodeResult r = ac.encodeWithStats(z, 0, 4, 64, new byte[c.encodedSize(4, 64)], 0);
      assertThat(r.saturated()).isZero();
      float[] w = roundTrip(c, z, 4, 64);
      for (float v : w) {
        assertThat(Float.isFinite(v)).isTrue();
      }
      assertThat(CodecStats.collapsedGroups(z, w, 4, 64, 64)).isZero();
      assertThat(Inputs.worstGroupRelErr(z, w, 2, 64, 64)).isLessThan(bound); // the two normal rows
      assertThat(w[192]).isCloseTo(Float.MAX_VALUE, org.assertj.core.data.Percentage.withPercentage(13));
    }
  }

  @Test
  void alphaDoesNotChangeThePayloadBody() {
    float[][] inputs = {Inputs.gaussian(9, 4 * 256), Inputs.wideGroups(9, 4, 256, 64, 40),
        Inputs.heavyTailed(9, 4 * 256)};
    for (float[] x : inputs) {
      byte[] a0 = encode(new TacoCodec(64, Fp8Format.E4M3, 0f, true), x, 4, 256);
      byte[] a5 = encode(new TacoCodec(64, Fp8Format.E4M3, 0.5f, true), x, 4, 256);
      byte[] a1 = encode(new TacoCodec(64, Fp8Format.E4M3, 1f, true), x, 4, 256);
      int h = PayloadHeader.SIZE;
      assertThat(Arrays.copyOfRange(a0, h, a0.length)).isEqualTo(Arrays.copyOfRange(a1, h, a1.length))
          .isEqualTo(Arrays.copyOfRange(a5, h, a5.length));
    }
  }

  @ParameterizedTest
  @MethodSource("codecs")
  void oddShapesAndOffsetsAndAccumulate(Case k) {
    int[][] shapes = {{1, 1}, {1, 7}, {3, 33}, {5, 129}, {2, 257}, {1, 4096}};
    for (int[] s : shapes) {
      int n = s[0] * s[1];
      float[] src = Inputs.gaussian(n, n + 5);
      byte[] buf = new byte[k.codec.encodedSize(s[0], s[1]) + 3];
      int len = k.codec.encode(src, 5, s[0], s[1], buf, 3);
      float[] base = Inputs.gaussian(n + 1, n + 2);
      float[] y = base.clone();
      assertThat(k.codec.decode(buf, 3, len, y, 2, false)).isEqualTo(n);
      float[] x = Arrays.copyOfRange(src, 5, 5 + n);
      float[] got = Arrays.copyOfRange(y, 2, 2 + n);
      assertThat(CodecStats.of(x, got, 1, n, 64, len, 0).relL2()).as("%dx%d", s[0], s[1])
          .isLessThanOrEqualTo(Math.max(k.gaussBound * 2, 0));
      assertThat(y[0]).isEqualTo(base[0]);
      assertThat(y[1]).isEqualTo(base[1]);
      float[] acc = base.clone();
      k.codec.decode(buf, 3, len, acc, 2, true);
      for (int i = 0; i < n; i++) {
        assertThat(acc[2 + i]).isEqualTo(base[2 + i] + got[i]);
      }
    }
  }

  @ParameterizedTest
  @MethodSource("codecs")
  void zerosRoundTripToZeros(Case k) {
    float[] x = new float[3 * 70];
    x[75] = -0f;
    float[] y = roundTrip(k.codec, x, 3, 70);
    for (float v : y) {
      assertThat(v).isEqualTo(0f);
    }
  }

  @ParameterizedTest
  @MethodSource("codecs")
  void rejectsBadSizesAndNonFiniteInput(Case k) {
    Codec c = k.codec;
    for (int[] s : new int[][] {{0, 5}, {5, 0}, {-1, 5}, {5, -3}}) {
      assertThatThrownBy(() -> c.encodedSize(s[0], s[1])).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("positive");
      assertThatThrownBy(() -> c.encode(new float[10], 0, s[0], s[1], new byte[1000], 0))
          .isInstanceOf(IllegalArgumentException.class);
    }
    assertThatThrownBy(() -> c.encodedSize(1 << 16, 1 << 16)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> c.encode(new float[10], 0, 2, 6, new byte[1000], 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("outside");
    assertThatThrownBy(() -> c.encode(new float[12], 0, 2, 6, new byte[c.encodedSize(2, 6) - 1], 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("output");
    for (float bad : new float[] {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY}) {
      if (k.codec.nonFinite() == AbstractCodec.NonFinite.PROPAGATE) {
        break; // tested in NonFiniteTest
      }
      float[] x = new float[12];
      x[8] = bad;
      x[10] = Float.NaN;
      assertThatThrownBy(() -> c.encode(x, 0, 2, 6, new byte[1000], 0))
          .isInstanceOf(IllegalArgumentException.class).isNotInstanceOf(MalformedPayloadException.class)
          .hasMessageContaining("index 8").hasMessageContaining("row 1, col 2");
    }
  }

  /**
   * hadamard-int8: a group whose forward transform fits float32 but whose inverse does not (one value of 1e38 among
   * zeros: the decoder adds 128 values of 1e38 / sqrt(128)) is refused at encode; it used to decode to infinity. A
   * forged payload with such a scale behind a valid checksum is malformed, and leaves the output as it was; large
   * values whose inverse fits still round-trip within the codec's bound.
   */
  @Test
  void hadamardGroupsWhoseInverseTransformOverflowsAreRefusedBothWays() {
    Codec c = Codecs.byName("hadamard-int8");
    for (int[] shape : new int[][] {{1, 1}, {7, 1}, {1, 200}, {3, 128}}) {
      float[] x = new float[shape[0] * shape[1]];
      x[x.length - 1] = -1e38f;
      assertThatThrownBy(() -> c.encode(x, 0, shape[0], shape[1], new byte[c.encodedSize(shape[0], shape[1])], 0))
          .as("%dx%d", shape[0], shape[1]).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("overflows float32");
    }
    SplittableRandom rnd = new SplittableRandom();
    float[] x = new float[2 * 128];
    for (int i = 0; i < x.length; i++) x[i] = (float) (rnd.nextGaussian() * 1e35);
    byte[] p = new byte[c.encodedSize(2, 128)];
    c.encode(x, 0, 2, 128, p, 0);
    float[] y = new float[x.length];
    c.decode(p, 0, p.length, y, 0, false);
    double err = 0, norm = 0;
    for (int i = 0; i < x.length; i++) {
      err += Math.pow((double) y[i] - x[i], 2);
      norm += Math.pow(x[i], 2);
    }
    assertThat(Math.sqrt(err / norm)).as("relative L2").isLessThan(0.02);
    Bytes.putFloat(p, PayloadHeader.SIZE + 4, Float.MAX_VALUE / 64); // group 1's scale: 128 x that overflows
    Bytes.putInt(p, 24, PayloadHeader.crc(p, PayloadHeader.SIZE, p.length - PayloadHeader.SIZE));
    float[] before = y.clone();
    assertThatThrownBy(() -> c.decode(p, 0, p.length, y, 0, false)).isInstanceOf(MalformedPayloadException.class)
        .hasMessageContaining("group 1 has scale").hasMessageContaining("overflows float32");
    assertThat(y).containsExactly(before);
  }

  /**
   * Sizes near 2^31 values: the group count {@code ceil(cols / G)} was computed as {@code (cols + G - 1) / G} in int,
   * which wrapped (fp8-tensor's one group spans the tensor: from 2^30 values up), giving too small or negative sizes.
   */
  @Test
  void payloadSizesNearTwoToTheThirtyOneAreExactOrRefused() {
    assertThat(dev.taco.kernels.TacoKernels.groupsPerRow(Integer.MAX_VALUE, 256)).isEqualTo((1 << 23));
    assertThat(dev.taco.kernels.TacoKernels.groupsPerRow((1 << 30) + 1000, (1 << 30) + 1000)).isEqualTo(1);
    assertThat(dev.taco.kernels.TacoKernels.groupsPerRow(0, 128)).isZero();
    int n = (1 << 30) + 1000;
    assertThat(Codecs.byName("fp8-tensor").encodedSize(1, n)).isEqualTo(PayloadHeader.SIZE + 4 + n);
    assertThat(Codecs.byName("fp8-tensor").encodedSize(46341, 46340))
        .isEqualTo(PayloadHeader.SIZE + 4 + 46341 * 46340);
    // int4-group (G = 32): half a byte a code, so a 2^31 - 1 row still fits: 2^26 scales and 2^30 code bytes
    assertThat(Codecs.byName("int4-group").encodedSize(1, Integer.MAX_VALUE))
        .isEqualTo(PayloadHeader.SIZE + 4 * (1 << 26) + (1 << 30));
    for (String name : new String[] {"int8-group", "fp8-group", "hadamard-int8", "taco", "taco-no-ds"}) {
      assertThatThrownBy(() -> Codecs.byName(name).encodedSize(1, Integer.MAX_VALUE)).as(name)
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("over 2^31-1");
    }
  }

  /**
   * Finite values up to {@code Float.MAX_VALUE}: a codec either encodes them into a payload its own decoder accepts,
   * or refuses them at encode with an error that says so (hadamard-int8, whose transform overflows; it once wrote a
   * payload with an infinite scale that every decoder then called malformed).
   */
  @ParameterizedTest
  @MethodSource("codecs")
  void hugeFiniteValuesRoundTripOrAreRefusedAtEncode(Case k) {
    SplittableRandom rnd = new SplittableRandom();
    float[] x = new float[4 * 256];
    for (int i = 0; i < x.length; i++) {
      x[i] = (rnd.nextBoolean() ? 1 : -1) * (i % 3 == 0 ? Float.MAX_VALUE : (float) (rnd.nextDouble() * 3e38));
    }
    byte[] buf = new byte[k.codec.encodedSize(4, 256)];
    if (k.codec.name().startsWith("hadamard")) {
      assertThatThrownBy(() -> k.codec.encode(x, 0, 4, 256, buf, 0)).isInstanceOf(IllegalArgumentException.class)
          .isNotInstanceOf(MalformedPayloadException.class).isNotInstanceOf(NonFiniteInputException.class)
          .hasMessageContaining("overflows float32").hasMessageContaining("group 0 of row 0")
          .hasMessageContaining("3.4028235E38");
      return;
    }
    int len = k.codec.encode(x, 0, 4, 256, buf, 0);
    float[] y = new float[x.length];
    k.codec.decode(buf, 0, len, y, 0, false); // no MalformedPayloadException
    for (float v : y) {
      assertThat(Float.isNaN(v)).isFalse();
    }
  }

  @ParameterizedTest
  @MethodSource("codecs")
  void decodeReduceRefusesOutOverlappingOwnAtAnotherOffset(Case k) {
    float[] x = Inputs.gaussian(new SplittableRandom().nextLong(), 2 * 64);
    byte[][] peers = {encode(k.codec, x, 2, 64), null};
    float[] buf = Inputs.gaussian(new SplittableRandom().nextLong(), 2 * 64 + 1);
    float[] before = buf.clone();
    assertThatThrownBy(() -> k.codec.decodeReduce(peers, 2, 64, buf, 0, buf, 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps own[0 ..]");
    assertThat(buf).isEqualTo(before);
    float[] expect = new float[128];
    k.codec.decodeReduce(peers, 2, 64, before, 1, expect, 0);
    k.codec.decodeReduce(peers, 2, 64, buf, 1, buf, 1); // out may be own at the same offset
    assertThat(Arrays.copyOfRange(buf, 1, 129)).isEqualTo(expect);
  }

  @Test
  void aHeaderWhoseFieldsDoNotFitIsNotWritten() {
    byte[] out = new byte[PayloadHeader.SIZE];
    for (PayloadHeader h : new PayloadHeader[] {new PayloadHeader(260, 0, 0, 128, 2, 2),
        new PayloadHeader(4, 0, 0, 70_000, 2, 2), new PayloadHeader(4, 0, 0x100, 128, 2, 2),
        new PayloadHeader(4, 0, 0, 128, -5, 3), new PayloadHeader(4, 0, 0, 128, 65_536, 65_536)}) {
      assertThatThrownBy(() -> h.write(out, 0, 0)).as(h.toString()).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("does not fit the wire format");
      assertThat(out).containsOnly(0);
    }
    new PayloadHeader(4, 1, 0, 128, 2, 2).write(out, 0, 0);
    assertThat(PayloadHeader.read(out, 0, out.length, 4, "taco").groupSize()).isEqualTo(128);
  }

  @Test
  void parseRefusesARangeOutsideTheArray() {
    AbstractCodec c = new TacoCodec();
    byte[] good = encode(c, Inputs.gaussian(3, 128), 1, 128);
    for (int[] r : new int[][] {{-1, good.length}, {0, -1}, {1, good.length}}) {
      assertThatThrownBy(() -> c.parse(good, r[0], r[1])).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("is outside in.length " + good.length);
    }
    assertThat(c.parse(good, 0, good.length).cols()).isEqualTo(128);
  }

  /** Decodes and asserts MalformedPayloadException, with {@code out} left untouched. */
  static void assertMalformed(Codec c, byte[] in, int off, int len, String what) {
    float[] out = new float[5000];
    Arrays.fill(out, 42f);
    for (boolean acc : new boolean[] {false, true}) {
      try {
        c.decode(in, off, len, out, 0, acc);
        throw new AssertionError(c + ": no exception for " + what);
      } catch (MalformedPayloadException e) {
        assertThat(e.getMessage()).startsWith(c.name() + " payload: ");
      }
      for (float v : out) {
        if (v != 42f) {
          throw new AssertionError(c + ": out written for " + what);
        }
      }
    }
  }

  @ParameterizedTest
  @MethodSource("codecs")
  void rejectsMalformedPayloadsWithoutWriting(Case k) {
    Codec c = k.codec;
    float[] x = Inputs.heavyTailed(11, 3 * 70);
    byte[] good = encode(c, x, 3, 70);
    byte[] padded = new byte[good.length + 8];
    System.arraycopy(good, 0, padded, 4, good.length);
    for (int len = 0; len < good.length; len++) {
      assertMalformed(c, padded, 4, len, "truncated to " + len);
    }
    assertMalformed(c, padded, 4, good.length + 1, "one byte too long");
    for (int i = 0; i < PayloadHeader.SIZE; i++) {
      for (int bit = 0; bit < 8; bit++) {
        byte[] b = good.clone();
        b[i] ^= (byte) (1 << bit);
        assertMalformed(c, b, 0, b.length, "header byte " + i + " bit " + bit);
      }
    }
    SplittableRandom rnd = new SplittableRandom(1);
    for (int t = 0; t < 200; t++) {
      byte[] b = good.clone();
      int i = rnd.nextInt(PayloadHeader.SIZE, b.length);
      b[i] ^= (byte) (1 << rnd.nextInt(8));
      assertMalformed(c, b, 0, b.length, "body byte " + i);
    }
    // every other codec's payload: wrong codec id, message names both
    for (String spec : Codecs.names()) {
      AbstractCodec other = Codecs.byName(spec);
      if (other.codecId() == k.codec.codecId()) {
        continue; // the taco ablations share id 4 (told apart by flags)
      }
      byte[] b = encode(other, x, 3, 70);
      assertThatThrownBy(() -> c.decode(b, 0, b.length, new float[210], 0, false))
          .isInstanceOf(MalformedPayloadException.class).hasMessageContaining("codec id " + other.codecId())
          .hasMessageContaining(other.name().replaceAll("-no-.*", ""));
    }
    assertThat(roundTrip(c, x, 3, 70)).hasSize(210); // the good payload still decodes
  }

  @Test
  void parseKeepsWhatTheSpecSetApartFromDefaults() {
    Codecs.Spec s = Codecs.parse(" TACO:E5M2,g=128 ");
    assertThat(s.base()).isEqualTo("taco");
    assertThat(s.groupSize()).as("g=128 is the default, but was given").isEqualTo(128);
    assertThat(s.format()).isEqualTo(Fp8Format.E5M2);
    assertThat(s.alpha()).isNull();
    assertThat(s.hadamard()).isNull();
    assertThat(s.codec().groupSize()).isEqualTo(128);
    Codecs.Spec plain = Codecs.parse("taco");
    assertThat(plain.groupSize()).isNull();
    assertThat(plain.codec().groupSize()).isEqualTo(TacoCodec.DEFAULT_GROUP);
    assertThat(Codecs.parse("taco,hadamard=off").hadamard()).isFalse();
    assertThat(Codecs.parse("int8-group,nonfinite=propagate").nonFinite()).isEqualTo(AbstractCodec.NonFinite.PROPAGATE);
    // parse checks the parameters' syntax; codec() whether the codec takes them
    Codecs.Spec wrong = Codecs.parse("none:g=64");
    assertThatThrownBy(wrong::codec).hasMessageContaining("none has no group size");
    assertThatThrownBy(() -> Codecs.parse("taco:g=x")).hasMessageContaining("bad parameter 'g=x'");
    assertThatThrownBy(() -> Codecs.parse("taco:zstd")).hasMessageContaining("bad parameter 'zstd'");
    assertThatThrownBy(() -> Codecs.parse(" ")).hasMessageContaining("empty codec name");
    // a parameter given twice is a mistake, not "the last one wins"
    assertThatThrownBy(() -> Codecs.parse("taco:g=64,g=128")).hasMessageContaining("g is given twice");
    assertThatThrownBy(() -> Codecs.parse("taco:e4m3,e5m2")).hasMessageContaining("the fp8 format is given twice");
    assertThatThrownBy(() -> Codecs.parse("none:nonfinite=propagate,nonfinite=refuse"))
        .hasMessageContaining("nonfinite is given twice");
    // -0 is 0 (one plan describes itself one way on every rank), and spaces around the name are not part of it
    assertThat(Codecs.byName("taco:alpha=-0").toString()).isEqualTo(Codecs.byName("taco:alpha=0").toString());
    assertThat(Codecs.parse("taco : e5m2").base()).isEqualTo("taco");
    // alpha that is no number in [0, 1] is named as such; a second codec where one is taken is called a codec
    for (String a : new String[] {"NaN", "-1", "1.5", "x", "0.5d", "1f", "0x1p-1", "1.0000000001"}) {
      assertThatThrownBy(() -> Codecs.parse("taco:alpha=" + a)).as(a)
          .hasMessageContaining("alpha must be a number in [0, 1], got '" + a.toLowerCase(java.util.Locale.ROOT) + "'");
    }
    assertThatThrownBy(() -> Codecs.parse("taco:alpha=1e-50")).hasMessageContaining("alpha=1e-50 is 0 in float32");
    assertThat(Codecs.parse("taco:alpha=-0").alpha()).isEqualTo(0f);
    assertThat(Codecs.parse("taco:alpha=2.5e-1").alpha()).isEqualTo(0.25f);
    assertThatThrownBy(() -> Codecs.parse("none,taco")).hasMessageContaining("'taco' is a codec, not a parameter");
    // an ablation given the value it fixes anyway is that ablation; the other value is refused
    assertThat(Codecs.byName("taco-no-ash:hadamard=off,alpha=0").toString())
        .isEqualTo(Codecs.byName("taco-no-ash").toString());
    assertThat(Codecs.byName("taco-no-hadamard:hadamard=off").toString())
        .isEqualTo(Codecs.byName("taco-no-hadamard").toString());
    assertThatThrownBy(() -> Codecs.byName("taco-no-ash:alpha=0.5")).hasMessageContaining("taco-no-ash fixes alpha=0");
    assertThatThrownBy(() -> Codecs.byName("taco-no-hadamard:hadamard=on"))
        .hasMessageContaining("taco-no-hadamard fixes hadamard=off");
  }

  @Test
  void groupSizeZeroIsRefusedByEveryGroupedCodec() {
    for (String c : new String[] {"fp8-group", "int8-group", "int4-group", "hadamard-int8", "taco"}) {
      assertThatThrownBy(() -> Codecs.byName(c + ":g=0")).as(c).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("group size must be a power of two in 32..256, got 0");
    }
    assertThat(Codecs.byName("fp8-tensor").groupSize()).as("one group over the tensor: its own codec").isZero();
  }

  /** Rewrites a header field and fixes the header CRC, so that only the field check can catch it. */
  static byte[] withField(byte[] p, int off, int value, int width) {
    byte[] b = p.clone();
    for (int i = 0; i < width; i++) {
      b[off + i] = (byte) (value >>> (8 * i));
    }
    dev.taco.kernels.Bytes.putInt(b, 20, PayloadHeader.crc(b, 0, 20));
    return b;
  }

  @Test
  void fieldChecksBehindAValidHeaderCrc() {
    TacoCodec c = new TacoCodec();
    byte[] good = encode(c, Inputs.gaussian(1, 2 * 128), 2, 128);
    String[][] cases = {
        {"6", "3", "1", "fp8 format 3"}, {"7", "8", "1", "flag"}, {"8", "48", "2", "group size 48"},
        {"8", "512", "2", "group size 512"}, {"10", "1", "2", "reserved"}, {"12", "0", "4", "shape"},
        {"16", "-1", "4", "shape"}, {"12", "16777216", "4", "shape"}, {"12", "3", "4", "implies"},
        {"4", "2", "1", "version"}};
    for (String[] k : cases) {
      byte[] b = withField(good, Integer.parseInt(k[0]), Integer.parseInt(k[1]), Integer.parseInt(k[2]));
      assertThatThrownBy(() -> c.decode(b, 0, b.length, new float[4096], 0, false))
          .as("field at %s", k[0]).isInstanceOf(MalformedPayloadException.class).hasMessageContaining(k[3]);
    }
    // a NaN coarse scale and a NaN FP8 code behind a valid body CRC
    byte[] s = good.clone();
    dev.taco.kernels.Bytes.putFloat(s, PayloadHeader.SIZE, Float.NaN);
    dev.taco.kernels.Bytes.putInt(s, 24, PayloadHeader.crc(s, 28, s.length - 28));
    assertThatThrownBy(() -> c.decode(s, 0, s.length, new float[256], 0, false))
        .isInstanceOf(MalformedPayloadException.class).hasMessageContaining("coarse scale");
    byte[] q = good.clone();
    q[q.length - 1] = 0x7F;
    dev.taco.kernels.Bytes.putInt(q, 24, PayloadHeader.crc(q, 28, q.length - 28));
    assertThatThrownBy(() -> c.decode(q, 0, q.length, new float[256], 0, false))
        .isInstanceOf(MalformedPayloadException.class).hasMessageContaining("NaN/Inf");
    // too small an output array is the caller's error, not a malformed payload, and writes nothing
    float[] small = new float[255];
    assertThatThrownBy(() -> c.decode(good, 0, good.length, small, 0, false))
        .isInstanceOf(IllegalArgumentException.class).isNotInstanceOf(MalformedPayloadException.class);
    assertThat(small).containsOnly(0f);
  }

  @Test
  void tacoWireCostIsAtMost055OfBf16() {
    TacoCodec c = new TacoCodec();
    Bf16Codec b = new Bf16Codec();
    for (int[] s : new int[][] {{1, 4096}, {64, 64}, {4, 1024}, {32, 128}}) {
      double ratio = (double) c.encodedSize(s[0], s[1]) / b.encodedSize(s[0], s[1]);
      assertThat(ratio).as("%dx%d", s[0], s[1]).isLessThanOrEqualTo(0.55);
    }
    assertThat(c.encodedSize(4, 1024)).isEqualTo(28 + 4 * 4 + 4 * 16 * 65);
  }

  @Test
  void byNameFactory() {
    assertThat(Codecs.byName("fp32")).isInstanceOf(Fp32Codec.class);
    assertThat(Codecs.byName("none")).isInstanceOf(Bf16Codec.class);
    assertThat(Codecs.byName("int8-group")).isInstanceOf(Int8GroupCodec.class);
    assertThat(((Int8GroupCodec) Codecs.byName("int8-group:g=64")).groupSize()).isEqualTo(64);
    TacoCodec t = (TacoCodec) Codecs.byName("taco");
    assertThat(t.groupSize()).isEqualTo(TacoCodec.DEFAULT_GROUP);
    assertThat(t.format()).isEqualTo(Fp8Format.E4M3);
    TacoCodec u = (TacoCodec) Codecs.byName("TACO:e5m2,g=128,alpha=0.5,hadamard=off");
    assertThat(u.format()).isEqualTo(Fp8Format.E5M2);
    assertThat(u.groupSize()).isEqualTo(128);
    assertThat(u.alpha()).isEqualTo(0.5f);
    assertThat(u.hadamard()).isFalse();
    for (String bad : new String[] {"", "fp16", "taco:e3m4", "taco:g=48", "taco:alpha=2", "none:g=4", "taco:g=x"}) {
      assertThatThrownBy(() -> Codecs.byName(bad)).as(bad).isInstanceOf(IllegalArgumentException.class);
    }
    assertThatThrownBy(() -> Codecs.byName("fp16")).hasMessageContaining("fp32, none, fp8-tensor");
  }

  /** The calibration's relative L2 error is {@link CodecStats#measure}'s, bit for bit, for every codec calibration tries. */
  @Test
  void relL2AloneIsMeasuresRelL2() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    int rows = 24, cols = 768;
    float[] x = Inputs.outlierChannels(seed, rows, cols);
    for (String c : new String[] {"none", "fp8-tensor", "int8-group:g=64", "taco", "taco:g=32,hadamard=off"}) {
      AbstractCodec codec = Codecs.byName(c);
      assertThat(CodecStats.relL2(codec, x, rows, cols)).as("seed %d, %s", seed, c)
          .isEqualTo(CodecStats.measure(codec, x, rows, cols).relL2()).isPositive();
    }
  }

  /** The sums of squares behind the relative L2 error, against a float64 reference summed in order. */
  @Test
  void sumsOfSquaresMatchAnOrderedFloat64Sum() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    SplittableRandom rnd = new SplittableRandom(seed);
    for (int n : new int[] {0, 1, 3, 4, 7, 1001, 393_216}) {
      float[] x = new float[n], y = new float[n];
      for (int i = 0; i < n; i++) {
        x[i] = (float) (rnd.nextGaussian() * Math.exp(3 * rnd.nextGaussian()));
        y[i] = x[i] * (1 + (float) (0.03 * rnd.nextGaussian()));
      }
      double xx = 0, ee = 0;
      for (int i = 0; i < n; i++) {
        xx += (double) x[i] * x[i];
        ee += ((double) y[i] - x[i]) * ((double) y[i] - x[i]);
      }
      double[] s = CodecStats.squares(x, y, n);
      assertThat(s[0]).as("seed %d, n %d: x.x", seed, n).isCloseTo(xx,
          org.assertj.core.data.Percentage.withPercentage(1e-9));
      assertThat(s[1]).as("seed %d, n %d: e.e", seed, n).isCloseTo(ee,
          org.assertj.core.data.Percentage.withPercentage(1e-9));
      if (n > 0) assertThat(s[0]).isPositive();
      if (n >= 4) { // a NaN in any of the four sums reaches the result
        float[] z = x.clone();
        z[n - 1 - n % 4] = Float.NaN;
        assertThat(CodecStats.squares(z, y, n)[1]).as("n %d", n).isNaN();
      }
    }
  }
}
