package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.ASHR;
import static jdk.incubator.vector.VectorOperators.B2I;
import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.I2B;
import static jdk.incubator.vector.VectorOperators.I2F;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.MAX;
import static jdk.incubator.vector.VectorOperators.S2B;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.TacoKernels;
import java.lang.foreign.MemorySegment;
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
 * decode {@code D(q) / qm * a}.
 *
 * <p>A row at a time; the passes run whole vectors only, in pieces of at most {@value #CHUNK} values (the one group
 * of {@code fp8-tensor} spans its whole tensor), and a row's last {@code cols % L} values go through the same passes
 * from a zero-padded vector of scratch. Int4 codes are packed and unpacked two a byte on short and byte lanes (16
 * lanes and up; with 8, int4 runs the reference). Scratch: a piece of a row. Stateless.
 */
public final class GroupLanes {
  private GroupLanes() {}

  private static final int L = Lanes.L;
  /** Values per pass; a multiple of every G and of L. */
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

  /**
   * One call's work arrays ({@link Scratch}): a piece of a row as floats (and its transform) and as code bytes,
   * per-group scalars, a row's zero-padded tail.
   */
  private static final class Work {
    final float[] f;
    final float[] t;
    final float[] a;
    final int[] bits;
    final boolean[] special;
    /** A row's last {@code cols % L} values (zero-padded), its codes, its group's scale. */
    final float[] tail;
    final byte[] tailCodes;
    final float[] tailScale = new float[1];

    Work(int cols, int groupSize, int ng, boolean hadamard) {
      Scratch s = Scratch.get();
      int n = hadamard ? ng * groupSize : Math.min(Lanes.whole(cols), CHUNK);
      f = s.floats(Scratch.Slot.ROW, n);
      t = hadamard ? s.floats(Scratch.Slot.ROW2, n) : null;
      a = s.floats(Scratch.Slot.FACTORS, ng);
      bits = s.ints(Scratch.Slot.BITS, ng);
      special = new boolean[hadamard ? ng : 0];
      tail = s.floats(Scratch.Slot.TAIL, L);
      tailCodes = s.bytes(Scratch.Slot.TAIL_CODES, L);
    }
  }

  /** The byte offset of code index {@code code} (a row's first, even for int4) of the code region at codeOff. */
  private static int codeByte(int codeOff, int code, int kind) {
    return codeOff + (kind == GroupKernels.INT4 ? code >> 1 : code);
  }

  /** Bytes holding {@code n} codes of {@code kind}. */
  private static int codeBytes(int n, int kind) {
    return kind == GroupKernels.INT4 ? (n + 1) >> 1 : n;
  }

  /**
   * Encodes as {@link GroupKernels#encode} (no {@code work}).
   *
   * @return {@link Lanes#NON_FINITE} if the input held NaN/Inf, else 0 (no finite value saturates)
   */
  public static long encode(float[] x, int xOff, int rows, int cols, int groupSize, int kind, boolean hadamard,
      byte[] out, int scaleOff, int codeOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    if (kind == GroupKernels.INT4 && HALF == null) {
      GroupKernels.encode(x, xOff, rows, cols, groupSize, kind, hadamard,
          new float[hadamard ? rows * ng * groupSize : 0], out, scaleOff, codeOff, new int[rows * ng]);
      return Lanes.firstNonFinite(x, xOff, rows * cols) < 0 ? 0 : Lanes.NON_FINITE;
    }
    int stride = (int) GroupKernels.codeStride(cols, groupSize, kind, hadamard); // a row of a body that fits
    float qm = GroupKernels.qmax(kind);
    Work s = new Work(cols, groupSize, ng, hadamard);
    int all = 0; // the largest absolute-value bits met, NaN and Inf included
    for (int r = 0; r < rows; r++) {
      int src = xOff + r * cols;
      int scales = scaleOff + 4 * r * ng;
      int codes = codeByte(codeOff, r * stride, kind);
      if (!hadamard) {
        int whole = cols / L * L; // the row's tail goes through s.f
        all = Math.max(all, groupAbsMax(x, src, whole, groupSize, s.a));
        int tail = cols - whole;
        if (tail > 0) {
          Arrays.fill(s.tail, 0, L, 0f);
          System.arraycopy(x, src + whole, s.tail, 0, tail);
          all = Math.max(all, Lanes.absMaxBits(s.tail, 0, L));
          s.a[ng - 1] = Math.max(whole % groupSize == 0 ? 0f : s.a[ng - 1], Lanes.absMaxFinite(s.tail, 0, L));
        }
        for (int g = 0; g < ng; g++) {
          Bytes.putFloat(out, scales + 4 * g, s.a[g]);
        }
        codes(x, src, 0, whole, groupSize, s.a, qm, kind, out, codes);
        if (tail > 0) {
          s.tailScale[0] = s.a[ng - 1];
          codes(s.tail, 0, 0, L, L, s.tailScale, qm, kind, s.tailCodes, 0);
          System.arraycopy(s.tailCodes, 0, out, codes + codeBytes(whole, kind), codeBytes(tail, kind));
        }
        continue;
      }
      int width = ng * groupSize; // zero-padded groups, each transformed unless it holds NaN/Inf
      float[] row = x; // the row itself, or its zero-padded copy when its last group is short
      int at = src;
      if (width != cols) {
        System.arraycopy(x, src, s.f, 0, cols);
        Arrays.fill(s.f, cols, width, 0f);
        row = s.f;
        at = 0;
      }
      all = Math.max(all, Lanes.groupMaxBits(row, at, ng, groupSize, s.bits));
      for (int g = 0; g < ng; g++) {
        s.special[g] = s.bits[g] >= Lanes.INF;
      }
      HadamardLanes.transform(row, at, null, groupSize, ng, s.t, 0, s.bits);
      for (int g = 0; g < ng; g++) {
        s.a[g] = Float.intBitsToFloat(s.bits[g]);
        if (s.special[g]) { // sent untransformed, its scale negated
          System.arraycopy(row, at + g * groupSize, s.t, g * groupSize, groupSize);
          s.a[g] = Lanes.absMaxFinite(row, at + g * groupSize, groupSize);
        }
        Bytes.putFloat(out, scales + 4 * g, s.special[g] ? -s.a[g] : s.a[g]);
      }
      codes(s.t, 0, 0, width, groupSize, s.a, qm, kind, out, codes);
    }
    return all >= Lanes.INF ? Lanes.NON_FINITE : 0;
  }

  /**
   * {@code a[g]} = the absmax of the finite values of group g of {@code x[src .. src + n)}, n whole vectors; returns
   * the largest absolute-value bits of all (NaN and Inf included).
   */
  private static int groupAbsMax(float[] x, int src, int n, int groupSize, float[] a) {
    IntVector all = IntVector.zero(Lanes.I);
    for (int g = 0; g * groupSize < n; g++) {
      int end = Math.min(n, (g + 1) * groupSize);
      IntVector m = IntVector.zero(Lanes.I);
      for (int i = g * groupSize; i < end; i += L) {
        IntVector e = FloatVector.fromArray(Lanes.F, x, src + i).reinterpretAsInts().and(Lanes.ABS);
        all = all.max(e);
        m = m.max(e.blend(0, e.compare(GE, Lanes.INF)));
      }
      a[g] = Float.intBitsToFloat(m.reduceLanes(MAX));
    }
    return all.reduceLanes(MAX);
  }

  /**
   * The codes {@code Q(v / a[g] * qm)} ({@link GroupKernels#quantise}: 0 when {@code a = 0}, the marker for NaN/Inf)
   * of {@code v[vOff + i]}, {@code i} in {@code [c0, c1)} (whole vectors; group g holds i in {@code [gG, gG + G)}),
   * code index i from byte {@code out[codeAt]} (int4: two a byte), a piece at a time.
   */
  private static void codes(float[] v, int vOff, int c0, int c1, int groupSize, float[] a, float qm, int kind,
      byte[] out, int codeAt) {
    for (int p0 = c0; p0 < c1; p0 += CHUNK) {
      int p1 = Math.min(c1, p0 + CHUNK);
      if (kind == GroupKernels.E4M3) {
        e4m3s(v, vOff, p0, p1, groupSize, a, qm, out, codeAt);
      } else {
        ints(v, vOff, p0, p1, groupSize, a, qm, kind, out, codeAt);
      }
    }
  }

  /**
   * E4M3 codes of {@code v / a * qm} ({@code 0} when {@code a = 0}; the marker {@code 0x7F | sign} for NaN/Inf) for
   * {@code v[vOff + i]}, {@code i} in {@code [c0, c1)} (whole vectors), code i at {@code out[codeAt + i]}: the value
   * and its {@link Fp8Lanes#e4m3} rounding in one loop (|v / a| <= 1, so no finite value saturates): through a float
   * scratch and {@link Fp8Lanes#encode}, fp8-group encoded at 0.44 of a copy against 0.52 (alternated, 2026-12-03).
   */
  private static void e4m3s(float[] v, int vOff, int c0, int c1, int groupSize, float[] a, float qm, byte[] out,
      int codeAt) {
    for (int g = c0 / groupSize; g * groupSize < c1; g++) {
      int end = Math.min(c1, (g + 1) * groupSize);
      float ag = a[g];
      VectorMask<Float> zero = Lanes.F.maskAll(ag == 0f);
      for (int i = Math.max(c0, g * groupSize); i < end; i += L) {
        FloatVector x = FloatVector.fromArray(Lanes.F, v, vOff + i);
        IntVector xb = x.reinterpretAsInts();
        IntVector bits = x.div(ag).mul(qm).blend(0f, zero).reinterpretAsInts();
        ByteVector c = Fp8Lanes.e4m3(bits, bits.and(Lanes.ABS));
        VectorMask<Integer> special = xb.and(Lanes.ABS).compare(GE, Lanes.INF);
        if (special.anyTrue()) { // NaN/Inf: the marker of its sign
          c = c.blend((ByteVector) xb.lanewise(LSHR, 24).and(0x80).or(0x7F).convertShape(I2B, Lanes.B, 0),
              special.cast(Lanes.B));
        }
        c.intoArray(out, codeAt + i);
      }
    }
  }

  /** Int8/int4 codes of {@code v[vOff + i]}, {@code i} in {@code [c0, c1)} (whole vectors), code i from codeAt. */
  private static void ints(float[] v, int vOff, int c0, int c1, int groupSize, float[] a, float qm, int kind,
      byte[] out, int codeAt) {
    int q = (int) qm;
    int marker = kind == GroupKernels.INT8 ? -128 : -8;
    for (int g = c0 / groupSize; g * groupSize < c1; g++) {
      int end = Math.min(c1, (g + 1) * groupSize);
      float ag = a[g];
      VectorMask<Float> zero = Lanes.F.maskAll(ag == 0f);
      VectorMask<Integer> nanScale = Lanes.I.maskAll(ag != ag); // an overflowed WHT: (int) rint(NaN) is 0
      for (int i = Math.max(c0, g * groupSize); i < end; i += L) {
        FloatVector x = FloatVector.fromArray(Lanes.F, v, vOff + i);
        IntVector c = x.div(ag).mul(qm).blend(0f, zero).add(MAGIC).reinterpretAsInts()
            .sub(Float.floatToRawIntBits(MAGIC)).max(-q).min(q).blend(0, nanScale)
            .blend(marker, x.reinterpretAsInts().and(Lanes.ABS).compare(GE, Lanes.INF));
        ByteVector b = (ByteVector) c.convertShape(I2B, Lanes.B, 0);
        if (kind == GroupKernels.INT8) {
          b.intoArray(out, codeAt + i);
        } else {
          packNibbles(b, out, codeAt + (i >> 1));
        }
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
    int stride = (int) GroupKernels.codeStride(cols, groupSize, kind, hadamard); // a row of a body that fits
    float qm = GroupKernels.qmax(kind);
    if (!hadamard && kind != GroupKernels.E4M3 && cols % groupSize == 0 && cols % L == 0
        && Integer.bitCount(groupSize) == 1) {
      // no group straddles two rows, and codes, scales and values run on from row to row: the block is one flat
      // pass (int8, 1024 x 1024: 341-350 us against 424-432 row by row, whose loop entries and exits cost about
      // 90 ns a row; one thread, the two builds timed in one session)
      float[] a = Scratch.get().floats(Scratch.Slot.FACTORS, rows * ng);
      MemorySegment.copy(MemorySegment.ofArray(in), Lanes.F32_LE, scaleOff, a, 0, rows * ng);
      flat(in, codeOff, 0, rows * cols, Integer.numberOfTrailingZeros(groupSize), a, qm,
          kind == GroupKernels.INT4, out, outOff, accumulate);
      return;
    }
    Work s = new Work(cols, groupSize, ng, hadamard);
    for (int r = 0; r < rows; r++) {
      for (int g = 0; g < ng; g++) {
        s.a[g] = Bytes.getFloat(in, scaleOff + 4 * (r * ng + g));
      }
      int codes = codeByte(codeOff, r * stride, kind);
      int dst = outOff + r * cols;
      if (!hadamard) {
        int whole = cols / L * L; // the row's tail goes through the scratch
        values(in, codes, 0, whole, groupSize, s.a, qm, kind, nonFinite, s, out, dst, accumulate);
        int tail = cols - whole;
        if (tail > 0) {
          Arrays.fill(s.tailCodes, 0, L, (byte) 0);
          System.arraycopy(in, codes + codeBytes(whole, kind), s.tailCodes, 0, codeBytes(tail, kind));
          s.tailScale[0] = s.a[ng - 1];
          values(s.tailCodes, 0, 0, L, L, s.tailScale, qm, kind, nonFinite, s, s.tail, 0, false);
          for (int i = 0; i < tail; i++) {
            out[dst + whole + i] = accumulate ? out[dst + whole + i] + s.tail[i] : s.tail[i];
          }
        }
        continue;
      }
      int width = ng * groupSize;
      boolean untransformed = false;
      for (int g = 0; g < ng; g++) {
        untransformed |= Float.floatToRawIntBits(s.a[g]) < 0; // a group sent untransformed (it held NaN/Inf)
        s.a[g] = Math.abs(s.a[g]);
      }
      values(in, codes, 0, width, groupSize, s.a, qm, kind, nonFinite, s, s.f, 0, false);
      if (!accumulate && !untransformed && width == cols) { // the usual row: transformed straight into out
        HadamardLanes.transform(s.f, 0, null, groupSize, ng, out, dst, s.bits);
        continue;
      }
      HadamardLanes.transform(s.f, 0, null, groupSize, ng, s.t, 0, s.bits);
      for (int g = 0; g < ng; g++) {
        if (Float.floatToRawIntBits(Bytes.getFloat(in, scaleOff + 4 * (r * ng + g))) < 0) { // sent untransformed
          System.arraycopy(s.f, g * groupSize, s.t, g * groupSize, groupSize);
        }
      }
      Lanes.put(s.t, 0, cols, out, dst, accumulate);
    }
  }

  /**
   * {@code out[dst + i] (+)= D(q_i) / qm * a[g]} for the codes of index {@code i} in {@code [c0, c1)} (whole
   * vectors) from byte {@code in[codes]} ({@link GroupKernels#dequantise}: markers give NaN), a piece at a time:
   * integer codes straight from their bytes, E4M3 codes decoded to floats in the scratch first.
   */
  private static void values(byte[] in, int codes, int c0, int c1, int groupSize, float[] a, float qm, int kind,
      boolean nonFinite, Work s, float[] out, int dst, boolean accumulate) {
    for (int p0 = c0; p0 < c1; p0 += CHUNK) {
      int p1 = Math.min(c1, p0 + CHUNK);
      if (kind == GroupKernels.INT8 || kind == GroupKernels.INT4) {
        integers(in, codes, p0, p1, groupSize, a, qm, kind == GroupKernels.INT4, out, dst, accumulate);
      } else {
        Fp8Lanes.decode(in, codes + p0, p1 - p0, Fp8.E4M3, s.f, 0);
        if (nonFinite) {
          Fp8Lanes.patchNonFinite(in, codes + p0, p1 - p0, Fp8.E4M3, s.f, 0);
        }
        scaled(s.f, p0, p1, groupSize, a, qm, out, dst, accumulate);
      }
    }
  }

  /**
   * {@code out[dst + i] (+)= D(c) / qm * a[g]} for the integer codes {@code c} of index {@code i} in {@code [c0, c1)}
   * (whole vectors): int8, byte {@code codes[at + i]}, -128 giving NaN; int4, nibble {@code i & 1} (low first) of byte
   * {@code codes[at + (i >> 1)]}, sign-extended in the lanes, -8 giving NaN.
   */
  private static void integers(byte[] codes, int at, int c0, int c1, int groupSize, float[] a, float qm, boolean int4,
      float[] out, int dst, boolean accumulate) {
    if (Integer.bitCount(groupSize) == 1) {
      flat(codes, at, c0, c1, Integer.numberOfTrailingZeros(groupSize), a, qm, int4, out, dst, accumulate);
      return;
    }
    for (int g = c0 / groupSize; g * groupSize < c1; g++) {
      int end = Math.min(c1, (g + 1) * groupSize);
      float ag = a[g];
      for (int i = Math.max(c0, g * groupSize); i < end; i += L) {
        FloatVector v = dequantised(codes, at, i, int4, qm).mul(ag);
        if (accumulate) {
          FloatVector.fromArray(Lanes.F, out, dst + i).add(v).intoArray(out, dst + i);
        } else {
          v.intoArray(out, dst + i);
        }
      }
    }
  }

  /**
   * {@link #integers} for groups of {@code 1 << log2G} values: one flat loop over the vectors, each taking its group's
   * scale (a group is whole vectors), a loop for each of store and add (C2 takes the int4 test out of them). Measured
   * (1024 x 1024, G = 128, one thread): int8 about 30 % faster than the loop over groups and over each group's
   * vectors, whose short inner loop C2 unrolls and leaves at every group, with the int4 and accumulate tests left
   * inside.
   */
  private static void flat(byte[] codes, int at, int c0, int c1, int log2G, float[] a, float qm, boolean int4,
      float[] out, int dst, boolean accumulate) {
    if (accumulate) {
      for (int i = c0; i < c1; i += L) {
        FloatVector v = dequantised(codes, at, i, int4, qm).mul(a[i >>> log2G]);
        FloatVector.fromArray(Lanes.F, out, dst + i).add(v).intoArray(out, dst + i);
      }
      return;
    }
    for (int i = c0; i < c1; i += L) {
      dequantised(codes, at, i, int4, qm).mul(a[i >>> log2G]).intoArray(out, dst + i);
    }
  }

  /**
   * Packs the low nibbles of the {@code L} codes {@code b} (one a byte lane) into {@code L / 2} bytes at {@code out[at]},
   * {@code (q_2j & 0xF) | q_2j+1 << 4}: int4's and the E2M1 kinds' layout (16 lanes and up).
   */
  static void packNibbles(ByteVector b, byte[] out, int at) {
    ShortVector pairs = b.reinterpretAsShorts();
    ((ByteVector) pairs.and((short) 0x0F).or(pairs.lanewise(LSHR, 4).and((short) 0xF0)).convertShape(S2B, HALF, 0))
        .intoArray(out, at);
  }

  /**
   * The {@code L} nibbles of the {@code L / 2} bytes at {@code codes[at]}, each at the top of its int lane: a right
   * shift by 28 reads it, arithmetic for int4's signed codes, logical for E2M1's (16 lanes and up).
   */
  static IntVector nibblesAtTop(byte[] codes, int at) {
    return ((IntVector) ByteVector.fromArray(HALF, codes, at).reinterpretShape(Lanes.B, 0).rearrange(PAIRS)
        .convertShape(B2I, Lanes.I, 0)).lanewise(LSHL, NIBBLE_SHIFTS);
  }

  /** {@code D(q) / qm} of the int8 or int4 codes of index {@code [i, i + L)} from byte {@code codes[at]}. */
  private static FloatVector dequantised(byte[] codes, int at, int i, boolean int4, float qm) {
    IntVector q = int4
        ? nibblesAtTop(codes, at + (i >> 1)).lanewise(ASHR, 28)
        : (IntVector) ByteVector.fromArray(Lanes.B, codes, at + i).convertShape(B2I, Lanes.I, 0);
    return ((FloatVector) q.convert(I2F, 0)).reinterpretAsInts()
        .blend(Float.floatToRawIntBits(Float.NaN), q.compare(EQ, int4 ? -8 : -128)).reinterpretAsFloats().div(qm);
  }

  /** {@code out[dst + i] (+)= w[i - c0] / qm * a[g]} for {@code i} in {@code [c0, c1)} (whole vectors). */
  private static void scaled(float[] w, int c0, int c1, int groupSize, float[] a, float qm, float[] out, int dst,
      boolean accumulate) {
    for (int g = c0 / groupSize; g * groupSize < c1; g++) {
      int end = Math.min(c1, (g + 1) * groupSize);
      float ag = a[g];
      for (int i = Math.max(c0, g * groupSize); i < end; i += L) {
        FloatVector v = FloatVector.fromArray(Lanes.F, w, i - c0).div(qm).mul(ag);
        if (accumulate) {
          FloatVector.fromArray(Lanes.F, out, dst + i).add(v).intoArray(out, dst + i);
        } else {
          v.intoArray(out, dst + i);
        }
      }
    }
  }

  /**
   * {@link GroupKernels#firstInvalid} on lanes (scales, then codes), the reference finding the exact index once a
   * vector holds a bad one; same result. For the E2M1 kinds the codes only ({@code nScales = 0}).
   */
  public static long firstInvalid(byte[] in, int scaleOff, int codeOff, int nScales, long nCodes, int kind,
      boolean hadamard, boolean nonFinite) {
    boolean negativeOk = hadamard && nonFinite;
    int t = 0;
    for (; t <= nScales - L; t += L) {
      IntVector a = ByteVector.fromArray(Lanes.FB, in, scaleOff + 4 * t).reinterpretAsInts();
      if (a.and(Lanes.ABS).compare(GE, Lanes.INF).or(a.compare(jdk.incubator.vector.VectorOperators.LT, 0)
          .and(Lanes.I.maskAll(!negativeOk))).anyTrue()) {
        break;
      }
    }
    long bad = GroupKernels.firstInvalid(in, scaleOff + 4 * t, codeOff, nScales - t, 0, kind, hadamard, nonFinite);
    if (bad >= 0 || nonFinite) {
      return bad < 0 ? bad : t + bad;
    }
    boolean nibbles = GroupKernels.nibbles(kind);
    int bytes = (int) (nibbles ? (nCodes + 1) / 2 : nCodes);
    // a byte holds a marker where (b & m1) == v1 or (b & m2) == v2: -128; E4M3 NaN 0x7F | sign; a nibble 0x8 (int4's
    // -8, E2M1's -0)
    byte m1 = (byte) (kind == GroupKernels.E4M3 ? 0x7F : nibbles ? 0x0F : 0xFF);
    byte v1 = (byte) (kind == GroupKernels.E4M3 ? 0x7F : nibbles ? 0x08 : 0x80);
    byte m2 = nibbles ? (byte) 0xF0 : m1;
    byte v2 = nibbles ? (byte) 0x80 : v1;
    int w = Lanes.SCAN.length();
    int i = 0;
    if (kind == GroupKernels.INT8) { // the marker -128 is the smallest byte: four vectors a test, by their minimum
      for (; i + 4 * w <= bytes; i += 4 * w) {
        ByteVector b = ByteVector.fromArray(Lanes.SCAN, in, codeOff + i)
            .min(ByteVector.fromArray(Lanes.SCAN, in, codeOff + i + w))
            .min(ByteVector.fromArray(Lanes.SCAN, in, codeOff + i + 2 * w))
            .min(ByteVector.fromArray(Lanes.SCAN, in, codeOff + i + 3 * w));
        if (b.compare(EQ, (byte) -128).anyTrue()) {
          break; // the loop below finds its vector
        }
      }
    }
    for (; i + w <= bytes; i += w) {
      ByteVector b = ByteVector.fromArray(Lanes.SCAN, in, codeOff + i);
      if (b.and(m1).compare(EQ, v1).or(b.and(m2).compare(EQ, v2)).anyTrue()) {
        break;
      }
    }
    long skipped = nibbles ? 2L * i : i; // codes known valid; the reference finds the first bad one after them
    long j = GroupKernels.firstInvalid(in, scaleOff, codeOff + i, 0, nCodes - skipped, kind, hadamard, false);
    return j < 0 ? -1 : nScales + skipped + j;
  }
}
