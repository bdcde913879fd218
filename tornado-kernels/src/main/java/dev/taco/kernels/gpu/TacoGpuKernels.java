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
 * The fused TACO kernels, as SIMT kernels of the Java kernel model (docs/design.md §3, §5): the same
 * numerics as the CPU reference {@link TacoKernels} (whose helpers they call), so the body bytes are identical.
 *
 * <h2>Thread mapping</h2>
 * One block per row, {@code cols / V} threads ({@link #V} = 32 contiguous values per thread, held in registers for
 * the whole kernel). A group of {@code G} values is held by {@code G / V} adjacent lanes (2, 4 or 8 for G = 64, 128,
 * 256), so groups never straddle a warp. Per thread: four 16-byte loads (bf16) or eight (fp32); WHT stages
 * {@code h = 1..16} in registers and {@code h = 32..G/2} by {@code shflXor} with lane masks {@code 1..G/64} (one
 * {@code fma} by +-1 per value and stage); absmax as an integer max of the values' bits; the group absmax by the same
 * shuffles, continued to the warp's, one shared int per warp and a barrier for the row's; FP8 codes four at a time
 * ({@link Fp8#encode4}: two hardware conversions) and written as 8-byte stores. The input is read once.
 *
 * <p>Measured on one H200 (bench/results/gpu-codec.json): this shape and the per-group scalar work done on bits
 * ({@link TacoKernels#fineExponent}, {@link TacoKernels#encodeScale}) took the fused compress of 64 MiB from 0.119 ms
 * (16 values a thread, division and {@code scalb} per value) to about 0.040 ms.
 *
 * <h2>Body layout</h2>
 * As {@code TacoCodec}'s body (after the 28-byte header): {@code rows} float32 LE coarse scales at 0,
 * {@code rows * cols/G} fine-exponent bytes at {@code 4 rows}, then {@code rows * cols} FP8 codes.
 *
 * <h2>Preconditions</h2>
 * (checked by the host, {@link GpuTacoCodec}): {@code cols} a multiple of 1024 and at most
 * {@link GpuTacoCodec#MAX_COLS} (whole warps per row), {@code G} in {64, 128, 256}, the code region 8-byte aligned
 * ({@code rows * (4 + cols/G) % 8 == 0}), the launch {@code rows} blocks of {@code cols / V} threads. Dual scale is
 * always on, alpha is 1 (the CPU codec's default). Non-finite input is not encoded: its row gets a NaN coarse scale
 * (see {@link #rowScale}); the CPU codec refuses such input by default.
 *
 * <p>The helpers are shared with {@link TwoShotGpuKernels}, whose kernels take any {@code cols} up to 16384 and G = 32
 * as well: they address bodies by explicit offsets ({@link #fineAt}, {@link #codeAt}), lanes past a row's last group
 * write nothing ({@link #writeCodes}, {@link #decodeLane}), and row tails use scalar accesses ({@link #loadRow},
 * {@link #storeRow}). For the shapes above they take the same paths as before (same bytes).
 */
public final class TacoGpuKernels {
  private TacoGpuKernels() {}

  /** Values per thread (docs/design.md §5: more values per thread, fewer shuffle stages and less per-thread overhead). */
  public static final int V = 32;

  /**
   * Fused compress: statistics, ASH pre-scale, WHT and Dual-Scale FP8 encoding in one launch.
   *
   * @param xb bf16 input {@code rows x cols} (read when {@code bf16})
   * @param xf fp32 input {@code rows x cols} (read when not {@code bf16})
   * @param body the output body (layout in the class doc)
   * @param groupSize G in {64, 128, 256}
   * @param hadamard whether groups are Walsh-Hadamard transformed
   * @param format {@link Fp8#E4M3} or {@link Fp8#E5M2}
   * @param bf16 input dtype
   */
  @Kernel
  public static void compress(KernelContext ctx, short[] xb, float[] xf, byte[] body, int rows, int cols,
      @Constant int groupSize, @Constant boolean hadamard, @Constant int format, @Constant boolean bf16) {
    int[] warpMax = ctx.allocateIntLocalArray(32);
    float[] v = new float[V];
    float[] t = new float[8];
    int col = ctx.localIdx * V;
    load(xb, xf, ctx.groupIdx * cols + col, v, t, bf16);
    encodeRow(ctx, warpMax, v, body, rows, cols / groupSize, col, groupSize, hadamard, format);
  }

  /**
   * Fused decompress ({@code accumulate} false: {@code out = x^}) or decompress-reduce ({@code accumulate} true,
   * fp32 only: {@code outF += x^}, the reduce step of the two-shot all-reduce, docs/design.md §4). Decoded values equal
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
    int col = ctx.localIdx * V;
    int base = ctx.groupIdx * cols + col;
    float c = decodeLane(ctx, body, 0, rows, cols / groupSize, ctx.groupIdx, col, v, groupSize, hadamard, format);
    if (accumulate) {
      for (int i = 0; i < V; i += 4) {
        Vec16.loadFloat4(outF, base + i, t);
        for (int q = 0; q < 4; q++) {
          t[q] = c == 0f ? t[q] : t[q] + v[i + q]; // as the CPU: an all-zero row leaves out (even -0) as is
        }
        Vec16.storeFloat4(outF, base + i, t);
      }
    } else {
      storeRow(outB, outF, ctx.groupIdx * cols, col, cols, v, t, bf16, false);
    }
  }

  /**
   * Unfused step 1 of 3 (the ablation of docs/design.md §5): per row the coarse scale into {@code body}, per group the
   * absmax of the raw values into {@code groupMax[row * cols/G + g]}.
   */
  @Kernel
  public static void unfusedStats(KernelContext ctx, short[] xb, float[] xf, byte[] body, float[] groupMax,
      int rows, int cols, @Constant int groupSize, @Constant boolean hadamard, @Constant int format,
      @Constant boolean bf16) {
    int[] warpMax = ctx.allocateIntLocalArray(32);
    float[] v = new float[V];
    float[] t = new float[8];
    int col = ctx.localIdx * V;
    load(xb, xf, ctx.groupIdx * cols + col, v, t, bf16);
    int a = maxOverLanes(ctx, absMaxBits(v), 1, groupSize / V);
    rowScale(ctx, warpMax, a, groupSize / V, body, groupSize, format, hadamard);
    if ((col & (groupSize - 1)) == 0) {
      groupMax[(ctx.groupIdx * cols + col) / groupSize] = Float.intBitsToFloat(a);
    }
  }

  /**
   * Unfused step 2 of 3: re-reads the input, applies each group's pre-scale {@code 2^k} (from {@code groupMax}) and
   * the WHT, and writes the fp32 intermediate {@code work} ({@code rows x cols} floats, in {@link #workIndex}'s
   * order).
   */
  @Kernel
  public static void unfusedTransform(KernelContext ctx, short[] xb, float[] xf, float[] groupMax, float[] work,
      int cols, @Constant int groupSize, @Constant boolean hadamard, @Constant boolean bf16) {
    float[] v = new float[V];
    float[] t = new float[8];
    int base = ctx.groupIdx * cols + ctx.localIdx * V;
    load(xb, xf, base, v, t, bf16);
    float a = groupMax[base / groupSize];
    preScaleAndTransform(ctx, v, preScaleExponent(Float.floatToRawIntBits(a)), groupSize, hadamard, true);
    for (int i = 0; i < V; i += 4) {
      for (int q = 0; q < 4; q++) {
        t[q] = v[i + q];
      }
      Vec16.storeFloat4(work, workIndex(ctx, i), t);
    }
  }

  /**
   * Unfused step 3 of 3: reads the intermediate and {@code groupMax}, finds each group's transformed absmax, fine
   * exponent and FP8 codes, and writes them into {@code body} (coarse scales from step 1).
   */
  @Kernel
  public static void unfusedEncode(KernelContext ctx, float[] work, float[] groupMax, byte[] body, int rows,
      int cols, @Constant int groupSize, @Constant int format) {
    float[] v = new float[V];
    float[] t = new float[4];
    int base = ctx.groupIdx * cols + ctx.localIdx * V;
    for (int i = 0; i < V; i += 4) {
      Vec16.loadFloat4(work, workIndex(ctx, i), t);
      for (int q = 0; q < 4; q++) {
        v[i + q] = t[q];
      }
    }
    float a = groupMax[base / groupSize];
    int k = preScaleExponent(Float.floatToRawIntBits(a));
    writeCodes(ctx, v, body, rows, cols / groupSize, ctx.localIdx * V, a == 0f, Bytes.getFloat(body, 4 * ctx.groupIdx),
        k, groupSize, format, 1f);
  }

  /**
   * Where value {@code i} (a multiple of 4) of this thread lives in the unfused pipeline's fp32 intermediate: the
   * buffer is private to the two kernels, so it is laid out for coalesced 16-byte accesses (a warp's lanes touch 512
   * consecutive bytes) rather than row-major, which keeps the ablation about fusion, not about access patterns.
   */
  static int workIndex(KernelContext ctx, int i) {
    return ((ctx.groupIdx * (V / 4) + i / 4) * ctx.localGroupSize + ctx.localIdx) * 4;
  }

  /** {@code v[0..V)} = the thread's V input values from element {@code i} (bf16 widened exactly, or fp32). */
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

  /**
   * The bits of the largest {@code |v[j]|}: for non-negative floats the order of the int bits is the order of the
   * values, so this is one integer max per value. NaN/Inf give at least {@code 0x7F800000}.
   */
  static int absMaxBits(float[] v) {
    int a = 0;
    for (int j = 0; j < V; j++) {
      a = Math.max(a, Float.floatToRawIntBits(v[j]) & 0x7FFFFFFF);
    }
    return a;
  }

  /**
   * Max of {@code a} over lane masks {@code from, 2 from, ... < to} (shuffles; every lane calls): {@code (a, 1, L)}
   * reduces over the L adjacent lanes of a group; continuing with {@code (that, L, 32)} gives the warp's max.
   */
  static int maxOverLanes(KernelContext ctx, int a, int from, int to) {
    for (int m = from; m < to; m <<= 1) {
      a = Math.max(a, ctx.shflXor(a, m));
    }
    return a;
  }

  /**
   * The ASH pre-scale exponent of a group from its {@link #absMaxBits}: {@link TacoKernels#preScaleExponent} at the
   * codec's default alpha = 1 (the GPU kernels' only alpha; alpha does not change the payload, see
   * {@link TacoKernels}), which is {@code -ilogb(a)} (the clamp cannot bind); 0 for an all-zero group.
   */
  static int preScaleExponent(int a) {
    return a == 0 ? 0 : -TacoKernels.ilogb(Float.intBitsToFloat(a));
  }

  /**
   * The row's coarse scale from each thread's group max {@code a} (bits, {@link #absMaxBits} over its {@code lanes}
   * group lanes): the rest of the warp reduction, one shared value per warp, barrier, a reduction over those; thread 0
   * writes it to {@code body[4 * row]}. A row holding NaN/Inf gets a NaN scale, which the decoders reject
   * ({@link TacoKernels#firstInvalid}) or propagate: never a silently wrong row. Every thread calls.
   */
  static float rowScale(KernelContext ctx, int[] warpMax, int a, int lanes, byte[] body, int groupSize, int format,
      boolean hadamard) {
    int r = blockMax(ctx, warpMax, a, lanes);
    float c = r >= 0x7F800000 ? Float.NaN
        : r > 0 ? TacoKernels.coarseScale(Float.intBitsToFloat(r), groupSize, format, hadamard) : 0f;
    if (ctx.localIdx == 0) {
      Bytes.putFloat(body, 4 * ctx.groupIdx, c);
    }
    return c;
  }

  /**
   * The block's maximum of {@code a} (non-negative ints; every thread calls, barrier inside): the maximum over lane
   * masks {@code from .. 16} ({@code from}: the lanes already reduced), one shared value per warp in {@code warpMax}
   * (32 ints), then a reduction over those; every thread gets it.
   */
  static int blockMax(KernelContext ctx, int[] warpMax, int a, int from) {
    int w = maxOverLanes(ctx, a, from, KernelContext.WARP_SIZE);
    if (ctx.laneId() == 0) {
      warpMax[ctx.localIdx >> 5] = w;
    }
    ctx.barrier();
    int warps = ctx.localGroupSize >> 5;
    int span = 1;
    while (span < warps) {
      span <<= 1;
    }
    int i = ctx.laneId() & (span - 1); // every aligned block of span lanes holds all the warps' values
    return maxOverLanes(ctx, i < warps ? warpMax[i] : 0, 1, span);
  }

  /**
   * {@code v <- 2^k v} ({@code Math.scalb}: for {@code -126 <= k <= 127} a multiply by the normal float {@code 2^k},
   * which rounds once as scalb does), then the WHT of the group when {@code hadamard} ({@code normalise}: times
   * {@code 1/sqrt(G)}, else that is left to the caller). Every lane calls.
   */
  static void preScaleAndTransform(KernelContext ctx, float[] v, int k, int groupSize, boolean hadamard,
      boolean normalise) {
    if (k >= -126 && k <= 127) {
      float p = Float.intBitsToFloat((k + 127) << 23);
      for (int j = 0; j < V; j++) {
        v[j] = v[j] * p;
      }
    } else {
      for (int j = 0; j < V; j++) {
        v[j] = Math.scalb(v[j], k);
      }
    }
    if (hadamard) {
      wht(ctx, v, groupSize, normalise);
    }
  }

  /**
   * The WHT's normalisation {@code 1/sqrt(G)} when it is an exact power of two (G = 64, 256 with Hadamard), to be
   * folded into the per-group encode or decode multiplier instead of a multiply per value; else 1 (G = 128: the
   * transform normalises itself). Folding is exact: see {@link #writeCodes} and {@link #decompress}.
   */
  static float deferredScale(int groupSize, boolean hadamard) {
    return hadamard && (groupSize & 0x55555555) != 0 ? Hadamard.scale(groupSize) : 1f;
  }

  /**
   * Orthonormal WHT of the group spread over {@code G / V} lanes, in {@link dev.taco.kernels.Hadamard#fwht}'s order
   * of operations (so the same float results): stages {@code h < V} in registers, then lane masks {@code 1 ..
   * G/(2V)} by shuffles (the lower lane keeps {@code u + v}, the upper {@code u - v}), then, when {@code normalise},
   * the scale.
   */
  static void wht(KernelContext ctx, float[] v, int groupSize, boolean normalise) {
    for (int h = 1; h < V; h <<= 1) { // flat loops with constant bounds: nvcc keeps v in registers (nested
      for (int j = 0; j < V; j++) { // loops with a variable step put it in local memory)
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
        float sign = (lane & m) != 0 ? -1f : 1f; // lower lane: v + o; upper: o - v; one rounding each (fma by +-1)
        for (int j = 0; j < V; j++) {
          v[j] = Math.fma(sign, v[j], ctx.shflXor(v[j], m));
        }
      }
    }
    if (normalise) {
      float s = Hadamard.scale(groupSize);
      for (int j = 0; j < V; j++) {
        v[j] = v[j] * s;
      }
    }
  }

  /**
   * Encodes the thread's transformed values {@code v} (still to be multiplied by {@code hs}, see
   * {@link #deferredScale}; 1 if not): the group's transformed absmax (shuffles), its fine exponent
   * ({@link TacoKernels#fineExponent}), one fine byte per group (written by the group's first lane) and V FP8 codes
   * {@code fp8(v * hs * s)} with {@link TacoKernels#encodeScale} {@code s}, in 8-byte stores, for row
   * {@code ctx.groupIdx} of a body of {@code rows} rows of {@code ng} groups; this lane holds columns {@code col ..
   * col + V} (a lane with {@code col >= ng * G} holds no group of the row and writes nothing). {@code zero}: the group
   * is all zeros (sent as zero codes, fine byte 0); {@code c} the row's coarse scale, {@code k} the pre-scale
   * exponent. Every lane calls.
   *
   * <p>{@code v * (hs * s)} gives the CPU's {@code (v * hs) * s} codes: {@code hs * s} is exact while normal (checked,
   * else the values are scaled first), and {@code v * hs} is exact unless it is subnormal, where both products are
   * below 2^-100 (the group's max is in [2^-4, 2^5] at alpha = 1, so {@code s < 2^20}) and encode to zero of the same
   * sign.
   */
  static void writeCodes(KernelContext ctx, float[] v, byte[] body, int rows, int ng, int col, boolean zero, float c,
      int k, int groupSize, int format, float hs) {
    float m = Float.intBitsToFloat(maxOverLanes(ctx, absMaxBits(v), 1, groupSize / V)) * hs;
    float inv = TacoKernels.inverseMantissa(c);
    int f = zero ? 0 : TacoKernels.fineExponent(m, c, inv, k, format);
    float s = zero ? 0f : TacoKernels.encodeScale(m, c, inv, f, k, format);
    float sv = s * hs;
    if (!zero && hs != 1f && sv < Float.MIN_NORMAL) {
      for (int j = 0; j < V; j++) {
        v[j] = v[j] * hs;
      }
      sv = s;
    }
    if (col >= ng * groupSize) {
      return;
    }
    int fine = fineAt(0, rows, ng, ctx.groupIdx, col, groupSize);
    if ((col & (groupSize - 1)) == 0) {
      body[fine] = (byte) f;
    }
    int at = codeAt(0, rows, ng, ctx.groupIdx, col, groupSize);
    for (int i = 0; i < V; i += 8) {
      int lo = Fp8.encode4(v[i] * sv, v[i + 1] * sv, v[i + 2] * sv, v[i + 3] * sv, format);
      int hi = Fp8.encode4(v[i + 4] * sv, v[i + 5] * sv, v[i + 6] * sv, v[i + 7] * sv, format);
      Vec16.storeBytes8(body, at + i, zero ? 0L : (lo & 0xFFFFFFFFL) | (long) hi << 32);
    }
  }

  /**
   * The whole compress of this lane's values {@code v} (row {@code ctx.groupIdx}, columns {@code col ..}, zeros past
   * the row): the row's coarse scale into {@code body} ({@link #rowScale}), ASH pre-scale, WHT and the codes
   * ({@link #writeCodes}) of a body of {@code rows} rows of {@code ng} groups. {@code warpMax}: the kernel's shared
   * array of 32 ints. Every thread of the block calls (barrier inside).
   */
  static void encodeRow(KernelContext ctx, int[] warpMax, float[] v, byte[] body, int rows, int ng, int col,
      int groupSize, boolean hadamard, int format) {
    int a = maxOverLanes(ctx, absMaxBits(v), 1, groupSize / V);
    float c = rowScale(ctx, warpMax, a, groupSize / V, body, groupSize, format, hadamard);
    int k = preScaleExponent(a);
    float hs = deferredScale(groupSize, hadamard);
    preScaleAndTransform(ctx, v, k, groupSize, hadamard, hs == 1f);
    writeCodes(ctx, v, body, rows, ng, col, a == 0, c, k, groupSize, format, hs);
  }

  /**
   * Decodes this lane's V codes of row {@code row} of the body at {@code body[base ..]} ({@code rows} rows of
   * {@code ng} groups; the lane holds columns {@code col .. col + V}) into {@code v}: the values of
   * {@link TacoKernels#decodeGroups}, bit for bit (padding columns included). A lane with {@code col >= ng * G} reads
   * nothing and gives zeros; every lane calls (the inverse WHT shuffles). Returns the row's coarse scale.
   */
  static float decodeLane(KernelContext ctx, byte[] body, int base, int rows, int ng, int row, int col, float[] v,
      int groupSize, boolean hadamard, int format) {
    boolean inRow = col < ng * groupSize;
    float c = Bytes.getFloat(body, base + 4 * row);
    int f = inRow ? body[fineAt(base, rows, ng, row, col, groupSize)] & 0xFF : 0;
    if (inRow) {
      int at = codeAt(base, rows, ng, row, col, groupSize);
      for (int i = 0; i < V; i += 8) {
        long w = Vec16.loadBytes8(body, at + i);
        Fp8.decode4((int) w, v, i, format);
        Fp8.decode4((int) (w >>> 32), v, i + 4, format);
      }
    }
    float hs = deferredScale(groupSize, hadamard);
    if (hadamard) {
      wht(ctx, v, groupSize, hs == 1f);
    }
    float s = TacoKernels.decodeScale(c, f);
    float sv = s * hs; // exact when normal; the transform's sums of FP8 values times hs are exact too
    if (sv >= Float.MIN_NORMAL) {
      for (int j = 0; j < V; j++) {
        v[j] = v[j] * sv;
      }
    } else {
      for (int j = 0; j < V; j++) { // an all-zero row decodes to +0 whatever its codes, as the CPU
        v[j] = c == 0f ? 0f : TacoKernels.decodeValue(v[j] * hs, s, c, f);
      }
    }
    if (s > Float.MAX_VALUE / (Fp8.maxValue(format) * groupSize)) { // rows near the float32 max: clamp as the CPU
      for (int j = 0; j < V; j++) {
        v[j] = Float.isInfinite(v[j]) ? Math.copySign(Float.MAX_VALUE, v[j]) : v[j];
      }
    }
    return c;
  }

  /** Byte offset of the fine exponent of the group holding column {@code col} of row {@code row} (body at {@code base}). */
  static int fineAt(int base, int rows, int ng, int row, int col, int groupSize) {
    return base + 4 * rows + row * ng + col / groupSize;
  }

  /** Byte offset of the FP8 code of column {@code col} of row {@code row} (body at {@code base}, 8-aligned for lanes). */
  static int codeAt(int base, int rows, int ng, int row, int col, int groupSize) {
    return base + 4 * rows + rows * ng + row * ng * groupSize + col;
  }

  /**
   * {@code v[j]} = element {@code rowBase + col + j} of the input (bf16 widened exactly, or fp32) for
   * {@code col + j < cols} of a {@code real} row, else +0 (padding rows and the row's tail). A lane whose V values lie
   * inside the row reads them with 16-byte loads when they are aligned, i.e. when {@code rowBase} is a multiple of 8
   * (bf16) / 4 (fp32), which the callers know from {@code cols} ({@link #vectorRows}); the rest with scalar loads.
   */
  static void loadRow(short[] xb, float[] xf, int rowBase, int col, int cols, boolean real, float[] v, float[] t,
      boolean bf16) {
    int n = real ? cols - col : 0; // values of the row this lane holds (compared as j < n, not col + j < cols: the
    int e = rowBase + col; // wrapping int sum would keep nvcc from folding the bounds, ~40 more registers)
    if (n >= V && vectorRows(cols, bf16)) {
      load(xb, xf, e, v, t, bf16);
    } else {
      for (int j = 0; j < V; j++) {
        v[j] = j < n ? (bf16 ? Bf16.decode(xb[e + j]) : xf[e + j]) : 0f;
      }
    }
  }

  /**
   * Element {@code rowBase + col + j} of the output = {@code v[j]} for {@code col + j < cols}: fp32, or bf16 rounded to
   * nearest even ({@link Bf16#encode}: overflow to Inf; {@code saturate}: {@link Bf16#encodeSaturating}, finite
   * values beyond bf16's max to +-max, as the {@code none} codec sends them). 16-byte stores as in {@link #loadRow}.
   * {@code t}: 4 floats of scratch.
   */
  static void storeRow(short[] yb, float[] yf, int rowBase, int col, int cols, float[] v, float[] t, boolean bf16,
      boolean saturate) {
    int n = cols - col; // as in loadRow
    int e = rowBase + col;
    if (n >= V && vectorRows(cols, bf16)) {
      if (bf16) {
        for (int i = 0; i < V; i += 8) {
          Vec16.storeShortPairs8(yb, e + i, bf16x2(v[i], v[i + 1], saturate),
              bf16x2(v[i + 2], v[i + 3], saturate), bf16x2(v[i + 4], v[i + 5], saturate),
              bf16x2(v[i + 6], v[i + 7], saturate));
        }
      } else {
        for (int i = 0; i < V; i += 4) {
          for (int q = 0; q < 4; q++) {
            t[q] = v[i + q];
          }
          Vec16.storeFloat4(yf, e + i, t);
        }
      }
    } else {
      for (int j = 0; j < V; j++) {
        if (j < n) {
          if (bf16) {
            yb[e + j] = saturate ? Bf16.encodeSaturating(v[j]) : Bf16.encode(v[j]);
          } else {
            yf[e + j] = v[j];
          }
        }
      }
    }
  }

  static int bf16x2(float lo, float hi, boolean saturate) {
    return saturate ? Bf16.encodeSaturating2(lo, hi) : Bf16.encode2(lo, hi);
  }

  /** Whether every row of a {@code cols}-wide row-major tensor starts 16-byte aligned (bf16: 8 | cols, fp32: 4 | cols). */
  static boolean vectorRows(int cols, boolean bf16) {
    return (cols & (bf16 ? 7 : 3)) == 0;
  }
}
