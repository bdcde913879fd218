package dev.taco.bench;

import dev.taco.collective.device.DeviceTransport;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;

/**
 * Rank 0 of R on one GPU with the peers' payloads faked by local copies, for timing ONE rank's kernels of the device
 * collectives (DESIGN §7: per-rank GPU time) without the other ranks competing for the GPU: the all-to-all copies
 * slot {@code p} of the send buffer into slot {@code p} of the receive buffer (valid payloads, of this rank's data),
 * the all-gather copies the own slot into the others. The copies stand for what device-local moves; they are timed
 * apart from the kernels. Never a real link.
 */
final class LoopbackTransport implements DeviceTransport {
  private final CudaContext ctx;
  private final int world;
  private long bytesSent;

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
    for (int p = 1; p < world; p++) {
      recv.slice(p * slotBytes, slotBytes).copyFromAsync(send.slice(p * slotBytes, slotBytes), slotBytes, stream);
    }
    bytesSent += (world - 1) * slotBytes;
  }

  @Override
  public void allGather(DeviceBuffer buf, long slotBytes, CudaStream stream) {
    for (int q = 1; q < world; q++) {
      buf.slice(q * slotBytes, slotBytes).copyFromAsync(buf.slice(0, slotBytes), slotBytes, stream);
    }
    bytesSent += (world - 1) * slotBytes;
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
  public String name() {
    return "loopback";
  }

  @Override
  public void close() {}
}
