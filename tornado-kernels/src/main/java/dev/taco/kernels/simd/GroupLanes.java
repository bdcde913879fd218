package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.ASHR;
import static jdk.incubator.vector.VectorOperators.B2I;
import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.I2B;
import static jdk.incubator.vector.VectorOperators.I2F;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.S2B;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.TacoKernels;
import java.util.Arrays;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * The absmax-per-group kernels on lanes ({@code int8-group}, {@code int4-group}, {@code fp8-group},
 * {@code fp8-tensor}, {@code hadamard-int8}): {@link GroupKernels#encode}, {@link GroupKernels#decode} and
 * {@link GroupKernels#firstInvalid}, same bytes and float bits; layout, numerics, markers and arguments are those of
 * {@link GroupKernels}. Per value the same float operations in the same order: {@code x / a * qm} (a divide, then a
 * multiply), rounded to an integer by one float32 add of {@code 1.5 * 2^23} (round to nearest even, as
 * {@link Math#rint} for {@code |s| <= 2^22}; the clamp to +-qm covers the rest) or to E4M3 by {@link Fp8Lanes};
 * decode {@code D(q) / qm * a}. Int4 codes are packed and unpacked two a byte on short and byte lanes (16 lanes and up;
 * with 8, int4 runs the reference). Scratch: up to {@value #CHUNK} floats per call (a group, or a piece of the one
 * group of {@code fp8-tensor}). Stateless.
 */
public final class GroupLanes {
  private GroupLanes() {}

  private static final int L = Lanes.L;
  /** Values handled per pass where a group is longer (fp8-tensor). */
  private static final int CHUNK = 4096;
  /** {@code 1.5 * 2^23}: {@code s + MAGIC} is {@code MAGIC + rint(s)} for {@code |s| <= 2^22}. */
  private static final float MAGIC = 0x1.8p23f;
  /** Int4 bytes of one vector of codes (16 lanes and up; else null). */
  private static final VectorSpecies<Byte> HALF = L >= 16 ? VectorSpecies.of(byte.class, VectorShape.forBitSize(4 * L))
      : null;
  /** Lanes 2j and 2j+1 take byte j (int4 unpacking). */
  private static final VectorShuffle<Byte> PAIRS = Lanes.B == null ? null : VectorShuffle.fromOp(Lanes.B, i -> i >> 1);
  /** Left shifts that put nibble {@code i & 1} of a sign-extended byte at the top of an int. */
  private static final IntVector NIBBLE_SHIFTS = IntVector.fromArray(Lanes.I, nibbleShifts(), 0);

  private static int[] nibbleShifts() {
    int[] s = new int[L];
    for (int i = 0; i < L; i++) {
      s[i] = (i & 1) == 0 ? 28 : 24;
    }
    return s;
  }

  /** The marker code of a non-finite value: -128 or -8 (E4M3's NaN code is made by {@link Fp8Lanes}). */
  private static int marker(int kind) {
    return kind == GroupKernels.INT8 ? -128 : -8;
  }

  /** Encodes as {@link GroupKernels#encode} (no {@code work}). */
  public static void encode(float[] x, int xOff, int rows, int cols, int groupSize, int kind, boolean hadamard,
      byte[] out, int scaleOff, int codeOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    if (kind == GroupKernels.INT4 && HALF == null) {
      GroupKernels.encode(x, xOff, rows, cols, groupSize, kind, hadamard,
          new float[hadamard ? rows * ng * groupSize : 0], out, scaleOff, codeOff);
      return;
    }
    int stride = GroupKernels.codeStride(cols, groupSize, kind, hadamard);
    float qm = GroupKernels.qmax(kind);
    Scratch w = new Scratch(groupSize);
    for (int r = 0; r < rows; r++) {
      for (int g = 0; g < ng; g++) {
        int t = r * ng + g;
        int c0 = g * groupSize;
        int len = Math.min(groupSize, cols - c0);
        int src = xOff + r * cols + c0;
        int code = r * stride + c0;
        float a = Lanes.absMaxFinite(x, src, len);
        if (!hadamard) {
          Bytes.putFloat(out, scaleOff + 4 * t, a);
          for (int i = 0; i < len; i += CHUNK) {
            codes(x, src + i, Math.min(CHUNK, len - i), a, qm, kind, w, out, codeOff, code + i);
          }
          continue;
        }
        System.arraycopy(x, src, w.f, 0, len);
        Arrays.fill(w.f, len, groupSize, 0f);
        float stored = -a; // a group holding NaN/Inf is sent untransformed
        if (Lanes.absMaxBits(x, src, len) < Lanes.INF) {
          HadamardLanes.fwht(w.f, 0, groupSize, 1, w.bits);
          a = Float.intBitsToFloat(w.bits[0]);
          stored = a;
        }
        Bytes.putFloat(out, scaleOff + 4 * t, stored);
        codes(w.f, 0, groupSize, a, qm, kind, w, out, codeOff, code);
      }
    }
  }

  /** Scratch of one call: floats and code bytes for up to {@value #CHUNK} values, and a group's absmax bits. */
  private static final class Scratch {
    final float[] f;
    final byte[] codes;
    final int[] bits = new int[1];
    final float[] one = {1f};

    Scratch(int groupSize) {
      f = new float[Lanes.whole(Math.min(groupSize, CHUNK))];
      codes = new byte[f.length];
    }
  }

  /**
   * The codes {@code Q(v / a * qm)} of {@code v[vOff .. vOff + m)} ({@link GroupKernels#quantise}: 0 when
   * {@code a = 0}, the marker for NaN/Inf) from code index {@code code} of the code region at {@code codeOff} (int4:
   * two a byte, {@code code} even). E4M3 goes through the scratch ({@code m <= CHUNK}; {@code v} may be its floats).
   */
  private static void codes(float[] v, int vOff, int m, float a, float qm, int kind, Scratch w, byte[] out,
      int codeOff, int code) {
    VectorMask<Float> zero = Lanes.F.maskAll(a == 0f);
    if (kind == GroupKernels.E4M3) { // s, with NaN/Inf as a NaN of their sign: Fp8Lanes makes that 0x7F | sign
      for (int i = 0; i < m; i += L) { // whole vectors: the lanes past m are 0
        FloatVector x = FloatVector.fromArray(Lanes.F, v, vOff + i, Lanes.F.indexInRange(i, m));
        IntVector xb = x.reinterpretAsInts();
        x.div(a).mul(qm).blend(0f, zero).reinterpretAsInts()
            .blend(xb.and(0x80000000).or(0x7FC00000), xb.and(Lanes.ABS).compare(GE, Lanes.INF))
            .reinterpretAsFloats().intoArray(w.f, i);
      }
      Fp8Lanes.encode(w.f, 0, 1, Lanes.whole(m), w.one, Fp8.E4M3, 0x7F, w.codes, 0);
      System.arraycopy(w.codes, 0, out, codeOff + code, m);
      return;
    }
    int q = (int) qm;
    VectorMask<Integer> nanScale = Lanes.I.maskAll(a != a); // an overflowed WHT: (int) rint(NaN) is 0
    for (int i = 0; i < m; i += L) {
      VectorMask<Float> in = Lanes.F.indexInRange(i, m);
      FloatVector x = FloatVector.fromArray(Lanes.F, v, vOff + i, in);
      IntVector c = x.div(a).mul(qm).blend(0f, zero).add(MAGIC).reinterpretAsInts()
          .sub(Float.floatToRawIntBits(MAGIC)).max(-q).min(q).blend(0, nanScale)
          .blend(marker(kind), x.reinterpretAsInts().and(Lanes.ABS).compare(GE, Lanes.INF));
      ByteVector b = (ByteVector) c.convertShape(I2B, Lanes.B, 0);
      if (kind == GroupKernels.INT8) {
        b.intoArray(out, codeOff + code + i, in.cast(Lanes.B));
      } else { // pairs (q_2j & 0xF) | q_2j+1 << 4; lanes past m are 0
        ShortVector pairs = b.reinterpretAsShorts();
        ((ByteVector) pairs.and((short) 0x0F).or(pairs.lanewise(LSHR, 4).and((short) 0xF0)).convertShape(S2B, HALF, 0))
            .intoArray(out, codeOff + ((code + i) >> 1), HALF.indexInRange(0, (Math.min(L, m - i) + 1) >> 1));
      }
    }
  }

  /**
   * Decodes a validated body as {@link GroupKernels#decode} does (no {@code work}).
   *
   * @param nonFinite the header's non-finite flag: the body may hold marker codes
   */
  public static void decode(byte[] in, int scaleOff, int codeOff, int rows, int cols, int groupSize, int kind,
      boolean hadamard, boolean nonFinite, float[] out, int outOff, boolean accumulate) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    if (kind == GroupKernels.INT4 && HALF == null) {
      GroupKernels.decode(in, scaleOff, codeOff, rows, cols, groupSize, kind, hadamard,
          new float[hadamard ? rows * ng * groupSize : 0], out, outOff, accumulate);
      return;
    }
    int stride = GroupKernels.codeStride(cols, groupSize, kind, hadamard);
    float qm = GroupKernels.qmax(kind);
    Scratch w = new Scratch(groupSize);
    for (int r = 0; r < rows; r++) {
      for (int g = 0; g < ng; g++) {
        int t = r * ng + g;
        int c0 = g * groupSize;
        int len = Math.min(groupSize, cols - c0);
        int dst = outOff + r * cols + c0;
        int code = r * stride + c0;
        float a = Bytes.getFloat(in, scaleOff + 4 * t);
        if (!hadamard) {
          for (int i = 0; i < len; i += CHUNK) {
            int m = Math.min(CHUNK, len - i);
            values(in, codeOff, code + i, m, kind, nonFinite, w);
            scaled(w.f, m, qm, a, out, dst + i, accumulate);
          }
          continue;
        }
        values(in, codeOff, code, groupSize, kind, nonFinite, w);
        scaled(w.f, groupSize, qm, Math.abs(a), w.f, 0, false);
        if (Float.floatToRawIntBits(a) >= 0) { // sign bit clear: a transformed group
          HadamardLanes.fwht(w.f, 0, groupSize, 1, w.bits);
        }
        Lanes.put(w.f, len, out, dst, accumulate);
      }
    }
  }

  /**
   * {@code w.f[i] = D(q_i)} for the {@code m <= CHUNK} codes from code index {@code code} ({@link
   * GroupKernels#dequantise}: markers give NaN; int4 from a byte boundary), written up to
   * {@link Lanes#whole}{@code (m)}.
   */
  private static void values(byte[] in, int codeOff, int code, int m, int kind, boolean nonFinite, Scratch s) {
    float[] w = s.f;
    if (kind == GroupKernels.E4M3) { // through the scratch: whole vectors must not read past the array
      System.arraycopy(in, codeOff + code, s.codes, 0, m);
      Fp8Lanes.decode(s.codes, 0, Lanes.whole(m), Fp8.E4M3, w, 0);
      if (nonFinite) {
        Fp8Lanes.patchNonFinite(s.codes, 0, m, Fp8.E4M3, w, 0);
      }
      return;
    }
    int nan = Float.floatToRawIntBits(Float.NaN);
    int mark = marker(kind);
    if (kind == GroupKernels.INT8) {
      for (int i = 0; i < m; i += L) {
        IntVector q = (IntVector) ByteVector.fromArray(Lanes.B, in, codeOff + code + i, Lanes.B.indexInRange(i, m))
            .convertShape(B2I, Lanes.I, 0);
        ((FloatVector) q.convert(I2F, 0)).reinterpretAsInts().blend(nan, q.compare(EQ, mark)).reinterpretAsFloats()
            .intoArray(w, i);
      }
      return;
    }
    for (int i = 0; i < m; i += L) { // int4: byte j to lanes 2j (low nibble) and 2j+1 (high nibble), sign-extended
      int bytes = (Math.min(L, m - i) + 1) >> 1;
      IntVector q = ((IntVector) ByteVector.fromArray(Lanes.B, in, codeOff + ((code + i) >> 1),
          Lanes.B.indexInRange(0, bytes)).rearrange(PAIRS).convertShape(B2I, Lanes.I, 0))
          .lanewise(LSHL, NIBBLE_SHIFTS).lanewise(ASHR, 28);
      ((FloatVector) q.convert(I2F, 0)).reinterpretAsInts().blend(nan, q.compare(EQ, mark)).reinterpretAsFloats()
          .intoArray(w, i);
    }
  }

  /** {@code out[outOff + i] (+)= w[i] / qm * a} for {@code i < m}; {@code out} may be {@code w} at offset 0. */
  private static void scaled(float[] w, int m, float qm, float a, float[] out, int outOff, boolean accumulate) {
    for (int i = 0; i < m; i += L) {
      VectorMask<Float> in = Lanes.F.indexInRange(i, m);
      FloatVector v = FloatVector.fromArray(Lanes.F, w, i, in).div(qm).mul(a);
      if (accumulate) {
        FloatVector.fromArray(Lanes.F, out, outOff + i, in).add(v).intoArray(out, outOff + i, in);
      } else {
        v.intoArray(out, outOff + i, in);
      }
    }
  }

  /**
   * {@link GroupKernels#firstInvalid}: the scales by the reference, the codes on lanes; same result.
   */
  public static long firstInvalid(byte[] in, int scaleOff, int codeOff, int nScales, long nCodes, int kind,
      boolean hadamard, boolean nonFinite) {
    long bad = GroupKernels.firstInvalid(in, scaleOff, codeOff, nScales, 0, kind, hadamard, nonFinite);
    if (bad >= 0 || nonFinite) {
      return bad;
    }
    boolean int4 = kind == GroupKernels.INT4;
    int bytes = (int) (int4 ? (nCodes + 1) / 2 : nCodes);
    // a byte holds a marker where (b & m1) == v1 or (b & m2) == v2: -128; E4M3 NaN 0x7F | sign; an int4 -8 nibble
    byte m1 = (byte) (kind == GroupKernels.E4M3 ? 0x7F : int4 ? 0x0F : 0xFF);
    byte v1 = (byte) (kind == GroupKernels.E4M3 ? 0x7F : int4 ? 0x08 : 0x80);
    byte m2 = int4 ? (byte) 0xF0 : m1;
    byte v2 = int4 ? (byte) 0x80 : v1;
    int w = Lanes.SCAN.length();
    int i = 0;
    for (; i + w <= bytes; i += w) {
      ByteVector b = ByteVector.fromArray(Lanes.SCAN, in, codeOff + i);
      if (b.and(m1).compare(EQ, v1).or(b.and(m2).compare(EQ, v2)).anyTrue()) {
        break;
      }
    }
    long skipped = int4 ? 2L * i : i; // codes known valid; the reference finds the first bad one after them
    long j = GroupKernels.firstInvalid(in, scaleOff, codeOff + i, 0, nCodes - skipped, kind, hadamard, false);
    return j < 0 ? -1 : nScales + skipped + j;
  }
}
