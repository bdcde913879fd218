package dev.taco.kernels.simd;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.TacoKernels;
import java.util.Arrays;

/**
 * The TACO encoder on lanes: {@link TacoKernels#rowScales} then {@link TacoKernels#encodeGroups}, the same bytes.
 * Layout, numerics and arguments are those of {@link TacoKernels} (DESIGN §3, after arXiv 2604.24088). A row at a
 * time, in passes (a zero-padded copy of the row first when its last group is short): every group's absmax
 * ({@link Lanes#groupMaxBits}; the row's coarse scale from their max); per group the pre-scale exponent k
 * ({@link TacoKernels#preScaleExponent}); each value times {@code 2^k}, with Hadamard fused with the WHT
 * ({@link HadamardLanes}), whose last stage gives the transformed absmax; per group the fine exponent and the encode
 * multiplier ({@link TacoKernels#fineExponent}, {@link TacoKernels#encodeScale}); the FP8 codes
 * ({@link Fp8Lanes#encode}).
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
   * Writes the whole body as {@link TacoKernels#rowScales} then {@link TacoKernels#encodeGroups} would.
   *
   * @return the saturation count (the sum of {@code encodeGroups}' {@code sat}), plus {@link Lanes#NON_FINITE} if
   *     the input held NaN/Inf
   */
  public static long encode(float[] x, int xOff, int rows, int cols, int groupSize, int format, float alpha,
      boolean hadamard, boolean dualScale, byte[] out, int scaleOff, int fineOff, int codeOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    boolean padded = ng * groupSize != cols; // the last group is short: work on a zero-padded copy of each row
    float[] w = new float[ng * groupSize];
    int[] bits = new int[ng];
    int[] k = new int[ng];
    float[] scale = new float[ng];
    boolean[] reference = new boolean[ng];
    int infCode = Fp8Lanes.infinityCode(format);
    long sat = 0;
    boolean nonFinite = false;
    for (int r = 0; r < rows; r++) {
      int base = xOff + r * cols;
      float[] src = x;
      int srcOff = base;
      if (padded) {
        System.arraycopy(x, base, w, 0, cols);
        Arrays.fill(w, cols, w.length, 0f);
        src = w;
        srcOff = 0;
      }
      int all = Lanes.groupMaxBits(src, srcOff, ng, groupSize, bits);
      boolean special = all >= Lanes.INF;
      nonFinite |= special;
      float a = special ? Lanes.absMaxFinite(x, base, cols) : Float.intBitsToFloat(all);
      float c = a > 0f || special ? TacoKernels.coarseScale(a, groupSize, format, hadamard) : 0f;
      Bytes.putFloat(out, scaleOff + 4 * r, special ? -c : c);
      for (int g = 0; g < ng; g++) {
        float ga = Float.intBitsToFloat(bits[g]);
        k[g] = ga > 0f && !special ? preScaleExponent(ga, alpha) : 0;
        reference[g] = special || k[g] < -149 || k[g] > 127;
        scale[g] = reference[g] ? 0f : k[g] >= -126 ? Float.intBitsToFloat(k[g] + 127 << 23) : Math.scalb(1f, k[g]);
      }
      if (hadamard) {
        HadamardLanes.transform(src, srcOff, scale, groupSize, ng, w, 0, bits);
      } else {
        Lanes.scale(src, srcOff, ng, groupSize, scale, w);
      }
      float inv = c > 0f ? TacoKernels.inverseMantissa(c) : 0f;
      for (int g = 0; g < ng; g++) {
        int f = 0;
        if (!reference[g] && bits[g] != 0) { // an all-zero group keeps f = 0; its codes are zeroed below
          float m = hadamard ? Float.intBitsToFloat(bits[g]) : Float.intBitsToFloat(bits[g]) * scale[g];
          f = dualScale ? TacoKernels.fineExponent(m, c, inv, k[g], format) : 0;
          scale[g] = TacoKernels.encodeScale(m, c, inv, f, k[g], format);
        }
        if (dualScale) {
          out[fineOff + r * ng + g] = (byte) f;
        }
      }
      sat += Fp8Lanes.encode(w, 0, ng, groupSize, scale, format, infCode, out, codeOff + r * ng * groupSize);
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

  /**
   * {@link TacoKernels#preScaleExponent}, with alpha = 1 (the default) short-cut: {@code round(-1 * l) = -l}, inside
   * the clamp {@code [-100 - l, 100 - l]}.
   */
  private static int preScaleExponent(float a, float alpha) {
    return alpha == 1f ? -TacoKernels.ilogb(a) : TacoKernels.preScaleExponent(a, alpha);
  }
}
