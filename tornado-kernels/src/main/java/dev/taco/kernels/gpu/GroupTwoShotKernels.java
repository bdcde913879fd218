package dev.taco.kernels.gpu;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Constant;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.Hadamard;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.Parallel;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.Vec16;
import dev.taco.kernels.compiler.KernelRequest;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The device steps of the two-shot collectives for the absmax baselines: {@code int8-group} (Flash Communication's
 * per-group INT8, {@code codec.Int8GroupCodec}: {@code kind} = {@link GroupKernels#INT8}, G of 32..256) and
 * {@code fp8-tensor} (one E4M3 scale per payload, {@code codec.Fp8TensorCodec}: {@link GroupKernels#E4M3},
 * {@code groupSize} 0) on fp32 tensors, and the 4-bit floats {@code mxfp4} and {@code nvfp4} (the E2M1 kinds, with or
 * without their Hadamard rotation, on fp32 or bf16 tensors: the SIMT kernels of the last section, described there).
 * Compress a chunk, decompress-reduce it
 * into rows, decompress every slot of a gathered buffer: the steps of {@link TwoShotGpuKernels}' for TACO, built from
 * {@link GroupKernels}' own code ({@link GroupKernels#encodeGroup}, {@link GroupKernels#quantise},
 * {@link GroupKernels#dequantise}), so payloads are the CPU codecs' bodies byte for byte and decoded, reduced values
 * their floats bit for bit (tested on the JVM, where these kernels are plain loops; the translator keeps Java's float
 * semantics, and a maximum does not depend on its order).
 *
 * <p>One caveat for {@code fp8-tensor}: its one scale belongs to a payload, and the device collectives send a large
 * chunk as several pipelined pieces ({@code collective.device.DeviceWire#pieceRows}, about 16 MiB each), so there a
 * scale covers a piece, where the host collectives (one payload per chunk) take one for the whole chunk; the two agree
 * bit for bit whenever a chunk is one piece. The per-group scales of {@code int8-group} do not depend on the pieces.
 *
 * <p>Payload of a {@code rows x cols} chunk (rows {@code row0 .. row0 + realRows} of the tensor, then zero rows): the
 * codec's body without its header, {@code nScales} float32 LE absmaxes ({@code rows * ceil(cols / G)}, or 1 for the
 * per-tensor codec, whose one group is the whole chunk), then {@code rows * cols} one-byte codes ({@link #bodyBytes}). A
 * payload buffer holds {@code world} slots of {@code slotBytes}, slot {@code q} at byte {@code q * slotBytes}.
 * Re-compressing a reduced chunk (the all-reduce's middle) is {@link #reduceGroups} into a scratch chunk, then a
 * compress of it.
 *
 * <p>Compress: per group, {@link #compressGroups} (one iteration per group, a serial scan of its G values); per
 * tensor, {@link #absmaxPartials}, {@link #absmaxFinish} (one thread) and {@link #encodeTensor} (one per element).
 * The others one per element, so consecutive threads read consecutive codes. Grid-stride {@code @Parallel} loops: any
 * grid covers them (e.g. {@code ceil(n / 256)} blocks of 256). Non-finite inputs are sent as the marker code and
 * decode to NaN ({@code nonfinite=propagate}): the GPU cannot refuse a tensor without a host wait.
 */
public final class GroupTwoShotKernels {
  private GroupTwoShotKernels() {}

  /**
   * Partial maxima of the per-tensor absmax's first level: enough threads to keep the memory busy (1024 threads had
   * each walk 3000 elements of a 4096 x 768 chunk, a latency-bound pass that made {@code fp8-tensor}'s collectives the
   * slowest on the GPU); {@link #absmaxPartials} again folds them into {@link #FOLDED} for the one finishing thread.
   */
  public static final int PARTS = 65536;

  /** Partial maxima of the absmax's second level, which {@link #absmaxFinish} reads in one thread. */
  public static final int FOLDED = 256;

  /** Scales of a {@code rows x cols} chunk: {@code rows * ceil(cols / G)}, or 1 when {@code groupSize == 0}. */
  static int scales(int rows, int cols, int groupSize) {
    return groupSize == 0 ? 1 : rows * TacoKernels.groupsPerRow(cols, groupSize);
  }

  /** The scale of element (r, c): its group's, or the chunk's one. */
  static int scaleOf(int r, int c, int cols, int groupSize) {
    return groupSize == 0 ? 0 : r * TacoKernels.groupsPerRow(cols, groupSize) + c / groupSize;
  }

  /** Bytes of the body of a {@code rows x cols} chunk ({@code groupSize} 0: one scale for the chunk). */
  public static long bodyBytes(int rows, int cols, int groupSize) {
    return 4L * scales(rows, cols, groupSize) + (long) rows * cols;
  }

  /**
   * Compress one chunk into {@code body} (one slot), per group: group {@code t} of chunk row {@code r} as
   * {@link GroupKernels#encodeGroup} writes it, zero rows ({@code r >= realRows}) as absmax +0 and codes 0 (what the
   * codec makes of zeros). One iteration per group, {@code rows * ng}.
   */
  @Kernel
  public static void compressGroups(float[] x, byte[] body, int row0, int realRows, int rows, int cols,
      int groupSize, int kind) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    float qm = GroupKernels.qmax(kind);
    int codeOff = 4 * rows * ng;
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      if (r < realRows) {
        GroupKernels.encodeGroup(x, (row0 + r) * cols + c0, len, qm, kind, 0f, body, 4 * t, codeOff,
            r * cols + c0);
      } else {
        Bytes.putFloat(body, 4 * t, 0f);
        for (int i = 0; i < len; i++) {
          body[codeOff + r * cols + c0 + i] = (byte) GroupKernels.quantise(0f, 0f, qm, kind);
        }
      }
    }
  }

  /**
   * Per-tensor compress, step 1: {@code partial[p]} = the maximum of {@code |x|} over the finite values of the chunk's
   * real rows at element indices {@code p, p + parts, ...} (+0 if none). One iteration per partial.
   */
  @Kernel
  public static void absmaxPartials(float[] x, float[] partial, int row0, int realRows, int cols, int parts) {
    for (@Parallel int p = 0; p < parts; p++) {
      float a = 0f;
      for (int i = p; i < realRows * cols; i += parts) {
        float e = Math.abs(x[row0 * cols + i]);
        if (e <= Float.MAX_VALUE) {
          a = Math.max(a, e);
        }
      }
      partial[p] = a;
    }
  }

  /** Per-tensor compress, step 2: the chunk's absmax (the maximum of the partials) as the body's one scale. */
  @Kernel
  public static void absmaxFinish(float[] partial, byte[] body, int parts) {
    for (@Parallel int once = 0; once < 1; once++) {
      float a = 0f;
      for (int p = 0; p < parts; p++) {
        a = Math.max(a, partial[p]);
      }
      Bytes.putFloat(body, 0, a);
    }
  }

  /**
   * Per-tensor compress, step 3: code of element (r, c) = {@code Q(x / a * qmax)} with the body's scale {@code a}
   * ({@link GroupKernels#quantise}; zero rows quantise +0). One iteration per element, {@code rows * cols}.
   */
  @Kernel
  public static void encodeTensor(float[] x, byte[] body, int row0, int realRows, int rows, int cols, int kind) {
    float qm = GroupKernels.qmax(kind);
    for (@Parallel int i = 0; i < rows * cols; i++) {
      float a = Bytes.getFloat(body, 0);
      float v = i < realRows * cols ? x[row0 * cols + i] : 0f;
      body[4 + i] = (byte) GroupKernels.quantise(v, a, qm, kind);
    }
  }

  /**
   * Decompress-reduce into rows {@code yRow0 .. yRow0 + writeRows} of {@code y}: element (r, c) = +0, plus each peer's
   * decoded value ({@code q != me}, ascending; {@code D(q) / qmax * a}), plus the chunk's own value (+0 on zero rows),
   * which is {@code AbstractCodec.decodeReduce}'s order. {@code writeRows}: the chunk's real rows (reduce-scatter) or
   * all {@code rows} (the scratch chunk that is re-compressed). One iteration per element, {@code writeRows * cols}.
   *
   * @param recv the received buffer ({@code world} slots of {@code slotBytes}, slot {@code me} not read)
   */
  @Kernel
  public static void reduceGroups(float[] x, byte[] recv, int slotBytes, int me, int world, float[] y, int row0,
      int realRows, int rows, int cols, int groupSize, int kind, int yRow0, int writeRows) {
    float qm = GroupKernels.qmax(kind);
    int codeOff = 4 * scales(rows, cols, groupSize);
    for (@Parallel int i = 0; i < writeRows * cols; i++) {
      int r = i / cols;
      int c = i - r * cols;
      int t = scaleOf(r, c, cols, groupSize);
      float s = 0f;
      for (int q = 0; q < world; q++) {
        if (q != me) {
          int base = q * slotBytes;
          s += GroupKernels.dequantise(recv[base + codeOff + r * cols + c], kind) / qm
              * Bytes.getFloat(recv, base + 4 * t);
        }
      }
      y[(yRow0 + r) * cols + c] = s + (r < realRows ? x[(row0 + r) * cols + c] : 0f);
    }
  }

  /**
   * Decompress every slot of a gathered buffer (the all-gather's last step): element (r, c) of slot {@code q} to
   * output row {@code o = q * rowsPerRank + pieceRow0 + r}, written only if {@code r < pieceRows} and
   * {@code o < rowsTotal} (the mapping of {@link TwoShotGpuKernels#decompressRows}). One iteration per element,
   * {@code world * rows * cols}.
   */
  @Kernel
  public static void decompressGroups(byte[] body, int slotBytes, float[] out, int rowsTotal, int rowsPerRank,
      int pieceRow0, int pieceRows, int rows, int cols, int groupSize, int kind, int world) {
    float qm = GroupKernels.qmax(kind);
    int codeOff = 4 * scales(rows, cols, groupSize);
    for (@Parallel int i = 0; i < world * rows * cols; i++) {
      int q = i / (rows * cols);
      int e = i - q * rows * cols;
      int r = e / cols;
      int c = e - r * cols;
      int o = q * rowsPerRank + pieceRow0 + r;
      if (r < pieceRows && o < rowsTotal) {
        int base = q * slotBytes;
        out[o * cols + c] = GroupKernels.dequantise(body[base + codeOff + r * cols + c], kind) / qm
            * Bytes.getFloat(body, base + 4 * scaleOf(r, c, cols, groupSize));
      }
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // mxfp4 and nvfp4 (the E2M1 kinds): SIMT kernels
  //
  // One block per payload row, fp4Threads(cols, kind) threads: lane t holds columns t*V .. t*V + V of the row (V = 32
  // values in registers, TacoGpuKernels' mapping): one MXFP4 block or two NVFP4 blocks, so a block never spans lanes
  // and its rotation runs in registers, in Hadamard.fwht's order of operations. Lanes past the row read zeros, as the
  // codec's padding; lanes past its last block write nothing. NVFP4's row absmax is a block reduction (one shared int
  // per warp, a barrier). A lane's 32 codes are 16 bytes, moved as two 8-byte words when the code rows are 8-byte
  // aligned (rows a multiple of 8 and cols of 16, as the device collectives pad rows), else byte by byte. Scales,
  // codes and decoded values come from GroupKernels' own functions (putScale, getScale, quantise, dequantise), and a
  // block's absmax and the row's are maxima (of the values' bits), which do not depend on their order: the bodies
  // are the codecs' byte for byte and the values their floats bit for bit, for every input the codecs take (finite,
  // or NaN/Inf as under nonfinite=propagate: the GPU cannot refuse a tensor without a host wait; magnitudes above
  // GroupKernels.FP4_MAX_INPUT, which the codecs refuse, give unspecified bytes). Grids: as TwoShotGpuKernels' rows
  // kernels (compressFp4, reduceCompressFp4, reduceFp4Rows: rows; decompressFp4: world * rows).

  /** Bytes of the body of a {@code rows x cols} chunk of an E2M1 kind (the codec's body without its header). */
  public static long fp4BodyBytes(int rows, int cols, int kind, boolean hadamard) {
    int g = GroupKernels.blockSize(kind);
    return GroupKernels.scaleBytes(rows, cols, g, kind) + GroupKernels.codeBytes(rows, cols, g, kind, hadamard);
  }

  /** Block size of the E2M1 kernels: a lane per {@code V} columns of the row's blocks, in whole warps. */
  public static int fp4Threads(int cols, int kind) {
    return TwoShotGpuKernels.threads(cols, GroupKernels.blockSize(kind));
  }

  /**
   * Checks an E2M1 chunk's shape against the kernels' preconditions: {@code rows >= 1}, {@code 1 <= cols <=}
   * {@link TwoShotGpuKernels#MAX_COLS}, an E2M1 kind, a body under 2^31 bytes.
   *
   * @throws IllegalArgumentException naming the violated constraint
   */
  public static void checkFp4Shape(int rows, int cols, int kind, boolean hadamard) {
    if (!GroupKernels.fp4(kind)) {
      throw new IllegalArgumentException("two-shot GPU: kind " + kind + " is not an E2M1 kind (mxfp4, nvfp4)");
    }
    if (rows <= 0 || cols < 1 || cols > TwoShotGpuKernels.MAX_COLS) {
      throw new IllegalArgumentException("two-shot GPU: a " + rows + " x " + cols + " chunk: rows must be positive and"
          + " cols in 1.." + TwoShotGpuKernels.MAX_COLS + " (one block of at most 512 threads per row)");
    }
    if (fp4BodyBytes(rows, cols, kind, hadamard) > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("two-shot GPU: a " + rows + " x " + cols + " body would be over 2^31-1 bytes");
    }
  }

  /**
   * Compress one chunk (rows {@code row0 .. row0 + realRows} of the tensor, then zero rows) into {@code body}, the
   * codec's body for it. Grid {@code rows}, block {@link #fp4Threads}.
   *
   * @param xb bf16 tensor (read when {@code bf16})
   * @param xf fp32 tensor (read when not {@code bf16})
   * @param kind {@link GroupKernels#MXFP4} or {@link GroupKernels#NVFP4}
   */
  @Kernel
  public static void compressFp4(KernelContext ctx, short[] xb, float[] xf, byte[] body, int row0, int realRows,
      int rows, int cols, @Constant int kind, @Constant boolean hadamard, @Constant boolean bf16) {
    int[] warpMax = ctx.allocateIntLocalArray(32);
    float[] v = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    int r = ctx.groupIdx;
    TacoGpuKernels.loadRow(xb, xf, (row0 + r) * cols, ctx.localIdx * TacoGpuKernels.V, cols, r < realRows, v, t,
        bf16);
    encodeFp4(ctx, warpMax, v, body, rows, cols, kind, hadamard);
  }

  /**
   * Decompress-reduce-recompress (the all-reduce's middle): {@code y} = the peers' decoded rows plus the own chunk
   * ({@link #reduceFp4}), compressed into {@code body} as {@link #compressFp4} compresses a tensor holding {@code y}.
   * Grid {@code rows}, block {@link #fp4Threads}.
   *
   * @param recv the received buffer: {@code world} slots of {@code slotBytes}, slot {@code me} not read
   */
  @Kernel
  public static void reduceCompressFp4(KernelContext ctx, short[] xb, float[] xf, byte[] recv, int slotBytes, int me,
      int world, byte[] body, int row0, int realRows, int rows, int cols, @Constant int kind,
      @Constant boolean hadamard, @Constant boolean bf16) {
    int[] warpMax = ctx.allocateIntLocalArray(32);
    float[] v = new float[TacoGpuKernels.V];
    float[] o = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    reduceFp4(ctx, xb, xf, recv, slotBytes, me, world, row0, realRows, rows, cols, v, o, t, kind, hadamard, bf16);
    encodeFp4(ctx, warpMax, v, body, rows, cols, kind, hadamard);
  }

  /**
   * Decompress-reduce into a tensor (the reduce-scatter's last step): rows {@code yRow0 .. yRow0 + realRows} of the
   * output = {@code y} ({@link #reduceFp4}), fp32, or bf16 rounded to nearest even. Grid {@code rows} (blocks of
   * padding rows return at once), block {@link #fp4Threads}.
   */
  @Kernel
  public static void reduceFp4Rows(KernelContext ctx, short[] xb, float[] xf, byte[] recv, int slotBytes, int me,
      int world, short[] yb, float[] yf, int row0, int realRows, int rows, int cols, int yRow0, @Constant int kind,
      @Constant boolean hadamard, @Constant boolean bf16) {
    if (ctx.groupIdx >= realRows) {
      return;
    }
    float[] v = new float[TacoGpuKernels.V];
    float[] o = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    reduceFp4(ctx, xb, xf, recv, slotBytes, me, world, row0, realRows, rows, cols, v, o, t, kind, hadamard, bf16);
    TacoGpuKernels.storeRow(yb, yf, (yRow0 + ctx.groupIdx) * cols, ctx.localIdx * TacoGpuKernels.V, cols, v, t, bf16,
        false);
  }

  /**
   * Decompress every slot of a gathered buffer (the all-gather's last step): block {@code b} decodes payload row
   * {@code r = b % rows} of slot {@code q = b / rows} into output row {@code o = q * rowsPerRank + pieceRow0 + r},
   * written only if {@code r < pieceRows} and {@code o < rowsTotal} (as {@link TwoShotGpuKernels#decompressRows}).
   * Grid {@code world * rows}, block {@link #fp4Threads}.
   */
  @Kernel
  public static void decompressFp4(KernelContext ctx, byte[] body, int slotBytes, short[] outB, float[] outF,
      int rowsTotal, int rowsPerRank, int pieceRow0, int pieceRows, int rows, int cols, @Constant int kind,
      @Constant boolean hadamard, @Constant boolean bf16) {
    int o = TwoShotGpuKernels.gatheredRow(ctx, rowsTotal, rowsPerRank, pieceRow0, pieceRows, rows);
    if (o < 0) {
      return;
    }
    float[] v = new float[TacoGpuKernels.V];
    float[] t = new float[4];
    int q = ctx.groupIdx / rows;
    decodeFp4(body, q * slotBytes, rows, cols, ctx.groupIdx - q * rows, ctx.localIdx * TacoGpuKernels.V, v, kind,
        hadamard);
    TacoGpuKernels.storeRow(outB, outF, o * cols, ctx.localIdx * TacoGpuKernels.V, cols, v, t, bf16, false);
  }

  /**
   * The reduced values of this lane's columns of row {@code ctx.groupIdx}, into {@code v}, in the CPU's order
   * ({@code AbstractCodec.decodeReduce}): {@code acc = +0}, {@code acc +=} each peer's decoded value ({@code q != me},
   * ascending), {@code y = acc + own} (own +0 on padding rows), and +0 past the row (the padding a re-compress sees).
   * {@code o}: V floats of scratch, {@code t}: 8.
   */
  static void reduceFp4(KernelContext ctx, short[] xb, float[] xf, byte[] recv, int slotBytes, int me, int world,
      int row0, int realRows, int rows, int cols, float[] v, float[] o, float[] t, int kind, boolean hadamard,
      boolean bf16) {
    int r = ctx.groupIdx;
    int col = ctx.localIdx * TacoGpuKernels.V;
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      v[j] = 0f;
    }
    for (int q = 0; q < world; q++) {
      if (q != me) {
        decodeFp4(recv, q * slotBytes, rows, cols, r, col, o, kind, hadamard);
        for (int j = 0; j < TacoGpuKernels.V; j++) {
          v[j] = v[j] + o[j];
        }
      }
    }
    TacoGpuKernels.loadRow(xb, xf, (row0 + r) * cols, col, cols, r < realRows, o, t, bf16);
    int n = cols - col;
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      v[j] = j < n ? v[j] + o[j] : 0f;
    }
  }

  /**
   * Encodes this lane's values {@code v} (row {@code ctx.groupIdx}, zeros past the row) into a body of {@code rows}
   * rows: per block, NaN/Inf found, the rotation unless the block holds one, its absmax; NVFP4's row absmax (every
   * thread calls: barrier); then each block's scale ({@link GroupKernels#putScale}) and the codes
   * ({@link GroupKernels#quantise}).
   */
  static void encodeFp4(KernelContext ctx, int[] warpMax, float[] v, byte[] body, int rows, int cols, int kind,
      boolean hadamard) {
    int g = kind == GroupKernels.MXFP4 ? 32 : 16;
    int ng = TacoKernels.groupsPerRow(cols, g);
    int col = ctx.localIdx * TacoGpuKernels.V;
    int row = ctx.groupIdx;
    boolean[] special = new boolean[2];
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      special[j / g] = special[j / g] || !(Math.abs(v[j]) <= Float.MAX_VALUE);
    }
    if (hadamard) {
      rotate(v, special, g);
    }
    int[] m = new int[2];
    for (int j = 0; j < TacoGpuKernels.V; j++) { // a block's absmax of finite values, as the bits' maximum
      int b = Float.floatToRawIntBits(v[j]) & 0x7FFFFFFF;
      m[j / g] = b < 0x7F800000 ? Math.max(m[j / g], b) : m[j / g];
    }
    float rowMax = 0f;
    if (kind == GroupKernels.NVFP4) {
      int bits = TacoGpuKernels.blockMax(ctx, warpMax, Math.max(m[0], m[1]), 1);
      rowMax = Float.intBitsToFloat(bits);
      if (ctx.localIdx == 0) {
        Bytes.putFloat(body, 4 * row, rowMax);
      }
    }
    float[] a = new float[2];
    float[] inv = new float[2];
    for (int k = 0; k < 2; k++) {
      int gi = col / g + k;
      if (k * g < TacoGpuKernels.V && gi < ng) {
        float s = GroupKernels.putScale(body, GroupKernels.scaleAt(0, rows, row * ng + gi, kind),
            Float.intBitsToFloat(m[k]), rowMax, kind);
        a[k] = s;
        inv[k] = kind == GroupKernels.MXFP4 ? 1f / s : 0f;
      }
    }
    long lo = 0;
    long hi = 0;
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      // MXFP4's scale is a power of two from 2^-127 to 2^126, so 1/a is exact and v * (1/a) is v / a bit for bit
      // (one rounding of the same real number; |v / a| < 8 cannot overflow): a multiply instead of a division a value
      long q = (kind == GroupKernels.MXFP4 ? GroupKernels.quantise(v[j] * inv[j / g], 1f, 1f, kind)
          : GroupKernels.quantise(v[j], a[j / g], 1f, kind)) & 0xF;
      if (j < 16) {
        lo |= q << (4 * j);
      } else {
        hi |= q << (4 * j - 64);
      }
    }
    int codeOff = (int) GroupKernels.scaleBytes(rows, cols, g, kind);
    int rowBytes = (int) (GroupKernels.codeStride(cols, g, kind, hadamard) / 2);
    int n = 2 * rowBytes - col; // codes of the row in this lane's columns and past them
    int at = codeOff + row * rowBytes + col / 2;
    if (n >= TacoGpuKernels.V && ((codeOff | rowBytes) & 7) == 0) {
      Vec16.storeBytes8(body, at, lo);
      Vec16.storeBytes8(body, at + 8, hi);
    } else {
      for (int b = 0; b < 16; b++) {
        if (2 * b < n) {
          body[at + b] = (byte) (b < 8 ? lo >>> (8 * b) : hi >>> (8 * b - 64));
        }
      }
    }
  }

  /**
   * Decodes this lane's columns of row {@code row} of the E2M1 body at {@code in[base ..]} ({@code rows} rows) into
   * {@code v}: each code's value times its block's scale ({@link GroupKernels#getScale}), then the inverse rotation
   * of each block that holds no marker ({@code GroupKernels.decode}'s values bit for bit; zeros past the row's last
   * block).
   */
  static void decodeFp4(byte[] in, int base, int rows, int cols, int row, int col, float[] v, int kind,
      boolean hadamard) {
    int g = kind == GroupKernels.MXFP4 ? 32 : 16;
    int ng = TacoKernels.groupsPerRow(cols, g);
    float rowMax = kind == GroupKernels.NVFP4 ? Bytes.getFloat(in, base + 4 * row) : 0f;
    float[] a = new float[2];
    for (int k = 0; k < 2; k++) {
      int gi = col / g + k;
      if (k * g < TacoGpuKernels.V && gi < ng) {
        a[k] = GroupKernels.getScale(in, base + GroupKernels.scaleAt(0, rows, row * ng + gi, kind), rowMax, kind);
      }
    }
    int codeOff = (int) GroupKernels.scaleBytes(rows, cols, g, kind);
    int rowBytes = (int) (GroupKernels.codeStride(cols, g, kind, hadamard) / 2);
    int n = 2 * rowBytes - col;
    int at = base + codeOff + row * rowBytes + col / 2;
    long lo = 0;
    long hi = 0;
    if (n >= TacoGpuKernels.V && ((base | codeOff | rowBytes) & 7) == 0) {
      lo = Vec16.loadBytes8(in, at);
      hi = Vec16.loadBytes8(in, at + 8);
    } else {
      for (int b = 0; b < 16; b++) {
        long w = 2 * b < n ? in[at + b] & 0xFF : 0;
        if (b < 8) {
          lo |= w << (8 * b);
        } else {
          hi |= w << (8 * b - 64);
        }
      }
    }
    boolean[] special = new boolean[2];
    float qm = GroupKernels.qmax(kind);
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      int q = (int) ((j < 16 ? lo >>> (4 * j) : hi >>> (4 * j - 64)) & 0xF);
      float d = GroupKernels.dequantise(q, kind);
      special[j / g] = special[j / g] || d != d;
      v[j] = d / qm * a[j / g];
    }
    if (hadamard) {
      rotate(v, special, g);
    }
  }

  /**
   * The orthonormal Walsh-Hadamard transform of each block of {@code g} of the lane's values that is not
   * {@code special}, in {@link Hadamard#fwht}'s order of operations (flat loops with constant bounds: the values stay
   * in registers).
   */
  static void rotate(float[] v, boolean[] special, int g) {
    for (int h = 1; h < TacoGpuKernels.V; h <<= 1) {
      for (int j = 0; j < TacoGpuKernels.V; j++) {
        if (h < g && (j & h) == 0 && !special[j / g]) {
          float x = v[j];
          float y = v[j + h];
          v[j] = x + y;
          v[j + h] = x - y;
        }
      }
    }
    float s = Hadamard.scale(g);
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      v[j] = special[j / g] ? v[j] : v[j] * s;
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Catalog

  /** The E2M1 unit's key, e.g. {@code fp4-k3-h1-bf16}: compressFp4, reduceCompressFp4, reduceFp4Rows, decompressFp4. */
  public static String fp4Key(int kind, boolean hadamard, boolean bf16) {
    return "fp4-k" + kind + "-h" + (hadamard ? 1 : 0) + "-" + (bf16 ? "bf16" : "f32");
  }

  /** The E2M1 units by key ({@link #fp4Key}): kind x Hadamard x dtype, 8 units of 4 kernels. */
  public static Map<String, List<KernelRequest>> fp4Units() {
    Map<String, List<KernelRequest>> units = new LinkedHashMap<>();
    for (int kind : new int[] {GroupKernels.MXFP4, GroupKernels.NVFP4}) {
      for (boolean h : new boolean[] {true, false}) {
        for (boolean bf16 : new boolean[] {true, false}) {
          Map<String, Object> c = Map.of("kind", kind, "hadamard", h, "bf16", bf16);
          units.put(fp4Key(kind, h, bf16), List.of("compressFp4", "reduceCompressFp4", "reduceFp4Rows", "decompressFp4")
              .stream().map(m -> KernelRequest.of(GroupTwoShotKernels.class, m, c)).toList());
        }
      }
    }
    return units;
  }

  /** The kernels, for pre-translation ({@code KernelSources}): the absmax ones, then every E2M1 unit's. */
  public static List<KernelRequest> kernels() {
    List<KernelRequest> all = new ArrayList<>(List.of("compressGroups", "absmaxPartials", "absmaxFinish",
        "encodeTensor", "reduceGroups", "decompressGroups").stream()
        .map(m -> KernelRequest.of(GroupTwoShotKernels.class, m)).toList());
    fp4Units().values().forEach(all::addAll);
    return all;
  }
}
