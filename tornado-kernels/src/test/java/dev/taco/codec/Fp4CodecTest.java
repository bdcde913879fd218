package dev.taco.codec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Fp4;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.Hadamard;
import dev.taco.kernels.TacoKernels;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code mxfp4} and {@code nvfp4} against a reference written here from the formats' specs (OCP MX v1.0 for E2M1,
 * E8M0 and MXFP4's scale; E4M3 by its OCP formula; the NVFP4 rule of {@link NvFp4Codec}): every E2M1, E8M0 and E4M3
 * scale code; payload bytes and decoded floats bit for bit on random shapes (odd widths, widths below the block, one
 * row); sizes; NaN/Inf under both policies; malformed payloads; decodeReduce; the spellings. The reference rounds by
 * search over the formats' values (ties to the even code) in float64, and each float32 operation the codecs' rule
 * names is the float64 result rounded to float (exact: one operation on float32 operands). Seeds are printed;
 * {@code -Dtaco.seed=N} repeats a run.
 */
class Fp4CodecTest {
  static final long SEED = Long.getLong("taco.seed", System.nanoTime());
  static final double[] E2M1 = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

  @BeforeAll
  static void seed() {
    System.out.println("Fp4CodecTest seed = " + SEED);
  }

  // ---- the formats, code by code ----

  /** E2M1 of {@code v} by search: the nearest of the eight magnitudes, ties to the even code, clamped to 6. */
  static double e2m1(double v) {
    double a = Math.min(Math.abs(v), 6);
    int best = 0;
    for (int k = 1; k < E2M1.length; k++) {
      double d = Math.abs(a - E2M1[k]) - Math.abs(a - E2M1[best]);
      if (d < 0 || d == 0 && k % 2 == 0) {
        best = k;
      }
    }
    return Math.copySign(E2M1[best], v);
  }

  /** The OCP E4M3 value of code {@code c} (0..0x7E): {@code m 2^-9} for exponent field 0, else {@code (1 + m/8) 2^(e-7)}. */
  static double e4m3Value(int c) {
    int e = c >> 3;
    int m = c & 7;
    return e == 0 ? m * 0x1p-9 : (1 + m / 8.0) * Math.scalb(1.0, e - 7);
  }

  /** The E4M3 code of {@code v >= 0} by search: nearest, ties to the even code, clamped to 448. */
  static int e4m3(double v) {
    int best = 0;
    for (int c = 1; c <= 0x7E; c++) {
      double d = Math.abs(v - e4m3Value(c)) - Math.abs(v - e4m3Value(best));
      if (d < 0 || d == 0 && c % 2 == 0) {
        best = c;
      }
    }
    return best;
  }

  @Test
  void everyE2M1CodeIsTheSpecsValueAndRoundsToNearestEven() {
    for (int c = 0; c < 16; c++) {
      double want = (c & 8) != 0 ? -E2M1[c & 7] : E2M1[c & 7];
      assertThat(Fp4.decodeE2M1(c)).as("code %d", c).isEqualTo((float) want);
      assertThat(Fp4.encodeE2M1((float) want)).as("code %d", c).isEqualTo(c);
    }
    assertThat(Float.floatToRawIntBits(Fp4.decodeE2M1(8))).as("code 8 is -0").isEqualTo(0x80000000);
    for (int k = 0; k + 1 < E2M1.length; k++) { // every midpoint goes to the even code, its neighbours to the nearer
      float mid = (float) ((E2M1[k] + E2M1[k + 1]) / 2);
      assertThat(Fp4.encodeE2M1(mid)).as("midpoint %s", mid).isEqualTo(k % 2 == 0 ? k : k + 1);
      assertThat(Fp4.encodeE2M1(Math.nextUp(mid))).isEqualTo(k + 1);
      assertThat(Fp4.encodeE2M1(Math.nextDown(mid))).isEqualTo(k);
      assertThat(Fp4.encodeE2M1(-mid)).isEqualTo(8 | (k % 2 == 0 ? k : k + 1));
    }
    for (float big : new float[] {Math.nextUp(6f), 7f, 8f, 1e30f, Float.MAX_VALUE, Float.POSITIVE_INFINITY}) {
      assertThat(Fp4.encodeE2M1(big)).as("%s saturates", big).isEqualTo(7);
      assertThat(Fp4.encodeE2M1(-big)).isEqualTo(15);
    }
    SplittableRandom r = new SplittableRandom(SEED);
    for (int i = 0; i < 200_000; i++) {
      float v = (float) Math.scalb(r.nextDouble(-1, 1), r.nextInt(-150, 5));
      assertThat((double) Fp4.decodeE2M1(Fp4.encodeE2M1(v))).as("seed %d: %s", SEED, v).isEqualTo(e2m1(v));
    }
  }

  @Test
  void everyE8M0CodeIsItsPowerOfTwoAndMxScaleIsTheSpecsSharedExponent() {
    for (int c = 0; c < 255; c++) {
      assertThat((double) Fp4.decodeE8M0(c)).as("code %d", c).isEqualTo(Math.scalb(1.0, c - 127));
    }
    assertThat(Fp4.decodeE8M0(Fp4.E8M0_NAN)).isNaN();
    SplittableRandom r = new SplittableRandom(SEED + 1);
    for (int i = 0; i < 100_000; i++) {
      float m = Float.intBitsToFloat(r.nextInt(0x7F800000)); // every finite non-negative float alike
      // X = 2^(floor(log2 m) - emax_elem), emax_elem = 2, at least 2^-127 (OCP MX v1.0 §6.3)
      int want = m == 0 ? 0 : Math.max(0, Math.getExponent((double) m) - 2 + 127);
      assertThat(Fp4.mxScaleCode(m)).as("seed %d: amax %s", SEED, m).isEqualTo(want);
      assertThat(m / Fp4.decodeE8M0(want)).as("amax over X").isLessThan(8f);
    }
  }

  @Test
  void everyE4M3BlockScaleCodeDecodesAsTheOcpFormula() {
    for (int c = 0; c <= 0x7E; c++) {
      // a row of absmax 2688 has decode scale 1: the block's scale is its E4M3 value
      assertThat((double) GroupKernels.nvScale(c, 2688f)).as("code 0x%02x", c).isEqualTo(e4m3Value(c));
      assertThat(e4m3(e4m3Value(c))).isEqualTo(c);
    }
  }

  // ---- the codecs against the reference ----

  /** What the reference gives for a payload: the scale bytes, the row absmaxes (nvfp4) and the decoded values. */
  record Ref(byte[] scales, float[] rowMax, float[] y) {}

  /** MXFP4 or NVFP4 of a {@code rows x cols} tensor, as the codecs' Javadoc states the rule. */
  static Ref reference(boolean nv, boolean hadamard, float[] x, int rows, int cols) {
    int g = nv ? 16 : 32;
    int ng = TacoKernels.groupsPerRow(cols, g);
    byte[] scales = new byte[rows * ng];
    float[] rowMax = new float[rows];
    float[] y = new float[rows * cols];
    for (int r = 0; r < rows; r++) {
      float[][] w = new float[ng][];
      for (int t = 0; t < ng; t++) { // the block, rotated (float32, the codec's own transform) when hadamard
        w[t] = new float[hadamard ? g : Math.min(g, cols - t * g)];
        for (int i = 0; i < w[t].length; i++) {
          w[t][i] = t * g + i < cols ? x[r * cols + t * g + i] : 0f;
        }
        if (hadamard) {
          Hadamard.fwht(w[t], 0, g);
        }
        rowMax[r] = (float) Math.max(rowMax[r], amax(w[t]));
      }
      for (int t = 0; t < ng; t++) {
        double m = amax(w[t]);
        double a;
        if (nv) {
          int s = rowMax[r] == 0 ? 0 : e4m3((float) ((float) (m / rowMax[r]) * 448));
          scales[r * ng + t] = (byte) s;
          a = (float) (e4m3Value(s) * (float) (rowMax[r] / 2688.0));
        } else {
          int e = m == 0 ? -127 : Math.max(-127, Math.getExponent(m) - Fp4.E2M1_EMAX);
          scales[r * ng + t] = (byte) (e + 127);
          a = Math.scalb(1.0, e);
        }
        float[] v = new float[w[t].length];
        for (int i = 0; i < v.length; i++) {
          double q = a == 0 ? 0 : e2m1((float) (w[t][i] / a));
          v[i] = q == 0 ? 0f : (float) (q * a); // a value that rounds to zero goes as +0
        }
        if (hadamard) {
          Hadamard.fwht(v, 0, g);
        }
        for (int i = 0; i < v.length && t * g + i < cols; i++) {
          y[r * cols + t * g + i] = v[i];
        }
      }
    }
    return new Ref(scales, rowMax, y);
  }

  static double amax(float[] v) {
    double m = 0;
    for (float f : v) {
      m = Math.max(m, Math.abs(f));
    }
    return m;
  }

  static float[] randomInput(SplittableRandom r, int rows, int cols) {
    float[] x = new float[rows * cols];
    int kind = r.nextInt(5);
    int scale = kind == 4 ? 0 : r.nextInt(-60, 60);
    for (int i = 0; i < x.length; i++) {
      double v = switch (kind) {
        case 0 -> r.nextGaussian();
        case 1 -> r.nextGaussian() * Math.exp(2 * r.nextGaussian()); // heavy tails
        case 2 -> r.nextInt(-48, 49) / 8.0; // many values on E2M1's midpoints of some scale
        case 3 -> r.nextInt(20) == 0 ? 0 : Math.scalb(r.nextGaussian(), r.nextInt(-30, 30)); // blocks far apart
        default -> Math.scalb(r.nextGaussian(), r.nextInt(-149, -110)); // subnormal and tiny rows
      };
      x[i] = (float) Math.scalb(v, scale);
    }
    return x;
  }

  @ParameterizedTest
  @ValueSource(strings = {"mxfp4:hadamard=off", "mxfp4:hadamard=on", "nvfp4:hadamard=off", "nvfp4:hadamard=on"})
  void payloadBytesAndDecodedFloatsAreTheReferences(String spec) {
    GroupQuantCodec c = (GroupQuantCodec) Codecs.byName(spec);
    boolean nv = c.kind() == GroupKernels.NVFP4;
    SplittableRandom r = new SplittableRandom(SEED ^ spec.hashCode());
    int[][] fixed = {{1, 1}, {1, 7}, {1, 15}, {1, 31}, {3, 33}, {2, 17}, {1, 1000}, {4, 768}};
    for (int round = 0; round < 60; round++) {
      int rows = round < fixed.length ? fixed[round][0] : r.nextInt(1, 6);
      int cols = round < fixed.length ? fixed[round][1] : r.nextInt(1, 300);
      float[] x = randomInput(r, rows, cols);
      String at = "seed " + SEED + ", " + spec + " " + rows + "x" + cols + " round " + round;
      Ref ref = reference(nv, c.hadamard(), x, rows, cols);
      byte[] p = CodecTest.encode(c, x, rows, cols);
      int ng = TacoKernels.groupsPerRow(cols, c.groupSize());
      int scaleOff = PayloadHeader.SIZE + (nv ? 4 * rows : 0);
      assertThat(Arrays.copyOfRange(p, scaleOff, scaleOff + rows * ng)).as(at + ": scale bytes").isEqualTo(ref.scales);
      for (int row = 0; nv && row < rows; row++) {
        assertThat(Bytes.getFloat(p, PayloadHeader.SIZE + 4 * row)).as(at + ": row absmax").isEqualTo(ref.rowMax[row]);
      }
      float[] y = new float[rows * cols];
      c.decode(p, 0, p.length, y, 0, false);
      for (int i = 0; i < y.length; i++) {
        if (Float.floatToRawIntBits(y[i]) != Float.floatToRawIntBits(ref.y[i])) {
          throw new AssertionError(at + ": value " + i + " = " + x[i] + " decodes to " + y[i] + ", the reference to "
              + ref.y[i]);
        }
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"mxfp4:hadamard=off", "mxfp4:hadamard=on", "nvfp4:hadamard=off", "nvfp4:hadamard=on"})
  void payloadSizeIsHeaderScalesAndTwoCodesAByte(String spec) {
    GroupQuantCodec c = (GroupQuantCodec) Codecs.byName(spec);
    SplittableRandom r = new SplittableRandom(SEED + spec.length());
    for (int round = 0; round < 200; round++) {
      int rows = r.nextInt(1, 50);
      int cols = round == 0 ? 1 : r.nextInt(1, 5000);
      int g = c.groupSize();
      int ng = (cols + g - 1) / g;
      long codes = c.hadamard() ? (long) ng * g : cols + (cols & 1);
      long want = PayloadHeader.SIZE + (c.kind() == GroupKernels.NVFP4 ? 4L * rows : 0) + (long) rows * ng
          + rows * codes / 2;
      assertThat((long) c.encodedSize(rows, cols)).as("seed %d %dx%d", SEED, rows, cols).isEqualTo(want);
    }
    float[] x = Inputs.gaussian(SEED, 3 * 77);
    assertThat(c.encode(x, 0, 3, 77, new byte[c.encodedSize(3, 77)], 0)).isEqualTo(c.encodedSize(3, 77));
    // the wire cost against bf16 (2 bytes a value) at the hidden sizes of training: mxfp4 0.266, nvfp4 0.284 at 768
    for (int hidden : new int[] {768, 1024, 4096}) {
      double ratio = c.encodedSize(4096, hidden) / (2.0 * 4096 * hidden);
      assertThat(ratio).as(spec + " at hidden " + hidden).isLessThanOrEqualTo(0.30)
          .isCloseTo(c.kind() == GroupKernels.MXFP4 ? 0.2657 : 0.28125 + 2.0 / hidden,
              org.assertj.core.data.Offset.offset(1e-3));
    }
  }

  // ---- NaN/Inf, -0, clipping, range ----

  @ParameterizedTest
  @ValueSource(strings = {"mxfp4:hadamard=off", "mxfp4:hadamard=on", "nvfp4:hadamard=off", "nvfp4:hadamard=on"})
  void nonFiniteValuesAreRefusedOrSentAsTheMarkerAndAFiniteValueNeverIs(String spec) {
    GroupQuantCodec refuse = (GroupQuantCodec) Codecs.byName(spec);
    GroupQuantCodec send = (GroupQuantCodec) Codecs.byName(spec + ",nonfinite=propagate");
    int rows = 3;
    int cols = 70;
    float[] x = Inputs.gaussian(SEED, rows * cols);
    x[5] = -0f;
    x[6] = -1e-30f; // rounds to zero: sent as +0, never as the marker
    x[75] = Float.NaN;
    x[140] = Float.NEGATIVE_INFINITY;
    assertThatThrownBy(() -> CodecTest.encode(refuse, x, rows, cols)).isInstanceOf(NonFiniteInputException.class)
        .hasMessageContaining("index 75 (row 1, col 5)");
    byte[] p = CodecTest.encode(send, x, rows, cols);
    assertThat(p[7] & PayloadHeader.FLAG_NONFINITE).isNotZero();
    int codeOff = PayloadHeader.SIZE + (int) GroupKernels.scaleBytes(rows, cols, send.groupSize(), send.kind());
    int stride = (int) GroupKernels.codeStride(cols, send.groupSize(), send.kind(), send.hadamard());
    for (int row = 0; row < rows; row++) {
      for (int j = 0; j < stride; j++) {
        int nibble = (p[codeOff + (row * stride + j) / 2] >> 4 * (j & 1)) & 0xF;
        boolean marker = row * cols + j == 75 || row * cols + j == 140;
        assertThat(nibble == 8).as("%s: code of row %d col %d", spec, row, j).isEqualTo(marker && j < cols);
      }
    }
    float[] y = new float[rows * cols];
    send.decode(p, 0, p.length, y, 0, false);
    assertThat(y[75]).isNaN();
    assertThat(y[140]).as("E2M1 has no infinity").isNaN();
    if (!send.hadamard()) {
      assertThat(Float.floatToRawIntBits(y[6])).isZero();
    }
    // with the rotation, the blocks holding them go untransformed: their other values as without it
    float[] plain = new float[rows * cols];
    GroupQuantCodec off = (GroupQuantCodec) Codecs.byName(send.name() + ":hadamard=off,nonfinite=propagate");
    byte[] q = CodecTest.encode(off, x, rows, cols);
    off.decode(q, 0, q.length, plain, 0, false);
    int g = send.groupSize();
    for (int i = 0; i < x.length; i++) {
      assertThat(Float.isNaN(y[i])).isEqualTo(i == 75 || i == 140);
      boolean special = i / cols == 1 && (i % cols) / g == 5 / g || i / cols == 2 && (i % cols) / g == 0;
      if (send.kind() == GroupKernels.MXFP4 && special) { // (nvfp4's row absmax mixes in the rotated blocks)
        assertThat(Float.floatToIntBits(y[i])).as("%s: value %d of an untransformed block", spec, i)
            .isEqualTo(Float.floatToIntBits(plain[i]));
      }
    }
    // a finite tensor: the same payload under both policies, no marker
    float[] f = Inputs.gaussian(SEED + 1, rows * cols);
    assertThat(CodecTest.encode(send, f, rows, cols)).isEqualTo(CodecTest.encode(refuse, f, rows, cols));
  }

  @Test
  void clippedValuesAreCountedAsSaturated() {
    float[] x = new float[32];
    x[0] = 7f; // amax 7: X = 2^(2 - 2) = 1, so 7 is clipped to 6
    x[1] = 1f;
    x[2] = -6f;
    GroupQuantCodec mx = (GroupQuantCodec) Codecs.byName("mxfp4:hadamard=off");
    EncodeResult r = mx.encodeWithStats(x, 0, 1, 32, new byte[mx.encodedSize(1, 32)], 0);
    assertThat(r.saturated()).isEqualTo(1);
    float[] y = CodecTest.roundTrip(mx, x, 1, 32);
    assertThat(y[0]).isEqualTo(6f);
    assertThat(y[1]).isEqualTo(1f);
    assertThat(y[2]).isEqualTo(-6f);
    // nvfp4: a block whose E4M3 scale rounds down clips its maximum: 15 / 16 of the row's absmax is 420 in E4M3
    // units, which rounds to 416, so 15 / (416 A / 2688) = 6.06 > 6
    float[] z = new float[32];
    z[0] = 16f;
    z[16] = 15f;
    GroupQuantCodec nv = (GroupQuantCodec) Codecs.byName("nvfp4");
    EncodeResult s = nv.encodeWithStats(z, 0, 1, 32, new byte[nv.encodedSize(1, 32)], 0);
    assertThat(s.saturated()).isEqualTo(1);
    assertThat(CodecTest.roundTrip(nv, z, 1, 32)[16]).isEqualTo(6f * (416f * (16f / 2688f)));
  }

  @ParameterizedTest
  @ValueSource(strings = {"mxfp4", "nvfp4"})
  void magnitudesAbove2To119AreRefusedNamingThePlace(String spec) {
    AbstractCodec c = Codecs.byName(spec);
    float[] x = Inputs.gaussian(SEED, 2 * 40);
    x[43] = 0x1p119f; // the largest it takes: encodes, finite
    float[] y = CodecTest.roundTrip(c, x, 2, 40);
    for (float v : y) {
      assertThat(Float.isFinite(v)).isTrue();
    }
    x[44] = Math.nextUp(0x1p119f);
    assertThatThrownBy(() -> CodecTest.encode(c, x, 2, 40)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("index 44 (row 1, col 4) is above 2^119");
  }

  @Test
  void theFormatsRange() {
    // mxfp4's E8M0 scale spans every group of a row, nvfp4's E4M3 block scale 2^-19 below the row's absmax
    float[] x = Inputs.wideGroups(SEED, 8, 1024, 32, 40);
    float[] mx = CodecTest.roundTrip(Codecs.byName("mxfp4:hadamard=off"), x, 8, 1024);
    assertThat(CodecStats.collapsedGroups(x, mx, 8, 1024, 32)).as("seed %d", SEED).isZero();
    float[] w = Inputs.wideGroups(SEED, 8, 1024, 16, 40);
    float[] nv = CodecTest.roundTrip(Codecs.byName("nvfp4"), w, 8, 1024);
    assertThat(CodecStats.collapsedGroups(w, nv, 8, 1024, 16)).as("seed %d", SEED).isPositive();
  }

  // ---- malformed payloads ----

  @ParameterizedTest
  @ValueSource(strings = {"mxfp4:hadamard=off", "mxfp4:hadamard=on", "nvfp4:hadamard=off", "nvfp4:hadamard=on"})
  void malformedPayloadsAreRejectedNamingTheProblemAndWriteNothing(String spec) {
    AbstractCodec c = Codecs.byName(spec);
    GroupQuantCodec q = (GroupQuantCodec) c;
    boolean nv = q.kind() == GroupKernels.NVFP4;
    int rows = 3;
    int cols = 70;
    byte[] good = CodecTest.encode(c, Inputs.heavyTailed(SEED, rows * cols), rows, cols);
    for (int len = 0; len < good.length; len++) {
      CodecTest.assertMalformed(c, good, 0, len, "truncated to " + len);
    }
    CodecTest.assertMalformed(c, Arrays.copyOf(good, good.length + 1), 0, good.length + 1, "one byte too long");
    for (int i = 0; i < PayloadHeader.SIZE; i++) {
      byte[] b = good.clone();
      b[i] ^= 0x10;
      CodecTest.assertMalformed(c, b, 0, b.length, "header byte " + i);
    }
    int g = nv ? 16 : 32;
    String[][] fields = {{"0", "1", "4", "bad magic"}, {"4", "2", "1", "version 2"}, {"5", "3", "1", "codec id 3"},
        {"6", "1", "1", "fp8 format 1"}, {"7", q.hadamard() ? "0" : "1", "1", "flags 0x"}, {"7", "64", "1", "flags 0x"},
        {"8", String.valueOf(nv ? 32 : 16), "2", "group size " + (nv ? 32 : 16) + ", expected " + g},
        {"8", "64", "2", "group size 64"}, {"10", "1", "2", "reserved"}, {"12", "0", "4", "bad shape"},
        {"12", "4", "4", "truncated"}, {"16", "100", "4", "truncated"}, {"16", "-1", "4", "bad shape"}};
    for (String[] f : fields) {
      byte[] b = CodecTest.withField(good, Integer.parseInt(f[0]), Integer.parseInt(f[1]), Integer.parseInt(f[2]));
      CodecTest.assertMalformed(c, b, 0, b.length, "field at " + f[0]);
      assertThatThrownBy(() -> c.decode(b, 0, b.length, new float[4096], 0, false)).as("field at %s", f[0])
          .hasMessageContaining(f[3]);
    }
    byte[] crc = good.clone();
    crc[crc.length - 1] ^= 1;
    assertThatThrownBy(() -> c.decode(crc, 0, crc.length, new float[4096], 0, false))
        .hasMessageContaining("body checksum mismatch");
    crc[3] ^= 1;
    assertThatThrownBy(() -> c.decode(crc, 0, crc.length, new float[4096], 0, false)).hasMessageContaining("magic");
    // bad scales and codes behind a valid body checksum
    int scales = PayloadHeader.SIZE + (nv ? 4 * rows : 0);
    int codes = PayloadHeader.SIZE + (int) GroupKernels.scaleBytes(rows, cols, g, q.kind());
    if (nv) {
      for (float a : new float[] {-1f, -0f, Float.NaN, Float.POSITIVE_INFINITY, 0x1p124f}) {
        byte[] b = good.clone();
        Bytes.putFloat(b, PayloadHeader.SIZE + 4, a);
        Bytes.putInt(b, 24, PayloadHeader.crc(b, 28, b.length - 28));
        assertBodyMalformed(c, b, "row 1 has row absmax " + a);
      }
      assertBodyMalformed(c, withByte(good, scales + 2, 0x85), "group 2 (row 0) has E4M3 block scale 0x85: negative");
      assertBodyMalformed(c, withByte(good, scales + 6, 0x7F), "group 6 (row 1) has E4M3 block scale 0x7f: NaN");
      assertBodyMalformed(c, withByte(good, scales + 6, 0xFF), "E4M3 block scale 0xff: NaN");
    } else {
      assertBodyMalformed(c, withByte(good, scales + 1, 0xFF), "group 1 (row 0) has E8M0 scale 0xff: NaN in the MX");
      assertBodyMalformed(c, withByte(good, scales + 3, 0xF8), "group 3 (row 1) has E8M0 scale 0xf8 = 2^121, above");
      byte[] top = withByte(good, scales + 3, GroupKernels.MX_MAX_SCALE);
      c.decode(top, 0, top.length, new float[rows * cols], 0, false); // 2^120 is still a valid scale
    }
    assertBodyMalformed(c, withByte(good, codes, (good[codes] & 0xF0) | 8), "non-finite marker code at code index 0");
    assertThat(CodecTest.roundTrip(c, Inputs.heavyTailed(SEED, rows * cols), rows, cols)).hasSize(rows * cols);
  }

  static byte[] withByte(byte[] p, int at, int v) {
    byte[] b = p.clone();
    b[at] = (byte) v;
    Bytes.putInt(b, 24, PayloadHeader.crc(b, 28, b.length - 28));
    return b;
  }

  static void assertBodyMalformed(AbstractCodec c, byte[] b, String what) {
    CodecTest.assertMalformed(c, b, 0, b.length, what);
    assertThatThrownBy(() -> c.decode(b, 0, b.length, new float[4096], 0, false)).hasMessageContaining(what);
  }

  // ---- decodeReduce, spellings ----

  @ParameterizedTest
  @ValueSource(strings = {"mxfp4:hadamard=off", "mxfp4:hadamard=on", "nvfp4:hadamard=off", "nvfp4:hadamard=on"})
  void decodeReduceIsDecodeAndSumInRankOrder(String spec) {
    AbstractCodec c = Codecs.byName(spec + ",nonfinite=propagate");
    SplittableRandom r = new SplittableRandom(SEED * 31 + spec.hashCode());
    int rows = r.nextInt(1, 6);
    int cols = r.nextInt(1, 200);
    int n = rows * cols;
    byte[][] payloads = new byte[4][];
    for (int q = 0; q < 4; q++) {
      if (q != 1) {
        payloads[q] = CodecTest.encode(c, randomInput(r, rows, cols), rows, cols);
      }
    }
    float[] own = Inputs.heavyTailed(SEED, n);
    float[] want = new float[n];
    for (byte[] p : payloads) {
      if (p != null) {
        c.decode(p, 0, p.length, want, 0, true);
      }
    }
    for (int i = 0; i < n; i++) {
      want[i] += own[i];
    }
    float[] got = new float[n];
    c.decodeReduce(payloads, rows, cols, own, 0, got, 0);
    assertThat(got).as("seed %d %s %dx%d", SEED, spec, rows, cols).isEqualTo(want);
  }

  @Test
  void spellingsDefaultsAndErrors() {
    GroupQuantCodec mx = (GroupQuantCodec) Codecs.byName("mxfp4");
    GroupQuantCodec nv = (GroupQuantCodec) Codecs.byName("NVFP4");
    assertThat(mx).isInstanceOf(MxFp4Codec.class);
    assertThat(nv).isInstanceOf(NvFp4Codec.class);
    assertThat(mx.hadamard()).isEqualTo(MxFp4Codec.DEFAULT_HADAMARD).isTrue();
    assertThat(nv.hadamard()).isEqualTo(NvFp4Codec.DEFAULT_HADAMARD).isFalse();
    assertThat(mx.groupSize()).isEqualTo(32);
    assertThat(nv.groupSize()).isEqualTo(16);
    assertThat(((GroupQuantCodec) Codecs.byName("mxfp4:hadamard=off")).hadamard()).isFalse();
    assertThat(((GroupQuantCodec) Codecs.byName("nvfp4,hadamard=on")).hadamard()).isTrue();
    for (String s : new String[] {"mxfp4", "nvfp4:hadamard=on", "mxfp4:hadamard=off,nonfinite=propagate"}) {
      AbstractCodec c = Codecs.byName(s);
      assertThat(Codecs.byName(c.toString()).toString()).as(s).isEqualTo(c.toString());
      assertThat(((GroupQuantCodec) Codecs.byName(c.toString())).hadamard())
          .isEqualTo(((GroupQuantCodec) c).hadamard());
    }
    assertThatThrownBy(() -> Codecs.byName("mxfp4:g=64")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("codec 'mxfp4:g=64': mxfp4's format fixes its block size at 32, so it takes no g=");
    assertThatThrownBy(() -> Codecs.byName("nvfp4:g=16")).hasMessageContaining("fixes its block size at 16");
    assertThatThrownBy(() -> Codecs.byName("mxfp4:e5m2"))
        .hasMessageContaining("e4m3/e5m2 are taco and nccl-fp8 parameters");
    assertThatThrownBy(() -> Codecs.byName("int4-group:hadamard=on"))
        .hasMessageContaining("hadamard taco's, mxfp4's and nvfp4's");
    assertThat(Codecs.parseList("none,mxfp4,nvfp4:hadamard=on")).containsExactly("none", "mxfp4",
        "nvfp4:hadamard=on");
    assertThat(Codecs.names()).contains("mxfp4", "nvfp4");
    assertThat(Codecs.NAMES).contains("mxfp4, nvfp4");
  }
}
