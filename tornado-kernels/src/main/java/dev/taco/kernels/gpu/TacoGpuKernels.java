package dev.taco.kernels.gpu;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Bytes;
import dev.taco.kernels.Constant;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.Hadamard;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.Vec16;

/**
 * The fused TACO kernels of issue C part 6, as SIMT kernels of the Java kernel model (DESIGN §3, §5): the same
 * numerics as the CPU reference {@link TacoKernels} (whose helpers they call), so the body bytes are identical.
 *
 * <h2>Thread mapping</h2>
 * One block per row, {@code cols / V} threads ({@link #V} = 16 contiguous values per thread, held in registers for
 * the whole kernel). A group of {@code G} values is held by {@code G / V} adjacent lanes (4, 8 or 16 for G = 64, 128,
 * 256), so groups never straddle a warp. Per thread: two 16-byte loads (bf16) or four (fp32); WHT stages
 * {@code h = 1..8} in registers and {@code h = 16..G/2} by {@code shflXor} with lane masks {@code 1..G/32};
 * the group absmax by the same shuffles; the row absmax by {@code warpReduceMax}, one shared float per warp and a
 * barrier; FP8 codes written as two 8-byte stores. The input is read once.
 *
 * <h2>Body layout</h2>
 * As {@code TacoCodec}'s body (after the 28-byte header): {@code rows} float32 LE coarse scales at 0,
 * {@code rows * cols/G} fine-exponent bytes at {@code 4 rows}, then {@code rows * cols} FP8 codes.
 *
 * <h2>Preconditions</h2>
 * (checked by the host, {@link GpuTacoCodec}): {@code cols} a multiple of 512 and at most 16384 (whole warps per
 * row, at most 1024 threads), {@code G} in {64, 128, 256}, the code region 8-byte aligned
 * ({@code rows * (4 + cols/G) % 8 == 0}), finite input (NaN/Inf give an unspecified body; the CPU codec refuses them
 * by default), the launch {@code rows} blocks of {@code cols / V} threads. Dual scale is always on.
 */
public final class TacoGpuKernels {
  private TacoGpuKernels() {}

  /** Values per thread. */
  public static final int V = 16;

  /**
   * Fused compress: statistics, ASH pre-scale, WHT and Dual-Scale FP8 encoding in one launch.
   *
   * @param xb bf16 input {@code rows x cols} (read when {@code bf16})
   * @param xf fp32 input {@code rows x cols} (read when not {@code bf16})
   * @param body the output body (layout in the class doc)
   * @param alpha ASH strength in [0, 1] (as the CPU codec's; it only matters for subnormal inputs)
   * @param groupSize G in {64, 128, 256}
   * @param hadamard whether groups are Walsh-Hadamard transformed
   * @param format {@link Fp8#E4M3} or {@link Fp8#E5M2}
   * @param bf16 input dtype
   */
  @Kernel
  public static void compress(KernelContext ctx, short[] xb, float[] xf, byte[] body, int rows, int cols,
      float alpha, @Constant int groupSize, @Constant boolean hadamard, @Constant int format, @Constant boolean bf16) {
    float[] warpMax = ctx.allocateFloatLocalArray(32);
    float[] v = new float[V];
    float[] t = new float[8];
    int base = ctx.groupIdx * cols + ctx.localIdx * V;
    load(xb, xf, base, v, t, bf16);
    float a = finiteAbsMax(v);
    float c = rowScale(ctx, warpMax, a, body, groupSize, format, hadamard);
    a = groupMax(ctx, a, groupSize / V);
    int k = a == 0f ? 0 : TacoKernels.preScaleExponent(a, alpha);
    preScaleAndTransform(ctx, v, k, groupSize, hadamard);
    writeCodes(ctx, v, body, rows, cols, a, c, k, groupSize, format);
  }

  /**
   * Fused decompress ({@code accumulate} false: {@code out = x^}) or decompress-reduce ({@code accumulate} true,
   * fp32 only: {@code outF += x^}, the reduce step of the two-shot all-reduce, DESIGN §4). Decoded values equal
   * {@link TacoKernels#decodeGroups}' bit for bit (bf16 output: those values rounded to nearest even).
   *
   * @param outB bf16 output (written when {@code bf16})
   * @param outF fp32 output (written, or accumulated into, when not {@code bf16})
   */
  @Kernel
  public static void decompress(KernelContext ctx, byte[] body, short[] outB, float[] outF, int rows, int cols,
      @Constant int groupSize, @Constant boolean hadamard, @Constant int format, @Constant boolean bf16,
      @Constant boolean accumulate) {
    float[] v = new float[V];
    float[] t = new float[4];
    short[] h = new short[8];
    int base = ctx.groupIdx * cols + ctx.localIdx * V;
    float c = Bytes.getFloat(body, 4 * ctx.groupIdx);
    int f = body[4 * rows + base / groupSize] & 0xFF;
    int codeOff = 4 * rows + rows * (cols / groupSize);
    for (int i = 0; i < V; i += 8) {
      long w = Vec16.loadBytes8(body, codeOff + base + i);
      for (int q = 0; q < 8; q++) {
        v[i + q] = Fp8.decode((byte) (w >>> (8 * q)), format);
      }
    }
    if (hadamard) {
      wht(ctx, v, groupSize);
    }
    int ec = Math.getExponent(c);
    float mc = Math.scalb(c, -ec);
    for (int j = 0; j < V; j++) {
      float d = c == 0f ? 0f : Math.scalb(v[j] * mc, ec - f);
      v[j] = Float.isInfinite(d) ? Math.copySign(Float.MAX_VALUE, d) : d;
    }
    if (bf16) {
      for (int i = 0; i < V; i += 8) {
        for (int q = 0; q < 8; q++) {
          h[q] = Bf16.encode(v[i + q]);
        }
        Vec16.storeShorts8(outB, base + i, h);
      }
    } else {
      for (int i = 0; i < V; i += 4) {
        if (accumulate) {
          Vec16.loadFloat4(outF, base + i, t);
          for (int q = 0; q < 4; q++) {
            t[q] = c == 0f ? t[q] : t[q] + v[i + q]; // as the CPU: an all-zero row leaves out (even -0) as is
          }
        } else {
          for (int q = 0; q < 4; q++) {
            t[q] = v[i + q];
          }
        }
        Vec16.storeFloat4(outF, base + i, t);
      }
    }
  }

  /**
   * Unfused step 1 of 3 (the ablation of DESIGN §5): per row the coarse scale into {@code body}, per group the
   * absmax of the raw values into {@code groupMax[row * cols/G + g]}.
   */
  @Kernel
  public static void unfusedStats(KernelContext ctx, short[] xb, float[] xf, byte[] body, float[] groupMax,
      int rows, int cols, @Constant int groupSize, @Constant boolean hadamard, @Constant int format,
      @Constant boolean bf16) {
    float[] warpMax = ctx.allocateFloatLocalArray(32);
    float[] v = new float[V];
    float[] t = new float[8];
    int col = ctx.localIdx * V;
    load(xb, xf, ctx.groupIdx * cols + col, v, t, bf16);
    float a = finiteAbsMax(v);
    rowScale(ctx, warpMax, a, body, groupSize, format, hadamard);
    a = groupMax(ctx, a, groupSize / V);
    if ((col & (groupSize - 1)) == 0) {
      groupMax[(ctx.groupIdx * cols + col) / groupSize] = a;
    }
  }

  /**
   * Unfused step 2 of 3: re-reads the input, applies each group's pre-scale {@code 2^k} (from {@code groupMax}) and
   * the WHT, and writes the fp32 intermediate {@code work} ({@code rows x cols}).
   */
  @Kernel
  public static void unfusedTransform(KernelContext ctx, short[] xb, float[] xf, float[] groupMax, float[] work,
      int cols, float alpha, @Constant int groupSize, @Constant boolean hadamard, @Constant boolean bf16) {
    float[] v = new float[V];
    float[] t = new float[8];
    int base = ctx.groupIdx * cols + ctx.localIdx * V;
    load(xb, xf, base, v, t, bf16);
    float a = groupMax[base / groupSize];
    preScaleAndTransform(ctx, v, a == 0f ? 0 : TacoKernels.preScaleExponent(a, alpha), groupSize, hadamard);
    for (int i = 0; i < V; i += 4) {
      for (int q = 0; q < 4; q++) {
        t[q] = v[i + q];
      }
      Vec16.storeFloat4(work, base + i, t);
    }
  }

  /**
   * Unfused step 3 of 3: reads the intermediate and {@code groupMax}, finds each group's transformed absmax, fine
   * exponent and FP8 codes, and writes them into {@code body} (coarse scales from step 1).
   */
  @Kernel
  public static void unfusedEncode(KernelContext ctx, float[] work, float[] groupMax, byte[] body, int rows,
      int cols, float alpha, @Constant int groupSize, @Constant int format) {
    float[] v = new float[V];
    float[] t = new float[4];
    int base = ctx.groupIdx * cols + ctx.localIdx * V;
    for (int i = 0; i < V; i += 4) {
      Vec16.loadFloat4(work, base + i, t);
      for (int q = 0; q < 4; q++) {
        v[i + q] = t[q];
      }
    }
    float a = groupMax[base / groupSize];
    int k = a == 0f ? 0 : TacoKernels.preScaleExponent(a, alpha);
    writeCodes(ctx, v, body, rows, cols, a, Bytes.getFloat(body, 4 * ctx.groupIdx), k, groupSize, format);
  }

  /** {@code v[0..V)} = the thread's 16 input values from element {@code i} (bf16 widened exactly, or fp32). */
  static void load(short[] xb, float[] xf, int i, float[] v, float[] t, boolean bf16) {
    if (bf16) {
      for (int c = 0; c < V; c += 8) {
        Vec16.loadBf16x8(xb, i + c, t);
        for (int q = 0; q < 8; q++) {
          v[c + q] = t[q];
        }
      }
    } else {
      for (int c = 0; c < V; c += 4) {
        Vec16.loadFloat4(xf, i + c, t);
        for (int q = 0; q < 4; q++) {
          v[c + q] = t[q];
        }
      }
    }
  }

  /** Largest finite {@code |v[j]|}, 0 if none. */
  static float finiteAbsMax(float[] v) {
    float a = 0f;
    for (int j = 0; j < V; j++) {
      float e = Math.abs(v[j]);
      if (e <= Float.MAX_VALUE) {
        a = Math.max(a, e);
      }
    }
    return a;
  }

  /** Max of {@code a} over the {@code lanes} adjacent lanes of this thread's group (shuffles; every lane calls). */
  static float groupMax(KernelContext ctx, float a, int lanes) {
    for (int m = 1; m < lanes; m <<= 1) {
      a = Math.max(a, ctx.shflXor(a, m));
    }
    return a;
  }

  /**
   * The row's coarse scale from each thread's absmax {@code a}: warp reduction, one shared value per warp, barrier,
   * every thread takes the max over the warps; thread 0 writes it to {@code body[4 * row]}. Every thread calls.
   */
  static float rowScale(KernelContext ctx, float[] warpMax, float a, byte[] body, int groupSize, int format,
      boolean hadamard) {
    float w = ctx.warpReduceMax(a);
    if (ctx.laneId() == 0) {
      warpMax[ctx.localIdx >> 5] = w;
    }
    ctx.barrier();
    float r = 0f;
    for (int i = 0; i < ctx.localGroupSize >> 5; i++) {
      r = Math.max(r, warpMax[i]);
    }
    float c = r > 0f ? TacoKernels.coarseScale(r, groupSize, format, hadamard) : 0f;
    if (ctx.localIdx == 0) {
      Bytes.putFloat(body, 4 * ctx.groupIdx, c);
    }
    return c;
  }

  /** {@code v <- 2^k v}, then the orthonormal WHT of the group when {@code hadamard} (every lane calls). */
  static void preScaleAndTransform(KernelContext ctx, float[] v, int k, int groupSize, boolean hadamard) {
    for (int j = 0; j < V; j++) {
      v[j] = Math.scalb(v[j], k);
    }
    if (hadamard) {
      wht(ctx, v, groupSize);
    }
  }

  /**
   * Orthonormal WHT of the group spread over {@code G / V} lanes, in {@link dev.taco.kernels.Hadamard#fwht}'s order
   * of operations (so the same float results): stages {@code h < V} in registers, then lane masks {@code 1 ..
   * G/(2V)} by shuffles (the lower lane keeps {@code u + v}, the upper {@code u - v}), then the scale.
   */
  static void wht(KernelContext ctx, float[] v, int groupSize) {
    for (int h = 1; h < V; h <<= 1) { // flat loops with constant bounds: nvcc keeps v in registers (nested
      for (int j = 0; j < V; j++) {    // loops with a variable step put it in local memory)
        if ((j & h) == 0) {
          float a = v[j];
          float b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      }
    }
    int lane = ctx.laneId();
    for (int m = 1; m < 32; m <<= 1) { // constant bound: unrolled, so v stays in registers
      if (m < groupSize / V) {
        boolean upper = (lane & m) != 0;
        for (int j = 0; j < V; j++) {
          float o = ctx.shflXor(v[j], m);
          v[j] = upper ? o - v[j] : v[j] + o;
        }
      }
    }
    float s = Hadamard.scale(groupSize);
    for (int j = 0; j < V; j++) {
      v[j] = v[j] * s;
    }
  }

  /**
   * Encodes the thread's transformed values {@code v}: the group's transformed absmax (shuffles), its fine exponent
   * ({@link TacoKernels#fineExponent}), one fine byte per group (written by the group's first lane) and 16 FP8
   * codes in two 8-byte stores. {@code a} is the group's raw absmax (0: the group is sent as zeros), {@code c} the
   * row's coarse scale, {@code k} the pre-scale exponent. Every lane calls.
   */
  static void writeCodes(KernelContext ctx, float[] v, byte[] body, int rows, int cols, float a, float c, int k,
      int groupSize, int format) {
    float m = groupMax(ctx, finiteAbsMax(v), groupSize / V);
    int base = ctx.groupIdx * cols + ctx.localIdx * V;
    int f = a == 0f ? 0 : TacoKernels.fineExponent(m, c, k, format);
    int ec = Math.getExponent(c);
    float mc = Math.scalb(c, -ec);
    int sh = f - k - ec;
    if ((base & (groupSize - 1)) == 0) {
      body[4 * rows + base / groupSize] = (byte) f;
    }
    int codeOff = 4 * rows + rows * (cols / groupSize);
    for (int i = 0; i < V; i += 8) {
      long w = 0;
      for (int q = 0; q < 8; q++) {
        int code = a == 0f ? 0 : Fp8.encode(Math.scalb(v[i + q] / mc, sh), format) & 0xFF;
        w |= (long) code << (8 * q);
      }
      Vec16.storeBytes8(body, codeOff + base + i, w);
    }
  }
}
