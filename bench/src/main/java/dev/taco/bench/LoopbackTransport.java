package dev.taco.bench;

import dev.taco.collective.device.DeviceTransport;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;

/**
 * Rank 0 of R on one GPU with the peers' payloads faked by local copies, for timing ONE rank's kernels of the device
 * collectives (docs/design.md §7: per-rank GPU time) without the other ranks competing for the GPU: the all-to-all copies
 * slot {@code p} of the send buffer into slot {@code p} of the receive buffer (valid payloads, of this rank's data),
 * the all-gather copies the own slot into the others. Each buffer is filled by the first exchange into it only: a
 * collective's graph keeps its buffers and its inputs do not change between samples, so its payloads stay valid, and
 * later executions time the kernels alone, without copies competing with them for memory bandwidth. The copies stand
 * for what device-local moves ({@link #slotBytes()} of each); the benchmark times them apart. Never a real link.
 */
final class LoopbackTransport implements DeviceTransport {
  private final CudaContext ctx;
  private final int world;
  private long bytesSent;
  private final java.util.Set<Long> filled = new java.util.HashSet<>();
  private final java.util.List<Long> slots = new java.util.ArrayList<>();

  LoopbackTransport(CudaContext ctx, int world) {
    this.ctx = ctx;
    this.world = world;
  }

  @Override
  public int rank() {
    return 0;
  }

  @Override
  public int worldSize() {
    return world;
  }

  @Override
  public CudaContext context() {
    return ctx;
  }

  @Override
  public void allToAll(DeviceBuffer send, DeviceBuffer recv, long slotBytes, CudaStream stream) {
    bytesSent += (world - 1) * slotBytes;
    slots.add(slotBytes);
    if (!filled.add(recv.pointer())) {
      return;
    }
    for (int p = 1; p < world; p++) {
      recv.slice(p * slotBytes, slotBytes).copyFromAsync(send.slice(p * slotBytes, slotBytes), slotBytes, stream);
    }
  }

  @Override
  public void allGather(DeviceBuffer buf, long slotBytes, CudaStream stream) {
    bytesSent += (world - 1) * slotBytes;
    slots.add(slotBytes);
    if (!filled.add(buf.pointer())) {
      return;
    }
    for (int q = 1; q < world; q++) {
      buf.slice(q * slotBytes, slotBytes).copyFromAsync(buf.slice(0, slotBytes), slotBytes, stream);
    }
  }

  /** The slot size of every exchange asked for so far (each moves {@code R-1} such slots), in call order. */
  java.util.List<Long> slotBytes() {
    return slots;
  }

  @Override
  public void agree(String what, long fingerprint) {}

  @Override
  public boolean capturable() {
    return true;
  }

  @Override
  public long bytesSent() {
    return bytesSent;
  }

  @Override
  public void close() {}
}
