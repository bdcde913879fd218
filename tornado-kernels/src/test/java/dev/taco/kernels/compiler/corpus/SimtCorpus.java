package dev.taco.kernels.compiler.corpus;

import dev.taco.kernels.Constant;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.Vec16;

/**
 * SIMT corpus: {@link KernelContext} kernels for the emulator tests and the nvcc checks, in the shape of
 * {@code shared/reference/fused_shapes.cu} (warp per group, values in registers, shuffles).
 */
public final class SimtCorpus {
  private SimtCorpus() {}

  /** The kernels a GPU machine runs from this corpus ({@code bench/gpu-prepare.sh} pre-translates them). */
  public static java.util.List<dev.taco.kernels.compiler.KernelRequest> kernels() {
    return java.util.List.of(dev.taco.kernels.compiler.KernelRequest.of(SimtCorpus.class, "tensorCoreTile"));
  }

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
   * The fused compress shape of {@code compress_warp256} in {@code fused_shapes.cu}: bf16 groups of 256 values, one
   * warp per group, each lane loads its 8 contiguous values with one 16-byte load, WHT (3 stages in registers, 5
   * by shuffles), absmax by a warp reduction, E4M3 codes written 8 per lane with one 8-byte store. {@code vals}
   * (values per lane) is a compile-time constant: the register array and the loops are fixed; the vector
   * accesses need {@code vals == 8}.
   */
  @Kernel
  public static void compressWarp(KernelContext ctx, short[] x, byte[] q, float[] scales, int groups,
      @Constant int vals) {
    int lane = ctx.laneId();
    int g = ctx.globalIdx >> 5;
    if (g >= groups) {
      return;
    }
    float[] v = new float[vals];
    int base = g * 32 * vals + lane * vals;
    Vec16.loadBf16x8(x, base, v);
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
    for (int j = 0; j < vals; j++) {
      w |= (long) (Fp8.encodeE4M3(v[j] * s) & 0xFF) << (8 * j);
    }
    Vec16.storeBytes8(q, base, w);
    if (lane == 0) {
      scales[g] = amax / 448f;
    }
  }

  /**
   * One warp, one tensor-core product {@code c = a·b} (a 16×16, b 16×8, bf16 bits row-major; c 16×8 float32
   * row-major) per block, the operands staged through shared memory as a kernel author would: each lane starts a
   * 16-byte {@code cpAsync16} of its part of the tiles, waits, meets the others at a barrier, loads A's fragments with
   * {@code ldmatrixX4} and B's with {@code ldmatrixX4Trans} (its upper two matrices repeat the lower two), and
   * multiplies with {@code mmaBf16}. Block {@code b} reads {@code a[256b ..]}, {@code b[128b ..]}, writes
   * {@code c[128b ..]}. Blocks of 32 threads.
   */
  @Kernel
  public static void tensorCoreTile(KernelContext ctx, short[] a, short[] b, float[] c) {
    int[] sa = ctx.allocateIntLocalArray(128);
    int[] sb = ctx.allocateIntLocalArray(64);
    int lane = ctx.laneId();
    int blk = ctx.groupIdx;
    ctx.cpAsync16(sa, 4 * lane, a, 256 * blk + 8 * lane);
    if (lane < 16) {
      ctx.cpAsync16(sb, 4 * lane, b, 128 * blk + 8 * lane);
    }
    ctx.cpAsyncCommit();
    ctx.cpAsyncWait(0);
    ctx.barrier();
    int i = lane >> 3, r = lane & 7;
    int[] fa = new int[4];
    int[] fb = new int[4];
    ctx.ldmatrixX4(fa, 0, sa, ((i & 1) * 8 + r) * 8 + (i >> 1) * 4);
    ctx.ldmatrixX4Trans(fb, 0, sb, ((i & 1) * 8 + r) * 4);
    float[] acc = new float[4];
    ctx.mmaBf16(acc, 0, fa[0], fa[1], fa[2], fa[3], fb[0], fb[1]);
    int g = lane >> 2, t = lane & 3;
    c[128 * blk + g * 8 + 2 * t] = acc[0];
    c[128 * blk + g * 8 + 2 * t + 1] = acc[1];
    c[128 * blk + (g + 8) * 8 + 2 * t] = acc[2];
    c[128 * blk + (g + 8) * 8 + 2 * t + 1] = acc[3];
  }

  /** Random bf16 bits (Gaussian values) for {@link #tensorCoreTile}: {@code n} of them. */
  public static short[] randomBf16(java.util.Random rnd, int n) {
    short[] v = new short[n];
    for (int i = 0; i < n; i++) v[i] = dev.taco.kernels.Bf16.encode((float) rnd.nextGaussian());
    return v;
  }

  /** {@link #tensorCoreTile}'s {@code c[128 blk + 8 r + col]} in float64 (the reference its tests compare with). */
  public static double tensorCoreTileReference(short[] a, short[] b, int blk, int r, int col) {
    double sum = 0;
    for (int k = 0; k < 16; k++) {
      sum += (double) dev.taco.kernels.Bf16.decode(a[256 * blk + r * 16 + k])
          * dev.taco.kernels.Bf16.decode(b[128 * blk + k * 8 + col]);
    }
    return sum;
  }
}
