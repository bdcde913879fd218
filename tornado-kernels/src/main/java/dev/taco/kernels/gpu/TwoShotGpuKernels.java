package dev.taco.kernels.gpu;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Constant;
import dev.taco.kernels.Fp8;
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
 * The device steps of the two-shot collectives (docs/design.md §4; the host twin is {@code collective.HostWire}): compress a
 * chunk, decompress-reduce it (and re-compress, or write the owned rows), decompress every slot of a gathered buffer,
 * the same four for the raw element plans, and the wire layouts. SIMT kernels of the Java kernel model (docs/design.md §5)
 * built from {@link TacoGpuKernels}' helpers, so the numerics are the CPU reference's ({@link TacoKernels}, docs/design.md §3).
 *
 * <h2>Shapes and buffers</h2>
 * A tensor is row-major bf16 ({@code short[]}, the {@code xb}/{@code yb}/{@code outB} parameters) or fp32
 * ({@code float[]}, {@code xf}/{@code yf}/{@code outF}) from element 0, chosen by {@code @Constant bf16} (the input and
 * output tensors of one launch have the same dtype); the other array of the pair is not touched (pass the same buffer
 * twice). A <em>chunk</em> is {@code rows x cols}: rows
 * {@code row0 .. row0 + realRows} of the tensor, then {@code rows - realRows} zero rows. Its TACO payload is the
 * <em>body</em> of {@code new TacoCodec(G, format, 1f, hadamard)} for the chunk (no header): {@code rows} float32 coarse
 * scales, {@code rows * ng} fine-exponent bytes, {@code rows * ng * G} FP8 codes, {@code ng = ceil(cols / G)}
 * ({@link #bodyBytes}). A raw payload is {@code rows * cols} elements, fp32 ({@link #RAW_FP32}, as the exact plan sends
 * them) or bf16 ({@link #RAW_BF16}, the {@code none} codec's body). A payload buffer holds {@code world} slots of
 * {@code slotBytes} each, slot {@code q} (rank q's payload) at byte {@code q * slotBytes}.
 *
 * <h2>Thread mapping (the TACO and raw kernels)</h2>
 * One block per payload row, {@link #threads} threads: lane {@code t} holds columns {@code t*V .. t*V + V} of the row
 * ({@code V} = {@value TacoGpuKernels#V} values in registers), so a group of G values spans {@code G / V} adjacent lanes
 * (one lane for G = 32) and never a warp boundary. The threads are {@code ceil(ng * G / V)} rounded up to whole warps:
 * lanes past {@code cols} read zeros (the padding of the last group, which is encoded and sent as the CPU codec does),
 * lanes past {@code ng * G} hold no group and write nothing; all of them take part in every shuffle and barrier. A lane
 * whose V values lie inside the row uses 16-byte loads and stores when rows start 16-byte aligned ({@code cols} a
 * multiple of 8 for bf16, 4 for fp32; {@code row0} may be anything), otherwise scalar ones; FP8 codes always move as
 * 8-byte words. Per lane: WHT stages in registers, then by {@code shflXor} across the group's lanes; the row's absmax
 * by shuffles and one shared int per warp (see {@link TacoGpuKernels}).
 *
 * <h2>Launch geometry</h2>
 * <pre>
 *   kernel                                   grid                     block
 *   compressRows, reduceCompressRows,        rows                     threads(cols, G)
 *     reduceRows
 *   decompressRows                           world * rows             threads(cols, G)
 *   packRows, reducePackRows, reduceRowsRaw  rows                     rawThreads(cols)
 *   unpackRows                               world * rows             rawThreads(cols)
 *   permuteCols (@Parallel, grid-stride)     any, e.g. ceil(rows*cols/256)   256
 *   transpose                                transposeBlocks(rows, cols)     TRANSPOSE_THREADS (256)
 * </pre>
 *
 * <h2>Preconditions (the host checks them: {@link #checkShape}, {@link #checkRawShape}, {@link #checkSlots})</h2>
 * {@code 1 <= cols <= }{@link #MAX_COLS}; G in {@link #GROUP_SIZES}; {@code rows >= 1} with
 * {@code rows * (4 + ng) % 8 == 0} so the codes are 8-byte aligned (true for every {@code rows} that is a multiple of
 * 8, which the device collectives use); {@code 0 <= realRows <= rows}; every buffer 16-byte aligned at its start
 * (device allocations are), {@code slotBytes} a multiple of 16 and at least one payload, {@code world * slotBytes} and
 * every tensor's element count below 2^31 (int indexing). Dual scale is always on and alpha is 1. The output of
 * {@link #compressRows}/{@link #reduceCompressRows}/{@link #packRows}/{@link #reducePackRows} is one slot (pass the
 * slot's address); {@code recv} and the gathered buffer are the whole {@code world}-slot buffer.
 *
 * <h2>What is bit-exact</h2>
 * Everything, for finite inputs, against the CPU reference: bodies byte for byte ({@code TacoCodec.encode}, or its
 * re-encode of {@code codec.decodeReduce(peers, rows, cols, own, 0, y, 0)}), decoded and reduced values bit for bit
 * (bf16 outputs: those values rounded to nearest even, {@code Bf16.encode}: overflow to Inf), raw payloads as
 * {@code Fp32Codec}/{@code Bf16Codec} bodies (bf16 wire: RNE, finite values beyond bf16's max saturate to +-max, NaN
 * stays NaN with its sign and payload, Inf stays Inf) and the layouts (bit copies). Not specified: the payload bits of
 * a NaN produced by arithmetic (the GPU's adds give the canonical NaN, Java's keep an operand's), and a TACO row holding
 * NaN/Inf, which gets a NaN coarse scale (as {@link TacoGpuKernels#compress}); a NaN scale in a peer's body propagates
 * into the reduced row.
 */
public final class TwoShotGpuKernels {
  private TwoShotGpuKernels() {}

  /**
   * Largest {@code cols}: 512 threads of 32 values. A 512-thread block needs at most 128 registers a thread (64 K per
   * SM); ptxas gives the row kernels 40 to 88 (sm_90, CUDA 13), and {@code TwoShotGpuCudaTest} fails above 128.
   */
  public static final int MAX_COLS = 16384;

  /** Group sizes the TACO kernels take: every one of the wire format's. */
  public static final List<Integer> GROUP_SIZES = dev.taco.codec.PayloadHeader.GROUP_SIZES;

  /** Raw wire format: bf16 elements (the {@code none} codec's body), 2 bytes each. */
  public static final int RAW_BF16 = 2;

  /** Raw wire format: fp32 elements (the exact plan), 4 bytes each. */
  public static final int RAW_FP32 = 4;

  /** {@link #transpose}'s tile edge (one warp wide). */
  public static final int TRANSPOSE_TILE = 32;

  /** {@link #transpose}'s block size: 8 warps, each moving 4 rows of a tile. */
  public static final int TRANSPOSE_THREADS = 256;

  // ---------------------------------------------------------------------------------------------------------------
  // TACO kernels

  /**
   * Compress one chunk: {@code body} = the TACO body of the chunk (rows {@code row0 .. row0 + realRows} of the tensor,
   * then zero rows). Grid {@code rows}, block {@link #threads}{@code (cols, G)}.
   *
   * @param xb bf16 tensor (read when {@code bf16})
   * @param xf fp32 tensor (read when not {@code bf16})
   * @param body the output slot, {@link #bodyBytes} bytes
   * @param groupSize G in {@link #GROUP_SIZES}
   * @param hadamard whether groups are Walsh-Hadamard transformed
   * @param format {@link Fp8#E4M3} or {@link Fp8#E5M2}
   */
  @Kernel
  public static void compressRows(KernelContext ctx, short[] xb, float[] xf, byte[] body, int row0, int realRows,
      int rows, int cols, @Constant int groupSize, @Constant boolean hadamard, @Constant int format,
      @Constant boolean bf16) {
    int[] warpMax = ctx.allocateIntLocalArray(32);
    float[] v = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    int r = ctx.groupIdx;
    int col = ctx.localIdx * TacoGpuKernels.V;
    TacoGpuKernels.loadRow(xb, xf, (row0 + r) * cols, col, cols, r < realRows, v, t, bf16);
    TacoGpuKernels.encodeRow(ctx, warpMax, v, body, rows, TacoKernels.groupsPerRow(cols, groupSize), col, groupSize,
        hadamard, format);
  }

  /**
   * Decompress-reduce-recompress (the middle of the two-shot all-reduce): {@code y} = own chunk + the peers' bodies
   * ({@link #reduceLane}), compressed into {@code body} exactly as {@link #compressRows} compresses a tensor holding
   * {@code y}. Grid {@code rows}, block {@link #threads}{@code (cols, G)}.
   *
   * @param recv the received buffer: {@code world} slots of {@code slotBytes}, slot {@code me} not read
   * @param body the output slot (this rank's slot of the all-gather buffer)
   */
  @Kernel
  public static void reduceCompressRows(KernelContext ctx, short[] xb, float[] xf, byte[] recv, int slotBytes, int me,
      int world, byte[] body, int row0, int realRows, int rows, int cols, @Constant int groupSize,
      @Constant boolean hadamard, @Constant int format, @Constant boolean bf16) {
    int[] warpMax = ctx.allocateIntLocalArray(32);
    float[] v = new float[TacoGpuKernels.V];
    float[] o = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    reduceLane(ctx, xb, xf, recv, slotBytes, me, world, row0, realRows, rows, cols, v, o, t, groupSize, hadamard,
        format, bf16);
    TacoGpuKernels.encodeRow(ctx, warpMax, v, body, rows, TacoKernels.groupsPerRow(cols, groupSize),
        ctx.localIdx * TacoGpuKernels.V, groupSize, hadamard, format);
  }

  /**
   * Decompress-reduce into a tensor (the reduce-scatter's last step): rows {@code yRow0 .. yRow0 + realRows} of the
   * output = {@code y} ({@link #reduceLane}), fp32, or bf16 rounded to nearest even. Grid {@code rows} (blocks of
   * padding rows return at once), block {@link #threads}{@code (cols, G)}.
   *
   * @param yb bf16 output tensor (written when {@code bf16})
   * @param yf fp32 output tensor (written when not {@code bf16})
   */
  @Kernel
  public static void reduceRows(KernelContext ctx, short[] xb, float[] xf, byte[] recv, int slotBytes, int me,
      int world, short[] yb, float[] yf, int row0, int realRows, int rows, int cols, int yRow0,
      @Constant int groupSize, @Constant boolean hadamard, @Constant int format, @Constant boolean bf16) {
    if (ctx.groupIdx >= realRows) {
      return;
    }
    float[] v = new float[TacoGpuKernels.V];
    float[] o = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    reduceLane(ctx, xb, xf, recv, slotBytes, me, world, row0, realRows, rows, cols, v, o, t, groupSize, hadamard,
        format, bf16);
    TacoGpuKernels.storeRow(yb, yf, (yRow0 + ctx.groupIdx) * cols, ctx.localIdx * TacoGpuKernels.V, cols, v, t, bf16,
        false);
  }

  /**
   * Decompress every slot of a gathered buffer in one launch (the all-gather's last step). Grid {@code world * rows},
   * block {@link #threads}{@code (cols, G)}: block {@code b} decodes payload row {@code r = b % rows} of slot
   * {@code q = b / rows} into output row {@code o = q * rowsPerRank + pieceRow0 + r}, written only if
   * {@code r < pieceRows} and {@code o < rowsTotal}. Values are {@code TacoCodec.decode}'s bit for bit (fp32), or
   * those rounded to nearest even (bf16).
   *
   * @param body the gathered buffer ({@code world} slots of {@code slotBytes})
   * @param rowsTotal rows of the output tensor
   * @param rowsPerRank output rows between consecutive ranks' chunks
   * @param pieceRow0 first row of this piece within each rank's chunk
   * @param pieceRows real rows of the piece (at most {@code rows})
   */
  @Kernel
  public static void decompressRows(KernelContext ctx, byte[] body, int slotBytes, short[] outB, float[] outF,
      int rowsTotal, int rowsPerRank, int pieceRow0, int pieceRows, int rows, int cols, @Constant int groupSize,
      @Constant boolean hadamard, @Constant int format, @Constant boolean bf16) {
    int q = ctx.groupIdx / rows;
    int r = ctx.groupIdx - q * rows;
    int o = q * rowsPerRank + pieceRow0 + r;
    if (r >= pieceRows || o >= rowsTotal) {
      return;
    }
    float[] v = new float[TacoGpuKernels.V];
    float[] t = new float[4];
    int col = ctx.localIdx * TacoGpuKernels.V;
    TacoGpuKernels.decodeLane(ctx, body, q * slotBytes, rows, TacoKernels.groupsPerRow(cols, groupSize), r, col, v,
        groupSize, hadamard, format);
    TacoGpuKernels.storeRow(outB, outF, o * cols, col, cols, v, t, bf16, false);
  }

  /**
   * The output row of block {@code ctx.groupIdx} of a gathered decompress (grid {@code world * rows}): payload row
   * {@code r = b % rows} of slot {@code q = b / rows} goes to {@code o = q * rowsPerRank + pieceRow0 + r}; -1 where
   * nothing is written ({@code r >= pieceRows} or {@code o >= rowsTotal}).
   */
  static int gatheredRow(KernelContext ctx, int rowsTotal, int rowsPerRank, int pieceRow0, int pieceRows, int rows) {
    int q = ctx.groupIdx / rows;
    int r = ctx.groupIdx - q * rows;
    int o = q * rowsPerRank + pieceRow0 + r;
    return r >= pieceRows || o >= rowsTotal ? -1 : o;
  }

  /**
   * The reduced value {@code y} of this lane's columns of row {@code ctx.groupIdx}, into {@code v}, as the CPU
   * reference computes it ({@code TacoCodec.reduceBodies}, then {@code AbstractCodec.decodeReduce}'s {@code + own}):
   * {@code acc = +0}; for each peer {@code q != me} in ascending order whose row has a non-zero coarse scale,
   * {@code acc += decodeValue(fp8(code), decodeScale(c, f), c, f)} ({@link TacoKernels#dequantAccumulate}, no inverse
   * transform); with Hadamard the orthonormal WHT of each group of {@code acc} ({@link TacoKernels#finishReduce}); then
   * {@code y = acc + own} for the row's columns (own: the chunk's value, +0 on padding rows) and +0 past them (the
   * zero padding the re-compress sees). {@code o}: V floats of scratch, {@code t}: 8. Every lane calls (shuffles).
   */
  static void reduceLane(KernelContext ctx, short[] xb, float[] xf, byte[] recv, int slotBytes, int me, int world,
      int row0, int realRows, int rows, int cols, float[] v, float[] o, float[] t, int groupSize, boolean hadamard,
      int format, boolean bf16) {
    int r = ctx.groupIdx;
    int col = ctx.localIdx * TacoGpuKernels.V;
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    for (int q = 0; q < world; q++) {
      if (q != me) {
        accumulate(recv, q * slotBytes, rows, ng, r, col, v, t, groupSize, format);
      }
    }
    if (hadamard) {
      TacoGpuKernels.wht(ctx, v, groupSize, true);
    }
    TacoGpuKernels.loadRow(xb, xf, (row0 + r) * cols, col, cols, r < realRows, o, t, bf16);
    int n = cols - col; // see loadRow
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      v[j] = j < n ? v[j] + o[j] : 0f;
    }
  }

  /**
   * {@link TacoKernels#dequantAccumulate} of this lane's codes of row {@code row} of the body at {@code in[base ..]}
   * into {@code v}: nothing for a row whose coarse scale is zero or a lane past the row's last group.
   */
  static void accumulate(byte[] in, int base, int rows, int ng, int row, int col, float[] v, float[] t,
      int groupSize, int format) {
    float c = Math.abs(Bytes.getFloat(in, base + 4 * row));
    if (c != 0f && col < ng * groupSize) {
      int f = in[TacoGpuKernels.fineAt(base, rows, ng, row, col, groupSize)] & 0xFF;
      float ds = TacoKernels.decodeScale(c, f);
      int at = TacoGpuKernels.codeAt(base, rows, ng, row, col, groupSize);
      for (int i = 0; i < TacoGpuKernels.V; i += 8) {
        long w = Vec16.loadBytes8(in, at + i);
        Fp8.decode4((int) w, t, 0, format);
        Fp8.decode4((int) (w >>> 32), t, 4, format);
        for (int q = 0; q < 8; q++) {
          v[i + q] += TacoKernels.decodeValue(t[q], ds, c, f);
        }
      }
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Raw element plans: fp32 (exact) and bf16 (the none codec)

  /**
   * Pack one chunk raw: wire row {@code r} = chunk row {@code r} as {@code wireFormat} elements ({@link #RAW_FP32}:
   * exact; {@link #RAW_BF16}: {@code Bf16Codec}'s codes). Grid {@code rows}, block {@link #rawThreads}{@code (cols)}.
   *
   * @param wb the output slot when {@code wireFormat == RAW_BF16}
   * @param wf the output slot when {@code wireFormat == RAW_FP32}
   * @param wireFormat {@link #RAW_BF16} or {@link #RAW_FP32} (bytes per element)
   */
  @Kernel
  public static void packRows(KernelContext ctx, short[] xb, float[] xf, short[] wb, float[] wf, int row0,
      int realRows, int rows, int cols, @Constant int wireFormat, @Constant boolean bf16) {
    float[] v = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    int r = ctx.groupIdx;
    int col = ctx.localIdx * TacoGpuKernels.V;
    TacoGpuKernels.loadRow(xb, xf, (row0 + r) * cols, col, cols, r < realRows, v, t, bf16);
    TacoGpuKernels.storeRow(wb, wf, r * cols, col, cols, v, t, wireFormat == RAW_BF16, true);
  }

  /**
   * Reduce and re-pack raw: wire row {@code r} of the output slot = {@code y} ({@link #reduceRaw}) as
   * {@code wireFormat} elements. Grid {@code rows}, block {@link #rawThreads}{@code (cols)}.
   *
   * @param rb the received buffer when the wire is bf16 ({@code world} slots of {@code slotBytes}, slot {@code me}
   *     not read)
   * @param rf the received buffer when the wire is fp32
   */
  @Kernel
  public static void reducePackRows(KernelContext ctx, short[] xb, float[] xf, short[] rb, float[] rf, int slotBytes,
      int me, int world, short[] wb, float[] wf, int row0, int realRows, int rows, int cols,
      @Constant int wireFormat, @Constant boolean bf16) {
    float[] v = new float[TacoGpuKernels.V];
    float[] o = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    reduceRaw(ctx, xb, xf, rb, rf, slotBytes, me, world, row0, realRows, cols, v, o, t, wireFormat, bf16);
    TacoGpuKernels.storeRow(wb, wf, ctx.groupIdx * cols, ctx.localIdx * TacoGpuKernels.V, cols, v, t,
        wireFormat == RAW_BF16, true);
  }

  /**
   * Reduce raw into a tensor: rows {@code yRow0 .. yRow0 + realRows} of the output = {@code y} ({@link #reduceRaw}),
   * fp32, or bf16 rounded to nearest even. Grid {@code rows}, block {@link #rawThreads}{@code (cols)}.
   */
  @Kernel
  public static void reduceRowsRaw(KernelContext ctx, short[] xb, float[] xf, short[] rb, float[] rf, int slotBytes,
      int me, int world, short[] yb, float[] yf, int row0, int realRows, int rows, int cols, int yRow0,
      @Constant int wireFormat, @Constant boolean bf16) {
    if (ctx.groupIdx >= realRows) {
      return;
    }
    float[] v = new float[TacoGpuKernels.V];
    float[] o = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    reduceRaw(ctx, xb, xf, rb, rf, slotBytes, me, world, row0, realRows, cols, v, o, t, wireFormat, bf16);
    TacoGpuKernels.storeRow(yb, yf, (yRow0 + ctx.groupIdx) * cols, ctx.localIdx * TacoGpuKernels.V, cols, v, t, bf16,
        false);
  }

  /**
   * Unpack every slot of a gathered raw buffer: the mapping of {@link #decompressRows} (grid {@code world * rows},
   * block {@link #rawThreads}{@code (cols)}); values exact (fp32 output) or rounded to nearest even (bf16 output).
   */
  @Kernel
  public static void unpackRows(KernelContext ctx, short[] rb, float[] rf, int slotBytes, short[] outB, float[] outF,
      int rowsTotal, int rowsPerRank, int pieceRow0, int pieceRows, int rows, int cols, @Constant int wireFormat,
      @Constant boolean bf16) {
    int q = ctx.groupIdx / rows;
    int r = ctx.groupIdx - q * rows;
    int o = q * rowsPerRank + pieceRow0 + r;
    if (r >= pieceRows || o >= rowsTotal) {
      return;
    }
    float[] v = new float[TacoGpuKernels.V];
    float[] t = new float[8];
    int col = ctx.localIdx * TacoGpuKernels.V;
    TacoGpuKernels.loadRow(rb, rf, q * (slotBytes / wireFormat) + r * cols, col, cols, true, v, t,
        wireFormat == RAW_BF16);
    TacoGpuKernels.storeRow(outB, outF, o * cols, col, cols, v, t, bf16, false);
  }

  /**
   * The raw reduce of this lane's columns of row {@code ctx.groupIdx}, into {@code v}, as the CPU computes it (the exact
   * plan in {@code HostWire}, {@code AbstractCodec.decodeReduce} for {@code none}): {@code acc = +0}, {@code acc +=}
   * each peer's value ({@code q != me}, ascending), {@code y = acc + own} (+0 on padding rows).
   */
  static void reduceRaw(KernelContext ctx, short[] xb, float[] xf, short[] rb, float[] rf, int slotBytes, int me,
      int world, int row0, int realRows, int cols, float[] v, float[] o, float[] t, int wireFormat, boolean bf16) {
    int r = ctx.groupIdx;
    int col = ctx.localIdx * TacoGpuKernels.V;
    int slot = slotBytes / wireFormat;
    for (int q = 0; q < world; q++) {
      if (q != me) {
        TacoGpuKernels.loadRow(rb, rf, q * slot + r * cols, col, cols, true, o, t, wireFormat == RAW_BF16);
        for (int j = 0; j < TacoGpuKernels.V; j++) {
          v[j] = v[j] + o[j];
        }
      }
    }
    TacoGpuKernels.loadRow(xb, xf, (row0 + r) * cols, col, cols, r < realRows, o, t, bf16);
    for (int j = 0; j < TacoGpuKernels.V; j++) {
      v[j] = v[j] + o[j];
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Layouts (WireLayout.PERMUTED and TOKEN_AXIS): bit copies

  /**
   * Channel permutation of a {@code rows x cols} tensor: {@code y[r, j] = x[r, perm[j]]}, or with {@code inverse}
   * {@code y[r, perm[j]] = x[r, j]} ({@code perm} a permutation of {@code 0 .. cols-1}, int32 on the device). A
   * {@code @Parallel} kernel, one element per iteration: any grid (grid-stride), e.g. {@code ceil(rows*cols/256)}
   * blocks of 256. {@code x} and {@code y} must not overlap.
   */
  @Kernel
  public static void permuteCols(short[] xb, float[] xf, short[] yb, float[] yf, int[] perm, int rows, int cols,
      boolean inverse, @Constant boolean bf16) {
    for (@Parallel int i = 0; i < rows * cols; i++) {
      int r = i / cols;
      int p = r * cols + perm[i - r * cols];
      int src = inverse ? i : p;
      int dst = inverse ? p : i;
      if (bf16) {
        yb[dst] = xb[src];
      } else {
        yf[dst] = xf[src];
      }
    }
  }

  /**
   * {@code y} ({@code cols x rows}) = {@code x} ({@code rows x cols}) transposed, through a shared 32 x 33 tile (reads
   * and writes coalesced, no bank conflicts). Grid {@link #transposeBlocks}{@code (rows, cols)} (tiles in row-major
   * order), block {@link #TRANSPOSE_THREADS}. {@code x} and {@code y} must not overlap.
   */
  @Kernel
  public static void transpose(KernelContext ctx, short[] xb, float[] xf, short[] yb, float[] yf, int rows, int cols,
      @Constant boolean bf16) {
    int[] tile = ctx.allocateIntLocalArray(TRANSPOSE_TILE * (TRANSPOSE_TILE + 1));
    int across = (cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
    int r0 = ctx.groupIdx / across * TRANSPOSE_TILE;
    int c0 = (ctx.groupIdx - ctx.groupIdx / across * across) * TRANSPOSE_TILE;
    int lane = ctx.laneId();
    int step = ctx.localGroupSize / TRANSPOSE_TILE;
    for (int i = ctx.localIdx / TRANSPOSE_TILE; i < TRANSPOSE_TILE; i += step) {
      int r = r0 + i;
      int c = c0 + lane;
      if (r < rows && c < cols) {
        tile[i * (TRANSPOSE_TILE + 1) + lane] = bf16 ? xb[r * cols + c] : Float.floatToRawIntBits(xf[r * cols + c]);
      }
    }
    ctx.barrier();
    for (int i = ctx.localIdx / TRANSPOSE_TILE; i < TRANSPOSE_TILE; i += step) {
      int c = c0 + i;
      int r = r0 + lane;
      if (c < cols && r < rows) {
        int b = tile[lane * (TRANSPOSE_TILE + 1) + i];
        if (bf16) {
          yb[c * rows + r] = (short) b;
        } else {
          yf[c * rows + r] = Float.intBitsToFloat(b);
        }
      }
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Host helpers

  /** Block size of the TACO kernels: {@code ceil(ng * G / V)} lanes rounded up to whole warps. */
  public static int threads(int cols, int groupSize) {
    return warps(TacoKernels.groupsPerRow(cols, groupSize) * groupSize);
  }

  /** Block size of the raw kernels: {@code ceil(cols / V)} lanes rounded up to whole warps. */
  public static int rawThreads(int cols) {
    return warps(cols);
  }

  private static int warps(int values) {
    int lanes = (values + TacoGpuKernels.V - 1) / TacoGpuKernels.V;
    return (lanes + KernelContext.WARP_SIZE - 1) / KernelContext.WARP_SIZE * KernelContext.WARP_SIZE;
  }

  /** Grid of {@link #transpose}: one block per 32 x 32 tile. */
  public static int transposeBlocks(int rows, int cols) {
    return ((rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE) * ((cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE);
  }

  /** Bytes of a chunk's TACO body: {@code 4 rows + rows * ng * (G + 1)} (as {@code TacoCodec}'s body). */
  public static long bodyBytes(int rows, int cols, int groupSize) {
    return 4L * rows + (long) rows * TacoKernels.groupsPerRow(cols, groupSize) * (groupSize + 1);
  }

  /** Bytes of a chunk's raw payload: {@code rows * cols * wireFormat}. */
  public static long rawBytes(int rows, int cols, int wireFormat) {
    return (long) rows * cols * wireFormat;
  }

  /**
   * Checks a TACO chunk shape against the kernels' preconditions (class doc).
   *
   * @throws IllegalArgumentException naming the violated constraint
   */
  public static void checkShape(int rows, int cols, int groupSize) {
    if (!GROUP_SIZES.contains(groupSize)) {
      throw new IllegalArgumentException("two-shot GPU: G must be 32, 64, 128 or 256, got " + groupSize);
    }
    checkCols(rows, cols);
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    if ((long) rows * (4 + ng) % 8 != 0) {
      throw new IllegalArgumentException("two-shot GPU: rows * (4 + ceil(cols/G)) = " + (long) rows * (4 + ng)
          + " must be a multiple of 8 so that the FP8 codes are 8-byte aligned (pad rows to a multiple of 8; got rows = "
          + rows + ")");
    }
    if (bodyBytes(rows, cols, groupSize) > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("two-shot GPU: a " + rows + " x " + cols + " body would be "
          + bodyBytes(rows, cols, groupSize) + " bytes, over 2^31-1 (the kernels index with int)");
    }
  }

  /**
   * Checks a raw chunk shape ({@code rows >= 1}, {@code 1 <= cols <= MAX_COLS}, a known wire format, under 2^31 bytes).
   *
   * @throws IllegalArgumentException naming the violated constraint
   */
  public static void checkRawShape(int rows, int cols, int wireFormat) {
    if (wireFormat != RAW_BF16 && wireFormat != RAW_FP32) {
      throw new IllegalArgumentException("two-shot GPU: raw wire format must be " + RAW_BF16 + " (bf16) or " + RAW_FP32
          + " (fp32), got " + wireFormat);
    }
    checkCols(rows, cols);
    if (rawBytes(rows, cols, wireFormat) > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("two-shot GPU: a " + rows + " x " + cols + " raw payload would be "
          + rawBytes(rows, cols, wireFormat) + " bytes, over 2^31-1");
    }
  }

  private static void checkCols(int rows, int cols) {
    if (rows <= 0) {
      throw new IllegalArgumentException("two-shot GPU: rows must be positive, got " + rows);
    }
    if (cols < 1 || cols > MAX_COLS) {
      throw new IllegalArgumentException("two-shot GPU: cols = " + cols + " unsupported: cols must be in 1.."
          + MAX_COLS + " (one block of at most 512 threads of " + TacoGpuKernels.V + " values per row)");
    }
  }

  /**
   * Checks a payload buffer of {@code world} slots of {@code slotBytes} for payloads of {@code payloadBytes}.
   *
   * @throws IllegalArgumentException naming the violated constraint
   */
  public static void checkSlots(int world, long slotBytes, long payloadBytes) {
    if (world < 1) {
      throw new IllegalArgumentException("two-shot GPU: world must be positive, got " + world);
    }
    if (slotBytes % 16 != 0 || slotBytes < payloadBytes) {
      throw new IllegalArgumentException("two-shot GPU: slotBytes = " + slotBytes + " must be a multiple of 16 and at "
          + "least the payload's " + payloadBytes + " bytes");
    }
    if (world * slotBytes > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("two-shot GPU: " + world + " slots of " + slotBytes + " bytes are over 2^31-1"
          + " bytes (the kernels index with int): use smaller pieces");
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Catalog (translated on a CPU machine: the GPU machine's runtime has no jdk.compiler)

  /** The TACO unit's key, e.g. {@code twoshot-g64-h1-f1-bf16}: compressRows, reduceCompressRows, reduceRows, decompressRows. */
  public static String key(int groupSize, boolean hadamard, int format, boolean bf16) {
    return "twoshot-g" + groupSize + "-h" + (hadamard ? 1 : 0) + "-f" + format + "-" + dtype(bf16);
  }

  /** The raw unit's key, e.g. {@code twoshot-raw-w2-f32} (bf16 wire, fp32 tensors): the four raw kernels. */
  public static String rawKey(int wireFormat, boolean bf16) {
    return "twoshot-raw-w" + wireFormat + "-" + dtype(bf16);
  }

  /** The layout unit's key, {@code twoshot-layout-bf16} or {@code -f32}: permuteCols and transpose. */
  public static String layoutKey(boolean bf16) {
    return "twoshot-layout-" + dtype(bf16);
  }

  private static String dtype(boolean bf16) {
    return bf16 ? "bf16" : "f32";
  }

  /**
   * Every translation unit the device collectives may load, by key ({@link #key}, {@link #rawKey},
   * {@link #layoutKey}): G x Hadamard x format x dtype for the TACO kernels (32 units of 4 entries), wire format x dtype
   * for the raw kernels (4 units of 4), dtype for the layouts (2 units of 2). Entries are named as the Java methods.
   */
  public static Map<String, List<KernelRequest>> units() {
    Class<?> k = TwoShotGpuKernels.class;
    Map<String, List<KernelRequest>> units = new LinkedHashMap<>();
    for (boolean bf16 : new boolean[] {true, false}) {
      for (int g : GROUP_SIZES) {
        for (boolean h : new boolean[] {true, false}) {
          for (int f : new int[] {Fp8.E4M3, Fp8.E5M2}) {
            Map<String, Object> c = Map.of("groupSize", g, "hadamard", h, "format", f, "bf16", bf16);
            units.put(key(g, h, f, bf16), List.of(KernelRequest.of(k, "compressRows", c),
                KernelRequest.of(k, "reduceCompressRows", c), KernelRequest.of(k, "reduceRows", c),
                KernelRequest.of(k, "decompressRows", c)));
          }
        }
      }
      for (int w : new int[] {RAW_BF16, RAW_FP32}) {
        Map<String, Object> c = Map.of("wireFormat", w, "bf16", bf16);
        units.put(rawKey(w, bf16), List.of(KernelRequest.of(k, "packRows", c), KernelRequest.of(k, "reducePackRows", c),
            KernelRequest.of(k, "reduceRowsRaw", c), KernelRequest.of(k, "unpackRows", c)));
      }
      Map<String, Object> c = Map.of("bf16", bf16);
      units.put(layoutKey(bf16), List.of(KernelRequest.of(k, "permuteCols", c), KernelRequest.of(k, "transpose", c)));
    }
    return units;
  }

  /** Every kernel request of {@link #units}, in order (150). */
  public static List<KernelRequest> kernels() {
    List<KernelRequest> all = new ArrayList<>();
    units().values().forEach(all::addAll);
    return all;
  }
}
