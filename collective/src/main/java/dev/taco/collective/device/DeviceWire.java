package dev.taco.collective.device;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Bf16Codec;
import dev.taco.codec.Fp8TensorCodec;
import dev.taco.codec.GroupQuantCodec;
import dev.taco.codec.Int8GroupCodec;
import dev.taco.codec.NcclFp8Codec;
import dev.taco.codec.TacoCodec;
import dev.taco.collective.CollectiveKind;
import dev.taco.collective.Plan;
import dev.taco.collective.Wire;
import dev.taco.collective.WireLayout;
import dev.taco.collective.nccl.NcclDataType;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.TaskGraph;
import dev.taco.kernels.cuda.WorkerGrid;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.NcclFp8;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.gpu.GroupTwoShotKernels;
import dev.taco.kernels.gpu.NcclFp8Kernels;
import dev.taco.kernels.gpu.TwoShotGpuKernels;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.Consumer;

/**
 * The device side of the {@link Wire} seam (docs/design.md §4, §5): instead of running the steps, it records them as the
 * nodes of a {@link TaskGraph} — the {@link TwoShotGpuKernels} (compress, decompress-reduce-recompress, decompress;
 * raw packing for the exact and bf16 plans; the layout kernels) on the compute lane, the transport's exchanges on the
 * communication lane — with each pipelined piece's steps chained by {@link TaskGraph#after}, so that piece {@code k+1}
 * is compressed while piece {@code k} is on the wire. {@link DeviceCollectives} runs the graph; nothing in it waits on
 * the host.
 *
 * <p>Payload buffers hold {@code worldSize()} slots, each padded to a multiple of 8 payload rows (so the FP8 codes are
 * 8-byte aligned) and 16 bytes. Only the plans {@link #unsupported} accepts run here.
 *
 * <p>{@code nccl-fp8} (docs/design.md §4.1, {@link NcclFp8Kernels}): on NCCL, the absmax, NCCL's own max all-reduce of
 * it, the cast, NCCL's own FP8 all-reduce or reduce-scatter and the cast back ({@link #sumFp8}); on the other
 * transports the two-shot steps with the group scale gathered first and the ring's FP8 sum in the reduce.
 */
final class DeviceWire implements Wire<DeviceTensor, DeviceWire.Slots> {
  /** Rows of a payload on the device are padded to a multiple of this (code alignment, {@link TwoShotGpuKernels}). */
  static final int ROW_ALIGN = 8;

  /** A payload buffer: {@code worldSize()} slots of {@code slotBytes}, each for a chunk of {@code rows} payload rows. */
  record Slots(DeviceBuffer buffer, long slotBytes, int rows) {
    DeviceBuffer slot(int q) {
      return buffer.slice(q * slotBytes, slotBytes);
    }
  }

  private final DeviceTransport transport;
  private final TaskGraph graph;
  private final boolean bf16;
  private final long pieceBytes;
  private final List<DeviceBuffer> owned;
  private final Map<Integer, String> lastOfPiece = new HashMap<>();
  private int nodes;
  private DeviceBuffer scale; // nccl-fp8: this collective's group scale (groupScale), NcclFp8.HEADER bytes

  /**
   * @param graph the graph the steps are recorded into
   * @param bf16 the element type of the collective's tensors
   * @param pieceBytes target payload bytes of one rank's piece (pipelining granularity); {@code Long.MAX_VALUE}: one
   *     piece
   * @param owned receives every buffer this wire allocates (the caller frees them with the graph)
   */
  DeviceWire(DeviceTransport transport, TaskGraph graph, boolean bf16, long pieceBytes, List<DeviceBuffer> owned) {
    this.transport = transport;
    this.graph = graph;
    this.bf16 = bf16;
    this.pieceBytes = pieceBytes;
    this.owned = owned;
  }

  /**
   * Why {@code plan} cannot run on the device, or null if it can: exact fp32, {@code none} (bf16), the dual-scale
   * {@code taco} family (any G of 32..256, Hadamard on or off, E4M3/E5M2; alpha does not change the payload),
   * {@code int8-group} (any G) and {@code fp8-tensor} (both on fp32 tensors), {@code mxfp4} and {@code nvfp4} (Hadamard
   * on or off, fp32 or bf16 tensors; all {@link GroupTwoShotKernels}) have kernels, in every layout; {@code nccl-fp8}
   * (fp32 tensors, {@link NcclFp8Kernels}) in order.
   */
  static String unsupported(Plan plan) {
    AbstractCodec c = plan.codec();
    if (c == null || c instanceof Bf16Codec) {
      return null;
    }
    if (c instanceof TacoCodec t) {
      return t.dualScale() ? null : t.name() + " (single scale) has no GPU kernels";
    }
    if (c instanceof Int8GroupCodec || c instanceof Fp8TensorCodec || fp4Of(plan) != null) {
      return null; // GroupTwoShotKernels; int8-group and fp8-tensor on fp32 tensors (bf16 ones are refused when recorded)
    }
    if (c instanceof NcclFp8Codec) { // NcclFp8Kernels, fp32 tensors
      return plan.layout() == WireLayout.IN_ORDER ? null : "nccl-fp8 sends the tensor in order";
    }
    return c.name() + " has no GPU kernels";
  }

  @Override
  public int rank() {
    return transport.rank();
  }

  @Override
  public int worldSize() {
    return transport.worldSize();
  }

  /** Bytes of a {@code rows x cols} chunk's device payload (rows padded to {@link #ROW_ALIGN}). */
  static long payloadBytes(Plan plan, int rows, int cols) {
    int pr = padRows(rows);
    if (plan.exact()) {
      return TwoShotGpuKernels.rawBytes(pr, cols, TwoShotGpuKernels.RAW_FP32);
    }
    if (plan.codec() instanceof TacoCodec t) {
      return TwoShotGpuKernels.bodyBytes(pr, cols, t.groupSize());
    }
    if (plan.groupScaled()) {
      return NcclFp8.HEADER + (long) pr * cols;
    }
    Baseline base = baselineOf(plan);
    if (base != null) {
      return GroupTwoShotKernels.bodyBytes(pr, cols, base.groupSize());
    }
    Fp4 f = fp4Of(plan);
    if (f != null) {
      return GroupTwoShotKernels.fp4BodyBytes(pr, cols, f.kind(), f.hadamard());
    }
    return TwoShotGpuKernels.rawBytes(pr, cols, TwoShotGpuKernels.RAW_BF16);
  }

  static int padRows(int rows) {
    return (rows + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
  }

  /**
   * Pieces of at least {@code pieceBytes} of payload each, balanced: {@code K = floor(chunk payload / pieceBytes)}
   * (at least 1) pieces of {@code ceil(rows/K)} rows rounded up to {@link #ROW_ALIGN}. Large and balanced, because a
   * kernel of few rows (one block per row) cannot keep enough loads in flight to fill the memory bandwidth (see
   * {@link DeviceCollectives#DEFAULT_PIECE_BYTES}).
   */
  @Override
  public int pieceRows(Plan plan, int rowsPerRank, int cols) {
    double perRow = payloadBytes(plan, ROW_ALIGN, cols) / (double) ROW_ALIGN;
    long pieces = Math.max(1, (long) Math.floor(rowsPerRank * perRow / pieceBytes));
    long rows = (rowsPerRank + pieces - 1) / pieces;
    return (int) Math.min(rowsPerRank, (rows + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN);
  }

  @Override
  public Slots payloads(Plan plan, int rows, int cols) {
    long slot = (payloadBytes(plan, rows, cols) + 15) / 16 * 16;
    TwoShotGpuKernels.checkSlots(worldSize(), slot, payloadBytes(plan, rows, cols));
    return new Slots(alloc(worldSize() * slot), slot, padRows(rows));
  }

  @Override
  public long capacity(DeviceTensor tensor) {
    return tensor.buffer().bytes() / tensor.elementBytes();
  }

  /** Nothing to record: {@link DeviceCollectives} checks the ranks' calls when they are made, not when recorded. */
  @Override
  public void agree(String description) {}

  @Override
  public DeviceTensor scratch(int rows, int cols) {
    return new DeviceTensor(alloc((long) rows * cols * (bf16 ? 2 : 4)), bf16);
  }

  /**
   * Records the group scale on piece 0's chain: this rank's absmax into its slot of a small buffer, the all-gather of
   * the slots, and {@link NcclFp8Kernels#groupScale}.
   */
  @Override
  public void groupScale(Plan plan, DeviceTensor x, int rows, int cols) {
    NcclFp8Codec c = ncclFp8(plan);
    long slot = 16;
    DeviceBuffer amaxes = alloc(worldSize() * slot);
    absmax(x.buffer(), 0, rows, cols, amaxes.slice(rank() * slot, slot), 0);
    transport.prepare(slot);
    step("all-gather", 0, true, s -> transport.allGather(amaxes, slot, s));
    DeviceBuffer sc = alloc(NcclFp8.HEADER);
    int world = worldSize(), divisor = c.divisor(world);
    kernel("scale", 0, cover(1),
        (g, n) -> g.task(n, NcclFp8Kernels::groupScale, amaxes, (int) slot, world, divisor, sc));
    scale = sc;
  }

  /** NCCL's own FP8 sum (NCCL 2.24+ on sm90+), as a user of it writes the collective. */
  @Override
  public boolean sumsFp8() {
    return transport instanceof NcclTransport;
  }

  /**
   * Records {@code nccl-fp8} as a NCCL user writes it, on piece 0's chain: the absmax, {@code ncclAllReduce} with
   * {@code ncclMax} of it, the scale, the cast, {@code ncclAllReduce} (or {@code ncclReduceScatter}) of the codes on
   * {@code ncclFloat8e4m3}/{@code ncclFloat8e5m2}, and the cast back into {@code out}.
   *
   * @throws IllegalArgumentException on a NCCL before 2.24 or a GPU before sm90 ({@link NcclTransport#fp8Problem}), or
   *     for bf16 tensors
   */
  @Override
  public void sumFp8(CollectiveKind kind, Plan plan, DeviceTensor x, int rows, int cols, DeviceTensor out) {
    NcclFp8Codec c = ncclFp8(plan);
    NcclTransport nccl = (NcclTransport) transport;
    String why = nccl.fp8Problem();
    if (why != null) {
      throw new IllegalArgumentException(c + " over NCCL: " + why + " (on this machine use --tp-transport"
          + " device-local, which sums as NCCL would, or another codec)");
    }
    boolean scatter = kind == CollectiveKind.REDUCE_SCATTER;
    int f = c.format().code();
    int outRows = scatter ? rows / worldSize() : rows;
    NcclDataType type = f == Fp8.E4M3 ? NcclDataType.FLOAT8_E4M3 : NcclDataType.FLOAT8_E5M2;
    DeviceBuffer amax = alloc(16), sc = alloc(16), head = alloc(16);
    DeviceBuffer codes = alloc((long) rows * cols), sum = scatter ? alloc((long) outRows * cols) : codes;
    DeviceBuffer xb = x.buffer(), ob = out.buffer();
    int divisor = c.divisor(worldSize());
    absmax(xb, 0, rows, cols, amax, 0);
    step("all-reduce", 0, true, s -> nccl.allReduceMax(amax, s));
    kernel("scale", 0, cover(1), (g, n) -> g.task(n, NcclFp8Kernels::groupScale, amax, 16, 1, divisor, sc));
    kernel("compress", 0, cover((long) rows * cols),
        (g, n) -> g.task(n, NcclFp8Kernels::cast, xb, sc, head, codes, 0, rows, rows, cols, f));
    step(scatter ? "reduce-scatter" : "all-reduce", 0, true,
        s -> nccl.sumFp8(codes, sum, (long) outRows * cols, type, scatter, s));
    kernel("decompress", 0, cover((long) outRows * cols), (g, n) -> g.task(n, NcclFp8Kernels::decodeSlots, sum,
        0, 0, sc, ob, outRows, outRows, 0, outRows, outRows, cols, f, 1));
  }

  /** The plan's nccl-fp8 codec, refusing bf16 tensors (its kernels take fp32). */
  private NcclFp8Codec ncclFp8(Plan plan) {
    if (bf16) {
      throw new IllegalArgumentException(plan.codec() + ": the GPU kernels take fp32 tensors (this collective is"
          + " bf16)");
    }
    return (NcclFp8Codec) plan.codec();
  }

  /** This chunk's own cast with the group scale into slot {@link #rank()} of {@code recv}, for the ring's sum. */
  private void castOwn(Plan plan, DeviceTensor x, int row0, int realRows, Slots recv, int cols, int piece) {
    encode(plan, x, row0, realRows, recv.rows(), cols, recv, rank(), piece);
  }

  @Override
  public void encode(Plan plan, DeviceTensor x, int row0, int realRows, int rows, int cols, Slots out, int slot,
      int piece) {
    DeviceBuffer xb = x.buffer();
    DeviceBuffer body = out.slot(slot);
    int pr = out.rows();
    Baseline base = baseline(plan);
    if (base != null) {
      compressBaseline(base, xb, body, row0, realRows, pr, cols, piece);
    } else if (fp4Of(plan) instanceof Fp4 f) {
      GroupTwoShotKernels.checkFp4Shape(pr, cols, f.kind(), f.hadamard());
      kernel("compress", piece, f.grid(pr, cols), (g, n) -> g.task(n, GroupTwoShotKernels::compressFp4,
          TaskGraph.KERNEL_CONTEXT, xb, xb, body, row0, realRows, pr, cols, f.kind(), f.hadamard(), bf16));
    } else if (plan.groupScaled()) {
      DeviceBuffer sc = scale, codes = body.slice(NcclFp8.HEADER, (long) pr * cols);
      int f = ncclFp8(plan).format().code();
      kernel("compress", piece, cover((long) pr * cols), (g, n) -> g.task(n, NcclFp8Kernels::cast, xb, sc, body,
          codes, row0, realRows, pr, cols, f));
    } else if (plan.codec() instanceof TacoCodec t) {
      TwoShotGpuKernels.checkShape(pr, cols, t.groupSize());
      kernel("compress", piece, WorkerGrid.of(pr, TwoShotGpuKernels.threads(cols, t.groupSize())),
          (g, n) -> g.task(n, TwoShotGpuKernels::compressRows, TaskGraph.KERNEL_CONTEXT, xb, xb, body,
              row0, realRows, pr, cols, t.groupSize(), t.hadamard(), t.format().code(), bf16));
    } else {
      int w = wireFormat(plan);
      TwoShotGpuKernels.checkRawShape(pr, cols, w);
      kernel("pack", piece, WorkerGrid.of(pr, TwoShotGpuKernels.rawThreads(cols)),
          (g, n) -> g.task(n, TwoShotGpuKernels::packRows, TaskGraph.KERNEL_CONTEXT, xb, xb, body, body,
              row0, realRows, pr, cols, w, bf16));
    }
  }

  @Override
  public void reduce(Plan plan, DeviceTensor x, int row0, int realRows, int rows, int cols, Slots recv,
      DeviceTensor y, int yRow0, int piece) {
    DeviceBuffer xb = x.buffer();
    DeviceBuffer r = recv.buffer();
    DeviceBuffer yb = y.buffer();
    int pr = recv.rows();
    int slot = (int) recv.slotBytes();
    int me = rank();
    int world = worldSize();
    Baseline base = baseline(plan);
    if (base != null) {
      int g = base.groupSize(), k = base.kind();
      kernel("reduce", piece, cover((long) realRows * cols), (gr, n) -> gr.task(n, GroupTwoShotKernels::reduceGroups,
          xb, r, slot, me, world, yb, row0, realRows, pr, cols, g, k, yRow0, realRows));
    } else if (fp4Of(plan) instanceof Fp4 f) {
      kernel("reduce", piece, f.grid(pr, cols), (g, n) -> g.task(n, GroupTwoShotKernels::reduceFp4Rows,
          TaskGraph.KERNEL_CONTEXT, xb, xb, r, slot, me, world, yb, yb, row0, realRows, pr, cols, yRow0, f.kind(),
          f.hadamard(), bf16));
    } else if (plan.groupScaled()) {
      castOwn(plan, x, row0, realRows, recv, cols, piece);
      DeviceBuffer sc = scale;
      int f = ncclFp8(plan).format().code();
      kernel("reduce", piece, cover((long) realRows * cols), (g, n) -> g.task(n, NcclFp8Kernels::ringReduce, r, slot,
          me, world, sc, sc, sc, yb, yRow0, realRows, pr, cols, f, false));
    } else if (plan.codec() instanceof TacoCodec t) {
      kernel("reduce", piece, WorkerGrid.of(pr, TwoShotGpuKernels.threads(cols, t.groupSize())),
          (g, n) -> g.task(n, TwoShotGpuKernels::reduceRows, TaskGraph.KERNEL_CONTEXT, xb, xb, r, slot,
              me, world, yb, yb, row0, realRows, pr, cols, yRow0, t.groupSize(), t.hadamard(), t.format().code(),
              bf16));
    } else {
      int w = wireFormat(plan);
      kernel("reduce", piece, WorkerGrid.of(pr, TwoShotGpuKernels.rawThreads(cols)),
          (g, n) -> g.task(n, TwoShotGpuKernels::reduceRowsRaw, TaskGraph.KERNEL_CONTEXT, xb, xb, r, r,
              slot, me, world, yb, yb, row0, realRows, pr, cols, yRow0, w, bf16));
    }
  }

  @Override
  public void reduceEncode(Plan plan, DeviceTensor x, int row0, int realRows, int rows, int cols, Slots recv,
      Slots out, int piece) {
    DeviceBuffer xb = x.buffer();
    DeviceBuffer r = recv.buffer();
    DeviceBuffer body = out.slot(rank());
    int pr = recv.rows();
    int slot = (int) recv.slotBytes();
    int me = rank();
    int world = worldSize();
    Baseline base = baseline(plan);
    if (base != null) {
      int g = base.groupSize(), k = base.kind();
      DeviceBuffer y = alloc(4L * pr * cols); // the reduced chunk, zero rows included, then re-compressed
      kernel("reduce", piece, cover((long) pr * cols), (gr, n) -> gr.task(n, GroupTwoShotKernels::reduceGroups, xb, r,
          slot, me, world, y, row0, realRows, pr, cols, g, k, 0, pr));
      compressBaseline(base, y, body, 0, pr, pr, cols, piece);
    } else if (fp4Of(plan) instanceof Fp4 f) {
      kernel("reduce", piece, f.grid(pr, cols), (g, n) -> g.task(n, GroupTwoShotKernels::reduceCompressFp4,
          TaskGraph.KERNEL_CONTEXT, xb, xb, r, slot, me, world, body, row0, realRows, pr, cols, f.kind(), f.hadamard(),
          bf16));
    } else if (plan.groupScaled()) {
      castOwn(plan, x, row0, realRows, recv, cols, piece);
      DeviceBuffer sc = scale, codes = body.slice(NcclFp8.HEADER, (long) pr * cols);
      int f = ncclFp8(plan).format().code();
      kernel("reduce", piece, cover((long) pr * cols), (g, n) -> g.task(n, NcclFp8Kernels::ringReduce, r, slot, me,
          world, sc, body, codes, xb, 0, realRows, pr, cols, f, true));
    } else if (plan.codec() instanceof TacoCodec t) {
      kernel("reduce", piece, WorkerGrid.of(pr, TwoShotGpuKernels.threads(cols, t.groupSize())),
          (g, n) -> g.task(n, TwoShotGpuKernels::reduceCompressRows, TaskGraph.KERNEL_CONTEXT, xb, xb, r,
              slot, me, world, body, row0, realRows, pr, cols, t.groupSize(), t.hadamard(), t.format().code(), bf16));
    } else {
      int w = wireFormat(plan);
      kernel("reduce", piece, WorkerGrid.of(pr, TwoShotGpuKernels.rawThreads(cols)),
          (g, n) -> g.task(n, TwoShotGpuKernels::reducePackRows, TaskGraph.KERNEL_CONTEXT, xb, xb, r, r,
              slot, me, world, body, body, row0, realRows, pr, cols, w, bf16));
    }
  }

  @Override
  public void decodeAll(Plan plan, Slots in, int rowsTotal, int rowsPerRank, int pieceRow0, int pieceRows, int cols,
      DeviceTensor out, int piece) {
    DeviceBuffer b = in.buffer();
    DeviceBuffer ob = out.buffer();
    int pr = in.rows();
    int slot = (int) in.slotBytes();
    int blocks = worldSize() * pr;
    Baseline base = baseline(plan);
    if (base != null) {
      int g = base.groupSize(), k = base.kind();
      int world = worldSize();
      kernel("decompress", piece, cover((long) blocks * cols), (gr, n) -> gr.task(n,
          GroupTwoShotKernels::decompressGroups, b, slot, ob, rowsTotal, rowsPerRank, pieceRow0, pieceRows, pr, cols, g,
          k, world));
    } else if (fp4Of(plan) instanceof Fp4 f) {
      kernel("decompress", piece, f.grid(blocks, cols), (g, n) -> g.task(n, GroupTwoShotKernels::decompressFp4,
          TaskGraph.KERNEL_CONTEXT, b, slot, ob, ob, rowsTotal, rowsPerRank, pieceRow0, pieceRows, pr, cols, f.kind(),
          f.hadamard(), bf16));
    } else if (plan.groupScaled()) {
      DeviceBuffer sc = scale;
      int f = ncclFp8(plan).format().code(), world = worldSize();
      kernel("decompress", piece, cover((long) blocks * cols), (g, n) -> g.task(n, NcclFp8Kernels::decodeSlots, b,
          slot, NcclFp8.HEADER, sc, ob, rowsTotal, rowsPerRank, pieceRow0, pieceRows, pr, cols, f, world));
    } else if (plan.codec() instanceof TacoCodec t) {
      kernel("decompress", piece, WorkerGrid.of(blocks, TwoShotGpuKernels.threads(cols, t.groupSize())),
          (g, n) -> g.task(n, TwoShotGpuKernels::decompressRows, TaskGraph.KERNEL_CONTEXT, b, slot,
              ob, ob, rowsTotal, rowsPerRank, pieceRow0, pieceRows, pr, cols, t.groupSize(), t.hadamard(),
              t.format().code(), bf16));
    } else {
      int w = wireFormat(plan);
      kernel("unpack", piece, WorkerGrid.of(blocks, TwoShotGpuKernels.rawThreads(cols)),
          (g, n) -> g.task(n, TwoShotGpuKernels::unpackRows, TaskGraph.KERNEL_CONTEXT, b, b, slot, ob,
              ob, rowsTotal, rowsPerRank, pieceRow0, pieceRows, pr, cols, w, bf16));
    }
  }

  @Override
  public void allToAll(Slots send, Slots recv, int piece) {
    transport.prepare(send.slotBytes());
    step("all-to-all", piece, true, s -> transport.allToAll(send.buffer(), recv.buffer(), send.slotBytes(), s));
  }

  @Override
  public void allGather(Slots buf, int piece) {
    transport.prepare(buf.slotBytes());
    step("all-gather", piece, true, s -> transport.allGather(buf.buffer(), buf.slotBytes(), s));
  }

  @Override
  public void copyRows(DeviceTensor src, int srcRow0, DeviceTensor dst, int dstRow0, int rows, int cols) {
    long eb = src.elementBytes();
    long bytes = (long) rows * cols * eb;
    DeviceBuffer from = src.buffer().slice(srcRow0 * cols * eb, bytes);
    DeviceBuffer to = dst.buffer().slice(dstRow0 * cols * eb, bytes);
    step("copy", -1, false, s -> to.copyFromAsync(from, bytes, s));
  }

  @Override
  public void toWire(Plan plan, DeviceTensor x, int rows, int cols, DeviceTensor wire) {
    layout(plan, x, rows, cols, wire, false);
  }

  @Override
  public void fromWire(Plan plan, DeviceTensor wire, int rows, int cols, DeviceTensor x) {
    layout(plan, wire, rows, cols, x, true);
  }

  private void layout(Plan plan, DeviceTensor src, int rows, int cols, DeviceTensor dst, boolean back) {
    DeviceBuffer s = src.buffer();
    DeviceBuffer d = dst.buffer();
    if (plan.layout() == WireLayout.PERMUTED) {
      int[] perm = plan.permutation();
      DeviceBuffer p = alloc(4L * perm.length);
      p.copyFromHost(perm, 0, perm.length, 0);
      graph.task(name("permute", -1), TwoShotGpuKernels::permuteCols, s, s, d, d, p, rows, cols, back, bf16)
          .grid(WorkerGrid.cover((long) rows * cols, 256));
    } else if (plan.layout() == WireLayout.TOKEN_AXIS) {
      int r = back ? cols : rows;
      int c = back ? rows : cols;
      graph.task(name("transpose", -1), TwoShotGpuKernels::transpose, TaskGraph.KERNEL_CONTEXT, s, s, d, d, r, c, bf16)
          .grid(WorkerGrid.of(TwoShotGpuKernels.transposeBlocks(r, c), TwoShotGpuKernels.TRANSPOSE_THREADS));
    }
    graph.onLane(TaskGraph.COMPUTE_LANE);
  }

  /** An absmax baseline's kernel parameters: G (0: one scale per payload) and the code kind. */
  private record Baseline(int groupSize, int kind) {}

  /**
   * The kernel parameters of an {@code int8-group} or {@code fp8-tensor} plan, null for any other.
   *
   * @throws IllegalArgumentException for one of them on bf16 tensors (their kernels take fp32)
   */
  private Baseline baseline(Plan plan) {
    Baseline b = baselineOf(plan);
    if (b != null && bf16) {
      throw new IllegalArgumentException(plan.codec().name() + ": the GPU kernels take fp32 tensors (this collective"
          + " is bf16)");
    }
    return b;
  }

  private static Baseline baselineOf(Plan plan) {
    return plan.codec() instanceof Int8GroupCodec c ? new Baseline(c.groupSize(), GroupKernels.INT8)
        : plan.codec() instanceof Fp8TensorCodec ? new Baseline(0, GroupKernels.E4M3) : null;
  }

  /** An E2M1 plan's kernel parameters ({@code mxfp4}, {@code nvfp4}): the code kind and the rotation. */
  private record Fp4(int kind, boolean hadamard) {
    /** {@code blocks} blocks of the E2M1 kernels' threads for rows of {@code cols}. */
    WorkerGrid grid(int blocks, int cols) {
      return WorkerGrid.of(blocks, GroupTwoShotKernels.fp4Threads(cols, kind));
    }
  }

  /** The kernel parameters of an {@code mxfp4} or {@code nvfp4} plan, null for any other. */
  private static Fp4 fp4Of(Plan plan) {
    return plan.codec() instanceof GroupQuantCodec q && GroupKernels.fp4(q.kind()) ? new Fp4(q.kind(), q.hadamard())
        : null;
  }

  /** Compresses a chunk for a baseline plan: one kernel per group, or three for the per-payload scale. */
  private void compressBaseline(Baseline base, DeviceBuffer x, DeviceBuffer body, int row0, int realRows, int rows,
      int cols, int piece) {
    int g = base.groupSize(), k = base.kind();
    if (g > 0) {
      kernel("compress", piece, cover((long) rows * TacoKernels.groupsPerRow(cols, g)),
          (gr, n) -> gr.task(n, GroupTwoShotKernels::compressGroups, x, body, row0, realRows, rows, cols, g, k));
      return;
    }
    absmax(x, row0, realRows, cols, body, piece);
    kernel("compress", piece, cover((long) rows * cols),
        (gr, n) -> gr.task(n, GroupTwoShotKernels::encodeTensor, x, body, row0, realRows, rows, cols, k));
  }

  /**
   * The largest finite {@code |x|} of rows {@code row0 .. row0 + rows} ({@code cols} values each) into the float32 at
   * the start of {@code to}, in two levels of partial maxima.
   */
  private void absmax(DeviceBuffer x, int row0, int rows, int cols, DeviceBuffer to, int piece) {
    int parts = GroupTwoShotKernels.PARTS, folded = GroupTwoShotKernels.FOLDED;
    DeviceBuffer buf = alloc(4L * (parts + folded));
    DeviceBuffer partial = buf.slice(0, 4L * parts), second = buf.slice(4L * parts, 4L * folded);
    kernel("absmax", piece, cover(parts),
        (gr, n) -> gr.task(n, GroupTwoShotKernels::absmaxPartials, x, partial, row0, rows, cols, parts));
    kernel("absmax", piece, cover(folded), // the partials as one row, folded again
        (gr, n) -> gr.task(n, GroupTwoShotKernels::absmaxPartials, partial, second, 0, 1, parts, folded));
    kernel("absmax", piece, cover(1), (gr, n) -> gr.task(n, GroupTwoShotKernels::absmaxFinish, second, to, folded));
  }

  /** A grid for a grid-stride {@code @Parallel} kernel of {@code n} iterations. */
  private static WorkerGrid cover(long n) {
    return WorkerGrid.cover(Math.max(1, n), 256);
  }

  /** The raw wire format of an exact (fp32) or {@code none} (bf16) plan. */
  private static int wireFormat(Plan plan) {
    return plan.exact() ? TwoShotGpuKernels.RAW_FP32 : TwoShotGpuKernels.RAW_BF16;
  }

  private String name(String kind, int piece) {
    return kind + "." + (piece < 0 ? "" : piece + ".") + nodes++;
  }

  /** Adds the kernel task {@code add} makes (named {@code kind.piece.n}) on the compute lane, after the piece's last. */
  private void kernel(String kind, int piece, WorkerGrid grid, BiConsumer<TaskGraph, String> add) {
    String n = name(kind, piece);
    add.accept(graph, n);
    graph.grid(grid).onLane(TaskGraph.COMPUTE_LANE);
    chain(piece, n);
  }

  /** Adds a step (an exchange on the communication lane, or a copy on the compute lane). */
  private void step(String kind, int piece, boolean exchange, Consumer<CudaStream> work) {
    String n = name(kind, piece);
    boolean capturable = !exchange || transport.capturable();
    graph.step(TaskGraph.Step.of(n, capturable, work))
        .onLane(exchange ? TaskGraph.COMMUNICATION_LANE : TaskGraph.COMPUTE_LANE);
    chain(piece, n);
  }

  /** Makes the node {@code added} (just added) run after its piece's previous node; it becomes the piece's last. */
  private void chain(int piece, String added) {
    if (piece >= 0) {
      String prev = lastOfPiece.put(piece, added);
      if (prev != null) {
        graph.after(prev);
      }
    }
  }

  private DeviceBuffer alloc(long bytes) {
    CudaContext ctx = transport.context();
    DeviceBuffer b = ctx.alloc(Math.max(16, bytes));
    owned.add(b);
    return b;
  }
}
