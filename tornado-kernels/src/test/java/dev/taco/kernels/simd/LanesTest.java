package dev.taco.kernels.simd;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Bytes;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.Hadamard;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The lane primitives against their scalar references, bit for bit: FP8 encode on every float32 exponent with the
 * mantissas around each rounding boundary (ties included), NaN payloads, infinities, zeros and random bits; FP8
 * decode of all 256 codes; bf16 on its ties and overflow; the WHT on random groups of every size; the scans. Random
 * inputs come from a fresh seed, printed.
 */
class LanesTest {

  static long seed;

  @BeforeAll
  static void seed() {
    seed = SimdSeeds.fresh("LanesTest");
  }

  /** Awkward float bit patterns: every exponent with mantissas at and around each FP8/bf16 rounding boundary. */
  static int[] awkwardBits() {
    IntStream.Builder b = IntStream.builder();
    for (int e = 0; e < 256; e++) {
      for (int shift : new int[] {13, 16, 20, 21, 22, 23}) { // bf16, E4M3/E5M2 normal, subnormal-ish positions
        int half = shift == 23 ? 0 : 1 << (shift - 1);
        for (int m : new int[] {0, 1, half - 1, half, half + 1, 3 * half, 3 * half - 1, 3 * half + 1, 0x7FFFFF,
            0x7FFFFF - half, 0x400000}) {
          int bits = e << 23 | (m & 0x7FFFFF);
          b.add(bits).add(bits | 0x80000000);
        }
      }
    }
    for (int nan : new int[] {0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x7FA00000}) {
      b.add(nan).add(nan | 0x80000000);
    }
    return b.build().toArray();
  }

  static float[] withRandom(int[] bits, int extra, SplittableRandom r) {
    float[] v = new float[bits.length + extra];
    for (int i = 0; i < bits.length; i++) {
      v[i] = Float.intBitsToFloat(bits[i]);
    }
    for (int i = bits.length; i < v.length; i++) {
      v[i] = Float.intBitsToFloat(r.nextInt());
    }
    return v;
  }

  @Test
  void fp8EncodeEqualsTheReferenceOnEveryBoundary() {
    float[] v = withRandom(awkwardBits(), 1 << 16, new SplittableRandom(seed));
    int n = (v.length - 3) / Lanes.L * Lanes.L; // whole vectors (callers pad)
    for (int format : new int[] {Fp8.E4M3, Fp8.E5M2}) {
      int saturated = format == Fp8.E4M3 ? 0x7E : 0x7B;
      int infCode = Fp8Lanes.infinityCode(format);
      byte[] own = new byte[n + 2];
      byte[] taco = new byte[n + 2];
      int sat = Fp8Lanes.encode(v, 2, 1, n, new float[] {1f}, format, saturated, own, 1);
      Fp8Lanes.encode(v, 2, 1, n, new float[] {1f}, format, infCode, taco, 1);
      int wantSat = 0;
      for (int i = 0; i < n; i++) {
        float f = v[2 + i];
        assertThat(own[1 + i]).as("seed %d format %d bits 0x%08x", seed, format, Float.floatToRawIntBits(f))
            .isEqualTo(Fp8.encode(f, format));
        byte t = Float.isInfinite(f) ? (byte) ((f < 0 ? 0x80 : 0) | infCode) : Fp8.encode(f, format);
        assertThat(taco[1 + i]).as("bits 0x%08x", Float.floatToRawIntBits(f)).isEqualTo(t);
        wantSat += Float.isFinite(f) && Math.abs(f) > Fp8.maxValue(format) ? 1 : 0;
      }
      assertThat(own[0]).isZero(); // nothing written outside
      assertThat(own[n + 1]).isZero();
      assertThat(sat).isEqualTo(wantSat).isPositive();
    }
    // per-group multipliers: group g's values times scale[g], one rounding before the FP8 one
    SplittableRandom r = new SplittableRandom(seed + 5);
    float[] w = new float[4 * 64];
    for (int i = 0; i < w.length; i++) {
      w[i] = (float) Math.scalb(r.nextGaussian(), r.nextInt(-20, 20));
    }
    w[70] = Float.NEGATIVE_INFINITY;
    float[] scale = {0.75f, 3e5f, 0f, 1e-30f};
    byte[] codes = new byte[w.length];
    Fp8Lanes.encode(w, 0, 4, 64, scale, Fp8.E4M3, 0x7E, codes, 0);
    for (int i = 0; i < w.length; i++) {
      assertThat(codes[i]).as("group %d", i / 64).isEqualTo(Fp8.encode(w[i] * scale[i / 64], Fp8.E4M3));
    }
  }

  @Test
  void fp8DecodeEqualsTheReferenceOnAll256Codes() {
    byte[] codes = new byte[256 + 5];
    for (int c = 0; c < codes.length; c++) {
      codes[c] = (byte) c;
    }
    for (int format : new int[] {Fp8.E4M3, Fp8.E5M2}) {
      float[] w = new float[Lanes.whole(256) + 1];
      Fp8Lanes.decode(codes, 3, 256, format, w, 1);
      Fp8Lanes.patchNonFinite(codes, 3, 256, format, w, 1);
      for (int i = 0; i < 256; i++) {
        assertThat(Float.floatToRawIntBits(w[1 + i])).as("format %d code 0x%02x", format, codes[3 + i] & 0xFF)
            .isEqualTo(Float.floatToRawIntBits(Fp8.decode(codes[3 + i], format)));
      }
    }
  }

  /**
   * The integer decode on lanes: every int8 and int4 code (markers included) against the reference, bit for bit, each
   * under scales from 0 and the smallest subnormal to the largest float and random ones.
   */
  @Test
  void integerDecodeEqualsTheReferenceOnAll256CodesAndAnyScale() {
    SplittableRandom r = new SplittableRandom(seed + 4);
    int cols = 256;
    int g = 32;
    int rows = 12;
    int ng = cols / g;
    for (int kind : new int[] {GroupKernels.INT8, GroupKernels.INT4}) {
      int rowBytes = kind == GroupKernels.INT8 ? cols : cols / 2;
      int scaleOff = 3;
      int codeOff = scaleOff + 4 * rows * ng;
      byte[] in = new byte[codeOff + rows * rowBytes];
      float[] special = {0f, Float.MIN_VALUE, Float.MIN_NORMAL, 1f, 127f, 7f, 1e-30f, Float.MAX_VALUE};
      for (int t = 0; t < rows * ng; t++) {
        float a = t < special.length ? special[t] : (float) Math.scalb(r.nextDouble(), r.nextInt(-149, 127));
        Bytes.putFloat(in, scaleOff + 4 * t, a);
      }
      for (int row = 0; row < rows; row++) {
        for (int c = 0; c < rowBytes; c++) {
          in[codeOff + row * rowBytes + c] = (byte) (c * 37 + row * 11); // every byte, in another order per row
        }
      }
      float[] got = new float[rows * cols + 1];
      float[] want = new float[rows * cols + 1];
      GroupLanes.decode(in, scaleOff, codeOff, rows, cols, g, kind, false, true, got, 1, false);
      GroupKernels.decode(in, scaleOff, codeOff, rows, cols, g, kind, false, new float[0], want, 1,
          false);
      for (int i = 0; i < want.length; i++) {
        assertThat(Float.floatToRawIntBits(got[i])).as("kind %d value %d, seed %d", kind, i, seed)
            .isEqualTo(Float.floatToRawIntBits(want[i]));
      }
    }
  }

  @Test
  void bf16EncodeAndDecodeEqualTheReference() {
    SplittableRandom r = new SplittableRandom(seed + 1);
    float[] v = withRandom(awkwardBits(), 1 << 16, r);
    v[3] = Float.MAX_VALUE;
    v[4] = -Float.MAX_VALUE;
    v[5] = Float.intBitsToFloat(0x7F7F8000); // ties to the max: rounds to Inf, saturates
    int off = 3;
    int n = v.length - off - 1; // not a multiple of the lanes
    byte[] got = new byte[2 * n + 5];
    byte[] want = new byte[2 * n + 5];
    long counted = ElementLanes.BF16.encode(v, off, n, got, 5);
    assertThat(counted & Lanes.NON_FINITE).as("NaN/Inf among the inputs, reported").isNotZero();
    long sat = counted & ~Lanes.NON_FINITE;
    long wantSat = 0;
    for (int i = 0; i < n; i++) {
      short c = Bf16.encodeSaturating(v[off + i]);
      wantSat += c != Bf16.encode(v[off + i]) ? 1 : 0;
      want[5 + 2 * i] = (byte) c;
      want[5 + 2 * i + 1] = (byte) (c >> 8);
    }
    assertThat(got).as("seed %d", seed).isEqualTo(want);
    assertThat(sat).isEqualTo(wantSat).isPositive();
    float[] y = new float[n + 1];
    ElementLanes.BF16.decode(got, 5, n, y, 1, false);
    for (int i = 0; i < n; i++) {
      assertThat(Float.floatToRawIntBits(y[1 + i]))
          .isEqualTo(Float.floatToRawIntBits(Bf16.decode((short) ((got[5 + 2 * i] & 0xFF) | got[6 + 2 * i] << 8))));
    }
    int firstBad = -1;
    for (int i = 0; i < n && firstBad < 0; i++) {
      firstBad = Bf16.isNonFinite((short) ((got[5 + 2 * i] & 0xFF) | got[6 + 2 * i] << 8)) ? i : -1;
    }
    assertThat(ElementLanes.BF16.firstNonFinite(got, 5, n)).isEqualTo(firstBad).isNotNegative();
  }

  @Test
  void hadamardEqualsTheReferenceForEverySize() {
    SplittableRandom r = new SplittableRandom(seed + 2);
    for (int n = 1; n <= 1024; n <<= 1) {
      for (int t = 0; t < 20; t++) {
        float[] a = new float[n + 7];
        for (int i = 0; i < a.length; i++) {
          a[i] = (float) Math.scalb(r.nextGaussian(), r.nextInt(-20, 20));
        }
        float[] b = a.clone();
        Hadamard.fwht(a, 5, n);
        int[] bits = {-1};
        HadamardLanes.fwht(b, 5, n, 1, bits);
        assertThat(b).as("seed %d n %d", seed, n).usingElementComparator(LanesTest::bitwise).isEqualTo(a);
        int max = 0;
        for (int i = 5; i < 5 + n; i++) {
          max = Math.max(max, Float.floatToRawIntBits(a[i]) & 0x7FFFFFFF);
        }
        assertThat(bits[0]).isEqualTo(max);
      }
    }
  }

  static int bitwise(float a, float b) {
    return Integer.compare(Float.floatToRawIntBits(a), Float.floatToRawIntBits(b));
  }

  @Test
  void scansFindTheFirstNonFiniteAndTheFiniteAbsmax() {
    SplittableRandom r = new SplittableRandom(seed + 3);
    for (int t = 0; t < 500; t++) {
      int n = r.nextInt(1, 300);
      float[] x = new float[n + 2];
      for (int i = 0; i < x.length; i++) {
        x[i] = (float) Math.scalb(r.nextGaussian(), r.nextInt(-140, 120));
      }
      int k = r.nextInt(4);
      for (int j = 0; j < k; j++) {
        x[r.nextInt(x.length)] = new float[] {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY}[j % 3];
      }
      int first = -1;
      float max = 0f;
      for (int i = 0; i < n; i++) {
        float e = Math.abs(x[1 + i]);
        if (e <= Float.MAX_VALUE) {
          max = Math.max(max, e);
        } else if (first < 0) {
          first = i;
        }
      }
      assertThat(Lanes.firstNonFinite(x, 1, n)).as("seed %d", seed).isEqualTo(first);
      assertThat(Lanes.absMaxFinite(x, 1, n)).isEqualTo(max);
    }
    float[] zeros = new float[40];
    Arrays.fill(zeros, -0f);
    assertThat(Float.floatToRawIntBits(Lanes.absMaxFinite(zeros, 0, 40))).isZero();
  }
}
