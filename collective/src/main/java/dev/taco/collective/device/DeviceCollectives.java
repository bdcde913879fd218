package dev.taco.collective.device;

import dev.taco.collective.CollectiveException;
import dev.taco.collective.CollectiveKind;
import dev.taco.collective.Plan;
import dev.taco.collective.TwoShot;
import dev.taco.kernels.cuda.CudaException;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.ExecutionPlan;
import dev.taco.kernels.cuda.TaskGraph;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One rank's compressed collectives on the GPU (docs/design.md §4, §5): {@link TwoShot}'s all-reduce, all-gather and
 * reduce-scatter over a {@link DeviceTransport}, on device tensors, with no host synchronisation inside.
 *
 * <p>The first call of a collective with a given plan, tensor(s) and shape records its steps into a task graph
 * ({@link DeviceWire}: the fused compress, decompress-reduce-recompress and decompress kernels on the compute lane, the
 * transport's exchanges on the communication lane, large tensors in pipelined pieces) and builds an
 * {@link ExecutionPlan} for it, with its payload buffers; later calls with the same arguments enqueue that plan again
 * (replaying one CUDA graph when {@code cudaGraphs} is on and the transport can be captured). Every graph runs on this
 * object's two streams, so its collectives run in the order they were called; work of the caller ordered on
 * {@link #stream()} before a call runs before the collective, and work enqueued there after runs after it.
 *
 * <p>Values are the host path's ({@link dev.taco.collective.HostWire}) for the same inputs: the same per-row codec
 * bodies, the same rotated-domain reduce in the same order (bit for bit on fp32 tensors; bf16 tensors are rounded to
 * nearest even on output). Plans without GPU kernels are refused ({@link #unsupported}). A non-finite input row is
 * sent with a NaN coarse scale and decodes to NaN (the device cannot refuse it without a host synchronisation).
 *
 * <p>Not thread-safe: one thread per rank (as with NCCL communicators).
 */
public final class DeviceCollectives implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DeviceCollectives.class);

  /**
   * Default least payload bytes of one rank's pipelined piece: 16 MiB. Smaller pieces overlap more finely but make
   * kernels too small to fill the GPU: on an H200 the 64 MiB bf16 all-reduce at R = 2 took 0.119 ms of GPU time in one
   * piece and 0.187 ms in five balanced pieces of 4 MiB (a compress of 824 rows of 4096 reached a quarter of the copy
   * bandwidth; bench/results/gpu-collectives-1gpu.json). With 16 MiB that all-reduce is one piece and 256 MiB four.
   */
  public static final long DEFAULT_PIECE_BYTES = 16L << 20;

  private record Key(CollectiveKind op, Plan plan, long x, long y, boolean bf16, int rows, int cols) {}

  /** A collective's plan and buffers, and the bytes one execution puts on the wire (known after its first). */
  private static final class Built {
    final ExecutionPlan plan;
    final List<DeviceBuffer> buffers;
    long bytes = -1;

    Built(ExecutionPlan plan, List<DeviceBuffer> buffers) {
      this.plan = plan;
      this.buffers = buffers;
    }

    ExecutionPlan plan() {
      return plan;
    }

    List<DeviceBuffer> buffers() {
      return buffers;
    }
  }

  private final DeviceTransport transport;
  private final long pieceBytes;
  private final boolean cudaGraphs;
  private final boolean checkCalls;
  private final CudaStream compute;
  private final CudaStream comm;
  private final Map<Key, Built> built = new LinkedHashMap<>();
  private Built last;
  private long bytesSent;
  private boolean closed;

  /**
   * With {@link #DEFAULT_PIECE_BYTES}, CUDA graphs where the transport can be captured, and the check mode when the
   * environment variable {@code TACO_CHECK_COLLECTIVES} is {@code 1}.
   */
  public DeviceCollectives(DeviceTransport transport) {
    this(transport, DEFAULT_PIECE_BYTES, true, "1".equals(System.getenv("TACO_CHECK_COLLECTIVES")));
  }

  /**
   * @param transport this rank's transport (owned by the caller)
   * @param pieceBytes least payload bytes of one rank's pipelined piece; {@code Long.MAX_VALUE} for no pipelining
   * @param cudaGraphs capture each collective's graph once and replay it (only where {@link
   *     DeviceTransport#capturable()})
   * @param checkCalls before every collective, check that all ranks call the same one (operation, plan, shape, element
   *     type; {@link DeviceTransport#agree}), so a mismatch is a clear error on every rank instead of a hang or a wrong
   *     tensor; costs an exchange per call (and a synchronisation for NCCL). Transports whose agreement is cheap
   *     ({@code device-local}) check every call anyway
   * @throws IllegalArgumentException if {@code pieceBytes < 1}
   */
  public DeviceCollectives(DeviceTransport transport, long pieceBytes, boolean cudaGraphs, boolean checkCalls) {
    this.transport = Objects.requireNonNull(transport, "transport");
    if (pieceBytes < 1) {
      throw new IllegalArgumentException("pieceBytes must be positive, got " + pieceBytes);
    }
    this.pieceBytes = pieceBytes;
    this.cudaGraphs = cudaGraphs && transport.capturable();
    this.checkCalls = checkCalls;
    this.compute = transport.context().createStream();
    this.comm = transport.context().createStream();
  }

  /**
   * Why {@code plan} cannot run on the GPU, or null if it can (exact fp32, {@code none} = bf16, and the dual-scale
   * {@code taco} family in any layout).
   */
  public static String unsupported(Plan plan) {
    return DeviceWire.unsupported(plan);
  }

  /**
   * What a plan becomes on the GPU: the plan itself where it has kernels, else {@code none} (bf16, what Megatron-LM
   * sends) in the same layout, with the reason, for the caller's report (docs/design.md §3.1: a calibrated plan either runs on
   * the GPU or falls back visibly).
   *
   * @param plan the plan to run
   * @param reason null when {@code plan} is the one asked for, else why it replaced it
   */
  public record Resolved(Plan plan, String reason) {}

  /** The plan to run on the GPU instead of {@code plan} ({@link Resolved}); {@code plan} itself where it can run. */
  public static Resolved resolve(Plan plan) {
    String why = unsupported(plan);
    if (why == null) {
      return new Resolved(plan, null);
    }
    Plan none = new Plan(new dev.taco.codec.Bf16Codec(), plan.layout(), plan.permutation());
    return new Resolved(none, why + ": sent as bf16 (none) on the GPU");
  }

  /** The stream the collectives are ordered on (lane 0 of every graph). */
  public CudaStream stream() {
    return compute;
  }

  /** The transport. */
  public DeviceTransport transport() {
    return transport;
  }

  /**
   * Enqueues the sum all-reduce of the {@code rows x cols} tensor {@code x}, in place.
   *
   * @throws IllegalArgumentException for a plan without GPU kernels, a bad shape (cols over 16384, ...), or a buffer
   *     too small
   * @throws CollectiveException if the transport fails; {@link DeviceOutOfMemoryException} if the payload buffers do not
   *     fit
   */
  public void allReduce(Plan plan, DeviceTensor x, int rows, int cols) {
    need(x, rows, cols, "all-reduce input");
    String why = unsupported(plan);
    if (why != null) {
      throw new IllegalArgumentException("all-reduce with " + plan.describe() + " cannot run on the GPU: " + why);
    }
    if (transport.worldSize() == 1) {
      return; // one rank: nothing moves, nothing is quantised
    }
    run(new Key(CollectiveKind.ALL_REDUCE, plan, x.buffer().pointer(), 0, x.bf16(), rows, cols),
        w -> TwoShot.allReduce(w, plan, x, rows, cols));
  }

  /** The ranks of the transport, R. */
  public int worldSize() {
    return transport.worldSize();
  }

  /**
   * Enqueues the all-gather of every rank's {@code shardRows x cols} shard into {@code out} ({@code R*shardRows x
   * cols}).
   *
   * @throws IllegalArgumentException as {@link #allReduce}, or if the tensors' element types differ
   */
  public void allGather(Plan plan, DeviceTensor shard, int shardRows, int cols, DeviceTensor out) {
    need(shard, shardRows, cols, "all-gather shard");
    need(out, (long) transport.worldSize() * shardRows, cols, "all-gather output");
    sameType(shard, out);
    run(new Key(CollectiveKind.ALL_GATHER, plan, shard.buffer().pointer(), out.buffer().pointer(), shard.bf16(),
        shardRows, cols),
        w -> TwoShot.allGather(w, plan, shard, shardRows, cols, out));
  }

  /**
   * Enqueues the sum reduce-scatter of the {@code rows x cols} tensor {@code x} into {@code shard} ({@code rows/R x
   * cols}).
   *
   * @throws IllegalArgumentException as {@link #allReduce}, if the tensors' element types differ, or if R does not
   *     divide rows
   */
  public void reduceScatter(Plan plan, DeviceTensor x, int rows, int cols, DeviceTensor shard) {
    need(x, rows, cols, "reduce-scatter input");
    need(shard, rows / Math.max(1, transport.worldSize()), cols, "reduce-scatter shard");
    sameType(x, shard);
    run(new Key(CollectiveKind.REDUCE_SCATTER, plan, x.buffer().pointer(), shard.buffer().pointer(), x.bf16(), rows,
        cols),
        w -> TwoShot.reduceScatter(w, plan, x, rows, cols, shard));
  }

  /**
   * Waits until everything enqueued so far has finished, polling (so a transport failure, e.g. an NCCL communicator
   * aborted by its watchdog, surfaces as its exception rather than a hang).
   *
   * @throws CudaException the error of failed device work
   */
  public void synchronize() {
    while (!compute.query()) {
      Thread.onSpinWait();
    }
  }

  /**
   * Device time of every kernel task and step of the collective run last (after {@link #synchronize()}, without CUDA
   * graphs), by node name ({@code compress.<piece>.<n>}, {@code reduce...}, {@code decompress...},
   * {@code all-to-all...}, {@code all-gather...}, {@code pack/unpack} for raw plans).
   *
   * @throws IllegalStateException before any collective, or under CUDA graphs
   */
  public Map<String, Float> lastTaskMillis() {
    if (last == null) {
      throw new IllegalStateException("no collective has run");
    }
    return last.plan().taskMillis();
  }

  /**
   * Frees what was built for {@code plan} (the payload buffers and graphs of every collective and tensor that used
   * it), once the work enqueued so far has finished; a later collective with it builds them again. For a caller whose
   * plans change (a collective site that recalibrated), so that superseded plans hold no device memory.
   *
   * @return how many built collectives were freed
   * @throws CudaException the error of failed device work
   */
  public int release(Plan plan) {
    List<Key> gone = built.keySet().stream().filter(k -> k.plan().equals(plan)).toList();
    if (gone.isEmpty()) {
      return 0;
    }
    synchronize(); // the peers have pulled from these buffers too: each exchange's end waits for their pulls
    for (Key k : gone) {
      Built b = built.remove(k);
      if (last == b) {
        last = null;
      }
      free(b.plan(), b.buffers());
    }
    return gone.size();
  }

  /** The collectives built and cached so far (one per operation, plan, tensor and shape). */
  public int builtCollectives() {
    return built.size();
  }

  /** Bytes this rank has put on the wire through these collectives, replays of captured graphs included. */
  public long bytesSent() {
    return bytesSent;
  }

  private void run(Key key, java.util.function.Consumer<DeviceWire> body) {
    if (closed) {
      throw new IllegalStateException("device collectives of rank " + transport.rank() + " are closed");
    }
    String why = unsupported(key.plan());
    if (why != null) {
      throw new IllegalArgumentException(
          key.op() + " with " + key.plan().describe() + " cannot run on the GPU: " + why);
    }
    if (checkCalls || transport.cheapAgreement()) {
      String what = key.op() + " " + key.plan().describe() + " " + key.rows() + " x " + key.cols() + " "
          + (key.bf16() ? "bf16" : "fp32");
      transport.agree("the collective (this rank calls " + what + "; another calls a different collective, plan,"
          + " shape or element type)", DeviceTransport.fingerprint(what));
    }
    Built b = built.get(key);
    if (b == null) {
      b = build(key, body);
      built.put(key, b);
    }
    last = b;
    long before = transport.bytesSent();
    b.plan().enqueue();
    if (b.bytes < 0) b.bytes = transport.bytesSent() - before; // a replayed CUDA graph does not call the transport
    bytesSent += b.bytes;
    if (cudaGraphs) {
      transport.watch(key.op() + " (CUDA graph)", compute);
    }
  }

  private Built build(Key key, java.util.function.Consumer<DeviceWire> body) {
    List<DeviceBuffer> buffers = new ArrayList<>();
    TaskGraph graph = new TaskGraph(key.op() + "-r" + transport.rank() + "-" + key.rows() + "x" + key.cols());
    ExecutionPlan plan = null;
    try {
      body.accept(new DeviceWire(transport, graph, key.bf16(), pieceBytes, buffers));
      plan = new ExecutionPlan(transport.context(), graph.snapshot(), compute, comm);
      if (cudaGraphs) {
        plan.withCudaGraph();
      }
      long bytes = buffers.stream().mapToLong(DeviceBuffer::bytes).sum();
      LOG.debug("{} on rank {}: {} plan {}, {} graph nodes, {} MiB of buffers", key.op(), transport.rank(),
          key.plan().describe(), cudaGraphs ? "captured" : "eager", graph.snapshot().nodeNames().size(),
          bytes >> 20);
      return new Built(plan, buffers);
    } catch (CudaException e) {
      free(plan, buffers);
      if (e.code() == 2) { // CUDA_ERROR_OUT_OF_MEMORY
        throw new DeviceOutOfMemoryException(key.op() + " of " + key.rows() + " x " + key.cols() + " ("
            + key.plan().describe() + ") on rank " + transport.rank() + ": the device is out of memory for its "
            + "payload buffers (" + (buffers.stream().mapToLong(DeviceBuffer::bytes).sum() >> 20) + " MiB allocated "
            + "before the failure; " + freeMemory() + ")", e);
      }
      throw e;
    } catch (RuntimeException e) {
      free(plan, buffers);
      throw e;
    }
  }

  private String freeMemory() {
    try {
      transport.context().makeCurrent();
      long[] info = transport.context().driver().memGetInfo();
      return (info[0] >> 20) + " of " + (info[1] >> 20) + " MiB free";
    } catch (RuntimeException e) {
      return "free memory unknown";
    }
  }

  private static void free(ExecutionPlan plan, List<DeviceBuffer> buffers) {
    if (plan != null) {
      plan.close();
    }
    buffers.forEach(DeviceBuffer::close);
    buffers.clear();
  }

  private static void need(DeviceTensor t, long rows, int cols, String what) {
    Objects.requireNonNull(t, what);
    long bytes = rows * cols * t.elementBytes();
    if (t.buffer().bytes() < bytes) {
      throw new IllegalArgumentException(what + ": " + rows + " x " + cols + (t.bf16() ? " bf16" : " fp32") + " needs "
          + bytes + " bytes, the buffer has " + t.buffer().bytes());
    }
  }

  private static void sameType(DeviceTensor a, DeviceTensor b) {
    if (a.bf16() != b.bf16()) {
      throw new IllegalArgumentException("the input and output tensors must both be bf16 or both fp32");
    }
  }

  /** Waits for enqueued work, then frees every graph, its streams' events and its payload buffers. Idempotent. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    RuntimeException failure = null;
    for (Built b : built.values()) {
      try {
        free(b.plan(), b.buffers());
      } catch (RuntimeException e) {
        failure = failure == null ? e : failure;
      }
    }
    built.clear();
    compute.close();
    comm.close();
    if (failure != null) {
      throw failure;
    }
  }
}
