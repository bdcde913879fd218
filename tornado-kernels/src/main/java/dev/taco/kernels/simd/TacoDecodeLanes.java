package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.NE;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.TacoKernels;
import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;

/**
 * The TACO decoder on lanes: {@link TacoKernels#decodeGroups}, {@link TacoKernels#firstInvalid} and
 * decompress-reduce ({@link TacoKernels#dequantAccumulate} then {@link TacoKernels#finishReduce}), the same float
 * bits. Layout, numerics and arguments are those of {@link TacoKernels} (docs/design.md §3). A row at a time, in passes over a
 * row of scratch: the FP8 values ({@link Fp8Lanes#decode}), the inverse WHT ({@link HadamardLanes}), then per group
 * the decode multiplier {@code c 2^-f} (one multiply while it is a normal float, as {@link TacoKernels#decodeValue})
 * and the clamp of a finite value that rounded to Inf ({@link #values}). The reference kernel decodes the rows in
 * which some group's multiplier is below {@link Float#MIN_NORMAL}. Scratch: one row; stateless.
 */
public final class TacoDecodeLanes {
  private TacoDecodeLanes() {}

  private static final int L = Lanes.L;

  /**
   * Decodes a validated body as {@link TacoKernels#decodeGroups} does (arguments as there but its {@code work}).
   *
   * @param nonFinite the header's non-finite flag: the body may hold NaN/Inf codes
   */
  public static void decode(byte[] in, int scaleOff, int fineOff, int codeOff, int rows, int cols, int groupSize,
      int format, boolean hadamard, boolean dualScale, boolean nonFinite, float[] out, int outOff, boolean accumulate) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    Row row = new Row(ng, groupSize);
    for (int r = 0; r < rows; r++) {
      decodeRow(in, scaleOff + 4 * r, dualScale ? fineOff + r * ng : -1, codeOff + r * ng * groupSize, cols,
          groupSize, format, hadamard, nonFinite, row, out, outOff + r * cols, accumulate);
    }
  }

  /** One row of scratch ({@link Scratch}): values, per-group decode multipliers, per-group absmax bits (unused). */
  private record Row(float[] w, float[] ds, int[] bits) {
    Row(int ng, int groupSize) {
      this(Scratch.get().floats(Scratch.Slot.ROW, ng * groupSize), Scratch.get().floats(Scratch.Slot.FACTORS, ng),
          Scratch.get().ints(Scratch.Slot.BITS, ng));
    }
  }

  /**
   * {@code out[dst + j] (+)= x^_j}, {@code j < cols}: one row of {@link TacoKernels#decodeGroups}, its coarse scale at
   * {@code in[scaleAt]}, fine exponents at {@code in[fineAt]} (-1: single scale), codes at {@code in[codes]}.
   */
  private static void decodeRow(byte[] in, int scaleAt, int fineAt, int codes, int cols, int groupSize, int format,
      boolean hadamard, boolean nonFinite, Row row, float[] out, int dst, boolean accumulate) {
    float[] w = row.w();
    float[] ds = row.ds();
    float c = Bytes.getFloat(in, scaleAt);
    boolean transform = hadamard && Float.floatToRawIntBits(c) >= 0;
    c = Math.abs(c);
    if (c == 0f) {
      if (!accumulate) {
        Arrays.fill(out, dst, dst + cols, 0f);
      }
      return;
    }
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    if (!TacoScales.decodeScales(in, fineAt, ng, c, ds)) { // a subnormal multiplier: the reference, the whole row
      TacoKernels.decodeGroups(in, scaleAt, Math.max(fineAt, 0), codes, 1, cols, groupSize, format, transform,
          fineAt >= 0, new float[ng * groupSize], out, dst, accumulate);
      return;
    }
    Fp8Lanes.decode(in, codes, ng * groupSize, format, w, 0);
    if (nonFinite) {
      Fp8Lanes.patchNonFinite(in, codes, ng * groupSize, format, w, 0);
    }
    if (transform) {
      HadamardLanes.fwht(w, 0, groupSize, ng, row.bits());
    }
    int whole = cols / groupSize; // whole groups straight to out, a short last one through w
    values(w, 0, whole, groupSize, ds, out, dst, accumulate);
    if (whole < ng) {
      values(w, whole, ng, groupSize, ds, w, 0, false);
      Lanes.put(w, whole * groupSize, cols - whole * groupSize, out, dst + whole * groupSize, accumulate);
    }
  }

  /**
   * {@code out[dst + g*G + i] (+)= v}, {@code v = d * ds[g]} ({@link TacoKernels#decodeValue} for a normal
   * {@code ds}) with decodeGroups' clamp (a value that became +-Inf from a finite {@code d} is
   * +-{@link Float#MAX_VALUE}), {@code d = w[g*G + i]}, for groups {@code g} in {@code [g0, g1)}; {@code out} may be
   * {@code w} at 0.
   */
  private static void values(float[] w, int g0, int g1, int groupSize, float[] ds, float[] out, int dst,
      boolean accumulate) {
    int max = Float.floatToRawIntBits(Float.MAX_VALUE);
    for (int g = g0; g < g1; g++) {
      float s = ds[g];
      for (int i = g * groupSize; i < (g + 1) * groupSize; i += L) {
        FloatVector d = FloatVector.fromArray(Lanes.F, w, i);
        IntVector v = d.mul(s).reinterpretAsInts();
        VectorMask<Integer> over = v.and(Lanes.ABS).compare(EQ, Lanes.INF)
            .and(d.reinterpretAsInts().and(Lanes.ABS).compare(NE, Lanes.INF));
        FloatVector x = v.blend(v.and(0x80000000).or(max), over).reinterpretAsFloats();
        if (accumulate) {
          FloatVector.fromArray(Lanes.F, out, dst + i).add(x).intoArray(out, dst + i);
        } else {
          x.intoArray(out, dst + i);
        }
      }
    }
  }

  /**
   * {@link TacoKernels#firstInvalid}: the scales by the reference (one per row), the codes on lanes; same result.
   */
  public static long firstInvalid(byte[] in, int scaleOff, int codeOff, int rows, int nCodes, int format,
      boolean nonFinite) {
    long bad = TacoKernels.firstInvalid(in, scaleOff, codeOff, rows, 0, format, nonFinite);
    if (bad >= 0 || nonFinite) {
      return bad;
    }
    long j = Fp8Lanes.firstNonFinite(in, codeOff, nCodes, format);
    return j < 0 ? -1 : rows + j;
  }

  /**
   * Decompress-reduce of validated payloads of one plan (same shape, G, format, flags but the non-finite one), with
   * the caller's own contribution: {@code out[outOff + i] = S_i + own[ownOff + i]} ({@code S_i} alone when {@code own}
   * is null), where {@code S} is what {@link TacoKernels#dequantAccumulate} of each payload in order into a zero
   * accumulator and {@link TacoKernels#finishReduce} give, and, for rows some payload sent untransformed, the sum
   * from +0 of each payload's {@link TacoKernels#decodeGroups}. A row at a time, so one row of scratch.
   *
   * @param payloads the payloads, each its own array; their bodies have the scales at {@code scaleOff}, fine
   *     exponents at {@code fineOff} (when {@code dualScale}) and codes at {@code codeOff}
   * @param nonFinite per payload, its header's non-finite flag
   * @param own the exact contribution, or null; may be {@code out} at the same offset
   */
  public static void reduce(byte[][] payloads, boolean[] nonFinite, int scaleOff, int fineOff, int codeOff, int rows,
      int cols, int groupSize, int format, boolean hadamard, boolean dualScale, float[] own, int ownOff, float[] out,
      int outOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    int width = ng * groupSize;
    float[] acc = Scratch.get().floats(Scratch.Slot.ROW2, width);
    Row row = new Row(ng, groupSize);
    for (int r = 0; r < rows; r++) {
      boolean plain = false;
      for (int q = 0; q < payloads.length; q++) {
        plain |= hadamard && nonFinite[q] && Float.floatToRawIntBits(Bytes.getFloat(payloads[q], scaleOff + 4 * r)) < 0;
      }
      Arrays.fill(acc, 0, width, 0f);
      int fineAt = dualScale ? fineOff + r * ng : -1;
      int codes = codeOff + r * width;
      for (int q = 0; q < payloads.length; q++) {
        byte[] p = payloads[q];
        if (plain) {
          decodeRow(p, scaleOff + 4 * r, fineAt, codes, cols, groupSize, format, true, nonFinite[q], row, acc, 0,
              true);
          continue;
        }
        float c = Math.abs(Bytes.getFloat(p, scaleOff + 4 * r));
        if (c == 0f) {
          continue; // adds nothing
        }
        if (!TacoScales.decodeScales(p, fineAt, ng, c, row.ds())) { // decodeValue's two-step scaling: the reference
          TacoKernels.dequantAccumulate(p, scaleOff + 4 * r, Math.max(fineAt, 0), codes, 1, width, groupSize, format,
              dualScale, acc, 0);
          continue;
        }
        Fp8Lanes.decode(p, codes, width, format, row.w(), 0);
        if (nonFinite[q]) {
          Fp8Lanes.patchNonFinite(p, codes, width, format, row.w(), 0);
        }
        Lanes.scale(row.w(), 0, ng, groupSize, row.ds(), row.w());
        Lanes.add(acc, 0, row.w(), 0, acc, 0, width);
      }
      if (hadamard && !plain) {
        HadamardLanes.fwht(acc, 0, groupSize, ng, row.bits());
      }
      if (own == null) {
        System.arraycopy(acc, 0, out, outOff + r * cols, cols);
      } else {
        Lanes.add(acc, 0, own, ownOff + r * cols, out, outOff + r * cols, cols);
      }
    }
  }
}
