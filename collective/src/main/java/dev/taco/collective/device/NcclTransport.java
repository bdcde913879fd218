package dev.taco.collective.device;

import dev.taco.collective.nccl.NcclCommunicator;
import dev.taco.collective.nccl.NcclDataType;
import dev.taco.collective.nccl.NcclRedOp;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.util.Objects;

/**
 * The {@code nccl} transport (docs/design.md §4): the two-shot exchanges as NCCL calls on one GPU per rank, the all-to-all as
 * grouped {@code ncclSend}/{@code ncclRecv} of every peer's slot ({@code ncclUint8}; the own slot is not sent), the
 * all-gather as NCCL's in-place {@code ncclAllGather} ({@code sendbuff = recvbuff + rank * slotBytes}). Every call is
 * watched by the communicator's watchdog (a call not complete within its timeout, or an asynchronous error, aborts
 * it); NCCL calls can be captured into a CUDA graph.
 */
public final class NcclTransport implements DeviceTransport {
  private final NcclCommunicator comm;
  private long bytesSent;

  /** @param comm this rank's NCCL communicator (owned by the caller, who closes it) */
  public NcclTransport(NcclCommunicator comm) {
    this.comm = Objects.requireNonNull(comm, "comm");
  }

  /** The communicator. */
  public NcclCommunicator communicator() {
    return comm;
  }

  @Override
  public int rank() {
    return comm.rank();
  }

  @Override
  public int worldSize() {
    return comm.worldSize();
  }

  @Override
  public CudaContext context() {
    return comm.context();
  }

  @Override
  public void allToAll(DeviceBuffer send, DeviceBuffer recv, long slotBytes, CudaStream stream) {
    int world = worldSize();
    long[] to = new long[world];
    long[] from = new long[world];
    for (int p = 0; p < world; p++) {
      if (p != rank()) {
        to[p] = send.pointer() + p * slotBytes;
        from[p] = recv.pointer() + p * slotBytes;
      }
    }
    comm.allToAll(to, from, slotBytes, stream);
    bytesSent += (world - 1) * slotBytes;
  }

  @Override
  public void allGather(DeviceBuffer buf, long slotBytes, CudaStream stream) {
    comm.allGather(buf.pointer() + rank() * slotBytes, buf.pointer(), slotBytes, NcclDataType.UINT8, stream);
    bytesSent += (worldSize() - 1) * slotBytes;
  }

  /**
   * Why NCCL cannot sum FP8 here ({@link NcclDataType#fp8Problem}: the loaded library before 2.24, a GPU before sm90),
   * or null.
   */
  public String fp8Problem() {
    CudaContext ctx = comm.context();
    return NcclDataType.fp8Problem(dev.taco.collective.nccl.Nccl.get().version(), ctx.computeCapabilityMajor(),
        ctx.computeCapabilityMinor());
  }

  /** The largest of every rank's float32 at {@code value} into it ({@code ncclAllReduce}, {@code ncclMax}, in place). */
  public void allReduceMax(DeviceBuffer value, CudaStream stream) {
    comm.allReduce(value.pointer(), value.pointer(), 1, NcclDataType.FLOAT32, NcclRedOp.MAX, stream);
    bytesSent += ringBytes(4);
  }

  /**
   * NCCL's own FP8 sum ({@code ncclSum} on {@code type}, an FP8 type): the all-reduce of {@code count} codes of
   * {@code send} in place, or with {@code scatter} the reduce-scatter of {@code R * count} codes into {@code count} of
   * {@code recv}.
   */
  public void sumFp8(DeviceBuffer send, DeviceBuffer recv, long count, NcclDataType type, boolean scatter,
      CudaStream stream) {
    if (scatter) {
      comm.reduceScatter(send, recv, count, type, stream);
      bytesSent += (worldSize() - 1) * count;
    } else {
      comm.allReduce(send, send, count, type, stream);
      bytesSent += ringBytes(count);
    }
  }

  /** Bytes a rank sends in a ring all-reduce of {@code bytes} (two phases of (R-1)/R each). */
  private long ringBytes(long bytes) {
    return 2 * (worldSize() - 1) * bytes / worldSize();
  }

  /** Gathers the fingerprints with {@code ncclAllGather} on a stream of its own and waits for them. */
  @Override
  public void agree(String what, long fingerprint) {
    int world = worldSize();
    try (DeviceBuffer buf = comm.context().alloc(8L * world); CudaStream s = comm.context().createStream()) {
      buf.copyFromHost(new long[] {fingerprint}, 0, 1, 8L * rank());
      comm.allGather(buf.pointer() + 8L * rank(), buf.pointer(), 8, NcclDataType.UINT8, s);
      comm.synchronize(s);
      long[] all = new long[world];
      buf.copyToHost(all, 0, world, 0);
      for (int q = 0; q < world; q++) {
        if (all[q] != fingerprint) {
          throw new dev.taco.collective.CollectiveException("nccl: rank " + q + " and rank " + rank()
              + " disagree on " + what);
        }
      }
    }
  }

  @Override
  public void watch(String op, CudaStream stream) {
    comm.watch(op, stream);
  }

  @Override
  public boolean capturable() {
    return true;
  }

  @Override
  public long bytesSent() {
    return bytesSent;
  }

  /** Nothing of its own to release: the communicator is the caller's. */
  @Override
  public void close() {}
}
