package dev.taco.kernels.simd;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.TacoKernels;
import java.util.Arrays;

/**
 * The TACO encoder on lanes: {@link TacoKernels#rowScales} then {@link TacoKernels#encodeGroups}, the same bytes.
 * Layout, numerics and arguments are those of {@link TacoKernels} (docs/design.md §3, after arXiv 2604.24088). A row at a
 * time, in passes (a zero-padded copy of the row first when its last group is short): every group's absmax
 * ({@link Lanes#groupMaxBits}; the row's coarse scale from their max); per group the pre-scale exponent k
 * ({@link TacoScales#preScale}); each value times {@code 2^k}, with Hadamard fused with the WHT
 * ({@link HadamardLanes}), whose last stage gives the transformed absmax; per group the fine exponent and the encode
 * multiplier ({@link TacoScales#encodeScales}); the FP8 codes ({@link Fp8Lanes#encode}).
 *
 * <p>{@code x * 2^k} is one correctly rounded multiply, as {@link Math#scalb} rounds it, while {@code 2^k} is a
 * float32 ({@code k} in -149..127); the pre-scaled absmax is {@code a * 2^k} (rounding is monotonic). Every value of a
 * finite row stays finite ({@code |x 2^k| < 2^101}, the WHT grows a group's max by at most sqrt(G)). The reference
 * kernel itself encodes, group by group, what the lanes do not cover: rows holding NaN/Inf (policy propagate) and
 * groups whose {@code 2^k} is no float32 (their max is a float32 subnormal). Scratch: one row; stateless.
 */
public final class TacoLanes {
  private TacoLanes() {}

  /**
   * Writes the whole body as {@link TacoKernels#rowScales} then {@link TacoKernels#encodeGroups} would (arguments as
   * there but their {@code work} and {@code sat}); NaN/Inf in the input are written as policy propagate writes them.
   *
   * @return the saturation count (the sum of {@code encodeGroups}' {@code sat}), plus {@link Lanes#NON_FINITE} if
   *     the input held NaN/Inf
   */
  public static long encode(float[] x, int xOff, int rows, int cols, int groupSize, int format, float alpha,
      boolean hadamard, boolean dualScale, byte[] out, int scaleOff, int fineOff, int codeOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    boolean padded = ng * groupSize != cols; // the last group is short: work on a zero-padded copy of each row
    Scratch scratch = Scratch.get();
    float[] w = scratch.floats(Scratch.Slot.ROW, ng * groupSize);
    int lanes = Lanes.whole(ng); // per-group arrays hold whole vectors
    int[] bits = scratch.ints(Scratch.Slot.BITS, lanes);
    int[] k = scratch.ints(Scratch.Slot.EXPONENTS, lanes);
    float[] p = scratch.floats(Scratch.Slot.FACTORS, lanes);
    float[] es = scratch.floats(Scratch.Slot.MULTIPLIERS, lanes);
    int[] f = scratch.ints(Scratch.Slot.FINE, lanes);
    boolean[] reference = new boolean[lanes];
    int infCode = Fp8Lanes.infinityCode(format);
    long sat = 0;
    boolean nonFinite = false;
    for (int r = 0; r < rows; r++) {
      int base = xOff + r * cols;
      float[] src = x;
      int srcOff = base;
      if (padded) {
        System.arraycopy(x, base, w, 0, cols);
        Arrays.fill(w, cols, ng * groupSize, 0f);
        src = w;
        srcOff = 0;
      }
      int all = Lanes.groupMaxBits(src, srcOff, ng, groupSize, bits);
      boolean special = all >= Lanes.INF;
      nonFinite |= special;
      float a = special ? Lanes.absMaxFinite(x, base, cols) : Float.intBitsToFloat(all);
      float c = a > 0f || special ? TacoKernels.coarseScale(a, groupSize, format, hadamard) : 0f;
      Bytes.putFloat(out, scaleOff + 4 * r, special ? -c : c);
      if (special) { // every group by the reference: it sends the row untransformed
        Arrays.fill(reference, true);
        Arrays.fill(p, 0f);
      } else {
        TacoScales.preScale(bits, ng, alpha, k, p, reference);
      }
      if (hadamard) {
        HadamardLanes.transform(src, srcOff, p, groupSize, ng, w, 0, bits);
      } else {
        Lanes.scale(src, srcOff, ng, groupSize, p, w);
      }
      if (c > 0f && !special) {
        TacoScales.encodeScales(bits, hadamard ? null : p, k, reference, ng, c, format, dualScale, f, es);
      } else {
        Arrays.fill(f, 0);
        Arrays.fill(es, 0f);
      }
      for (int g = 0; dualScale && g < ng; g++) {
        out[fineOff + r * ng + g] = (byte) f[g];
      }
      sat += Fp8Lanes.encode(w, 0, ng, groupSize, es, format, infCode, out, codeOff + r * ng * groupSize);
      for (int g = 0; g < ng; g++) {
        int t = r * ng + g;
        if (bits[g] == 0 && !reference[g]) { // +-0 values: code 0, whatever their sign (the reference's a == 0 case)
          Arrays.fill(out, codeOff + t * groupSize, codeOff + (t + 1) * groupSize, (byte) 0);
        } else if (reference[g]) { // rewrites the group's codes and fine exponent
          int[] s = new int[1];
          TacoKernels.encodeGroups(x, base + g * groupSize, 1, Math.min(groupSize, cols - g * groupSize), groupSize,
              format, alpha, hadamard, dualScale, new float[groupSize], s, out, scaleOff + 4 * r, fineOff + t,
              codeOff + t * groupSize);
          sat += s[0];
        }
      }
    }
    return nonFinite ? sat | Lanes.NON_FINITE : sat;
  }
}
