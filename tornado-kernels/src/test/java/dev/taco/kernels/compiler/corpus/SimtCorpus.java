package dev.taco.kernels.compiler.corpus;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Constant;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;

/**
 * SIMT corpus: {@link KernelContext} kernels for the emulator tests and the nvcc checks, in the shape of
 * {@code shared/reference/fused_shapes.cu} (warp per group, values in registers, shuffles).
 */
public final class SimtCorpus {
  private SimtCorpus() {}

  /** Threads per block these kernels assume. */
  public static final int BLOCK = 128;
  /** Values per lane in the warp kernels. */
  public static final int V = 8;

  /**
   * Block reduction: {@code out[b] = sum of x[b*BLOCK .. b*BLOCK+BLOCK)} (missing elements count 0), by a shared
   * array tree with barriers; the summation order is fixed (pairs at distance 64, 32, ..., 1).
   */
  @Kernel
  public static void blockSum(KernelContext ctx, float[] x, float[] out, int n) {
    float[] s = ctx.allocateFloatLocalArray(BLOCK);
    int i = ctx.globalIdx;
    s[ctx.localIdx] = i < n ? x[i] : 0f;
    ctx.barrier();
    for (int h = BLOCK / 2; h > 0; h >>= 1) {
      if (ctx.localIdx < h) {
        s[ctx.localIdx] += s[ctx.localIdx + h];
      }
      ctx.barrier();
    }
    if (ctx.localIdx == 0) {
      out[ctx.groupIdx] = s[0];
    }
  }

  /** Shared memory and barrier: reverses each block's slice of {@code x} (int) through a shared array. */
  @Kernel
  public static void blockReverse(KernelContext ctx, int[] x, int[] out) {
    int[] s = ctx.allocateIntLocalArray(BLOCK);
    s[ctx.localIdx] = x[ctx.globalIdx];
    ctx.barrier();
    out[ctx.globalIdx] = s[BLOCK - 1 - ctx.localIdx] * 3 + ctx.laneId();
  }

  /**
   * Unnormalised Walsh-Hadamard transform of groups of {@code 32 * V} floats, one warp per group: each lane holds
   * {@code V} contiguous values in a register array; stages 1..V/2 in registers, the rest by {@code shflXor}
   * (lane mask m: the partner holds the values at distance {@code m * V}). Then the group's absmax by
   * {@code warpReduceMax}, written to {@code amax[group]}.
   */
  @Kernel
  public static void warpHadamard(KernelContext ctx, float[] x, float[] y, float[] amax, int groups) {
    int lane = ctx.laneId();
    int g = ctx.globalIdx >> 5;
    if (g >= groups) {
      return;
    }
    float[] v = new float[V];
    int base = g * 32 * V + lane * V;
    for (int j = 0; j < V; j++) {
      v[j] = x[base + j];
    }
    butterflyInRegisters(v);
    for (int m = 1; m < 32; m <<= 1) {
      boolean upper = (lane & m) != 0;
      for (int j = 0; j < V; j++) {
        float o = ctx.shflXor(v[j], m);
        v[j] = upper ? o - v[j] : v[j] + o;
      }
    }
    float a = 0f;
    for (int j = 0; j < V; j++) {
      a = Math.max(a, Math.abs(v[j]));
      y[base + j] = v[j];
    }
    a = ctx.warpReduceMax(a);
    if (lane == 0) {
      amax[g] = a;
    }
  }

  /** In-place unnormalised WHT of the {@code V} values of a register array (a device function). */
  static void butterflyInRegisters(float[] v) {
    for (int h = 1; h < V; h <<= 1) {
      for (int i = 0; i < V; i += 2 * h) {
        for (int j = i; j < i + h; j++) {
          float a = v[j];
          float b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      }
    }
  }

  /**
   * The fused compress shape of {@code compress_warp256}: bf16 groups of {@code 32 * vals} values, one warp per
   * group, WHT (registers + shuffles), absmax scale, E4M3 codes packed 8 per long. {@code vals} is a
   * compile-time constant (specialised, e.g. 8), so the register array and loops are fixed.
   */
  @Kernel
  public static void compressWarp(KernelContext ctx, short[] x, long[] q, float[] scales, int groups,
      @Constant int vals) {
    int lane = ctx.laneId();
    int g = ctx.globalIdx >> 5;
    if (g >= groups) {
      return;
    }
    float[] v = new float[vals];
    int base = g * 32 * vals + lane * vals;
    for (int j = 0; j < vals; j++) {
      v[j] = Bf16.decode(x[base + j]);
    }
    for (int h = 1; h < vals; h <<= 1) {
      for (int i = 0; i < vals; i += 2 * h) {
        for (int j = i; j < i + h; j++) {
          float a = v[j];
          float b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      }
    }
    for (int m = 1; m < 32; m <<= 1) {
      boolean upper = (lane & m) != 0;
      for (int j = 0; j < vals; j++) {
        float o = ctx.shflXor(v[j], m);
        v[j] = upper ? o - v[j] : v[j] + o;
      }
    }
    float amax = 0f;
    for (int j = 0; j < vals; j++) {
      amax = Math.max(amax, Math.abs(v[j]));
    }
    amax = ctx.warpReduceMax(amax);
    float s = amax > 0f ? 448f / amax : 1f;
    long w = 0;
    for (int j = 0; j < 8; j++) {
      w |= (long) (Fp8.encodeE4M3(v[j] * s) & 0xFF) << (8 * j);
    }
    q[g * 32 + lane] = w;
    if (lane == 0) {
      scales[g] = amax / 448f;
    }
  }
}
