package dev.taco.kernels;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Exhaustive and randomized bit-exactness tests of {@link Fp8} against an independent float64 model. */
class Fp8Test {

  record Fmt(int code, int m, int bias, double max, int maxCode) {}

  static Fmt fmt(int code) {
    return code == Fp8.E4M3 ? new Fmt(code, 3, 7, 448, 0x7E) : new Fmt(code, 2, 15, 57344, 0x7B);
  }

  /** Expected value of a code, from its bit fields (NaN for NaN codes, Inf for E5M2 Inf codes). */
  static double expected(Fmt f, int c) {
    int s = (c >> 7) & 1;
    int ef = (c & 0x7F) >> f.m;
    int mf = c & ((1 << f.m) - 1);
    int efMax = (1 << (7 - f.m)) - 1;
    double v;
    if (f.code == Fp8.E4M3 && ef == efMax && mf == (1 << f.m) - 1) {
      return Double.NaN;
    } else if (f.code == Fp8.E5M2 && ef == efMax) {
      v = mf == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
    } else if (ef == 0) {
      v = Math.scalb((double) mf, 1 - f.bias - f.m);
    } else {
      v = Math.scalb(1.0 + mf / (double) (1 << f.m), ef - f.bias);
    }
    return s == 1 ? -v : v;
  }

  /** Positive finite values of codes 0..maxCode, increasing. */
  static double[] table(Fmt f) {
    double[] t = new double[f.maxCode + 1];
    for (int c = 0; c <= f.maxCode; c++) {
      t[c] = expected(f, c);
    }
    return t;
  }

  /** Float64 reference: nearest representable, ties to even code, saturating. */
  static int reference(Fmt f, double[] t, float x) {
    if (Float.isNaN(x)) {
      return -1;
    }
    int sign = (Float.floatToRawIntBits(x) >>> 31) << 7;
    double a = Math.abs((double) x);
    int code;
    if (a >= f.max) {
      code = f.maxCode;
    } else {
      int i = Arrays.binarySearch(t, a);
      if (i >= 0) {
        code = i;
      } else {
        int hi = -i - 1;
        int lo = hi - 1;
        double dl = a - t[lo];
        double dh = t[hi] - a;
        code = dl < dh ? lo : dh < dl ? hi : ((lo & 1) == 0 ? lo : hi);
      }
    }
    return sign | code;
  }

  static int enc(int format, float v) {
    return Fp8.encode(v, format) & 0xFF;
  }

  @ParameterizedTest
  @ValueSource(ints = {Fp8.E4M3, Fp8.E5M2})
  void decodesAll256Codes(int format) {
    Fmt f = fmt(format);
    for (int c = 0; c < 256; c++) {
      double want = expected(f, c);
      float got = Fp8.decode((byte) c, format);
      if (Double.isNaN(want)) {
        assertThat(got).as("code 0x%02x", c).isNaN();
        assertThat(Fp8.isNonFinite((byte) c, format)).isTrue();
      } else {
        assertThat(Float.floatToRawIntBits(got)).as("code 0x%02x", c)
            .isEqualTo(Float.floatToRawIntBits((float) want));
        assertThat((double) got).isEqualTo(want);
        assertThat(Fp8.isNonFinite((byte) c, format)).isEqualTo(Double.isInfinite(want));
      }
    }
    assertThat(Fp8.decode((byte) f.maxCode, format)).isEqualTo((float) f.max).isEqualTo(Fp8.maxValue(format));
  }

  @ParameterizedTest
  @ValueSource(ints = {Fp8.E4M3, Fp8.E5M2})
  void encodeOfDecodeIsIdentityOnFiniteCodes(int format) {
    for (int c = 0; c < 256; c++) {
      float v = Fp8.decode((byte) c, format);
      if (Float.isFinite(v)) {
        assertThat(enc(format, v)).as("code 0x%02x (%s)", c, v).isEqualTo(c); // includes 0x00 = +0, 0x80 = -0
      }
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {Fp8.E4M3, Fp8.E5M2})
  void everyMidpointRoundsToEvenAndItsNeighboursToTheNearer(int format) {
    Fmt f = fmt(format);
    double[] t = table(f);
    for (int c = 0; c < f.maxCode; c++) {
      double mid = (t[c] + t[c + 1]) / 2;
      float m = (float) mid;
      assertThat((double) m).as("midpoint exact in float").isEqualTo(mid);
      int even = (c & 1) == 0 ? c : c + 1;
      assertThat(enc(format, m)).as("mid %s..%s", t[c], t[c + 1]).isEqualTo(even);
      assertThat(enc(format, Math.nextUp(m))).isEqualTo(c + 1);
      assertThat(enc(format, Math.nextDown(m))).isEqualTo(c);
      assertThat(enc(format, -m)).isEqualTo(0x80 | even);
      assertThat(enc(format, -Math.nextUp(m))).isEqualTo(0x80 | (c + 1));
      assertThat(enc(format, -Math.nextDown(m))).isEqualTo(0x80 | c);
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {Fp8.E4M3, Fp8.E5M2})
  void saturatesAboveMaxAndMapsNaNToNaN(int format) {
    Fmt f = fmt(format);
    float max = (float) f.max;
    float ulp = (float) (f.max - table(f)[f.maxCode - 1]);
    float[] big = {max, Math.nextUp(max), max + ulp / 2, max + ulp, 2 * max, 1e30f, Float.MAX_VALUE,
        Float.POSITIVE_INFINITY};
    for (float v : big) {
      assertThat(enc(format, v)).as("%s", v).isEqualTo(f.maxCode);
      assertThat(enc(format, -v)).as("-%s", v).isEqualTo(0x80 | f.maxCode);
    }
    assertThat(Fp8.decode(Fp8.encode(Float.NaN, format), format)).isNaN();
    assertThat(Fp8.decode(Fp8.encode(Float.intBitsToFloat(0xFFC00001), format), format)).isNaN();
  }

  @ParameterizedTest
  @ValueSource(ints = {Fp8.E4M3, Fp8.E5M2})
  void subnormalRange(int format) {
    Fmt f = fmt(format);
    float minSub = (float) Math.scalb(1.0, 1 - f.bias - f.m);
    assertThat(enc(format, minSub)).isEqualTo(1);
    assertThat(enc(format, minSub / 2)).as("tie to even: 0").isEqualTo(0);
    assertThat(enc(format, Math.nextUp(minSub / 2))).isEqualTo(1);
    assertThat(enc(format, -minSub / 2)).isEqualTo(0x80);
    assertThat(enc(format, 1.5f * minSub)).as("tie 1|2 -> 2").isEqualTo(2);
    assertThat(enc(format, Float.MIN_VALUE)).isEqualTo(0);
    assertThat(enc(format, -Float.MIN_VALUE)).isEqualTo(0x80);
    assertThat(enc(format, Float.MIN_NORMAL)).isEqualTo(0);
    float minNormal = (float) Math.scalb(1.0, 1 - f.bias);
    assertThat(enc(format, minNormal)).isEqualTo(1 << f.m);
    assertThat(enc(format, Math.nextDown(minNormal))).isEqualTo(1 << f.m); // rounds up into the normal range
    for (int q = 0; q < (1 << f.m); q++) {
      assertThat(Fp8.decode((byte) q, format)).isEqualTo(q * minSub);
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {Fp8.E4M3, Fp8.E5M2})
  void randomizedAgainstFloat64Reference(int format) {
    Fmt f = fmt(format);
    double[] t = table(f);
    SplittableRandom rnd = new SplittableRandom(42 + format);
    for (int i = 0; i < 500_000; i++) {
      float v;
      if ((i & 1) == 0) {
        v = Float.intBitsToFloat(rnd.nextInt()); // any bit pattern: the whole float range
      } else {
        double mag = Math.scalb(1.0 + rnd.nextDouble(), rnd.nextInt(-f.bias - f.m - 3, 18));
        v = (float) (rnd.nextBoolean() ? mag : -mag);
      }
      int want = reference(f, t, v);
      int got = enc(format, v);
      if (want < 0) {
        assertThat(Fp8.decode((byte) got, format)).isNaN();
      } else if (got != want) {
        throw new AssertionError(String.format("encode(%s [0x%08x]) = 0x%02x, reference 0x%02x", v,
            Float.floatToRawIntBits(v), got, want));
      }
    }
  }
}
