package dev.taco.collective;

/**
 * Rank 0 of a group of R whose peers all hold what it holds: the host side of an emulated TP rank
 * ({@code device.EmulatedTransport}), where one process stands for a whole group. A sum over ranks is R times this
 * rank's values, a gather or an all-to-all delivers this rank's chunk as every peer's. So per-site calibration agrees
 * "with every rank" on this rank's measurements alone, as the emulation's peers would. Moves no bytes; never a real
 * group. Not thread-safe.
 */
public final class MirroredCommunicator implements Communicator {
  private final int world;
  private boolean closed;

  /**
   * @param worldSize R, at least 1
   * @throws IllegalArgumentException for fewer than 1 rank
   */
  public MirroredCommunicator(int worldSize) {
    if (worldSize < 1) throw new IllegalArgumentException("a group has at least 1 rank, got " + worldSize);
    this.world = worldSize;
  }

  @Override
  public int rank() {
    return 0;
  }

  @Override
  public int worldSize() {
    return world;
  }

  /** R times each value (R identical contributions), in place. */
  @Override
  public void allReduce(float[] buf, int off, int n) {
    check();
    LocalCommunicator.checkRange("allReduce", "buf", buf, off, n, 1);
    for (int i = off; i < off + n; i++) buf[i] *= world;
  }

  /** This rank's values as every rank's chunk. */
  @Override
  public void allGather(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    check();
    LocalCommunicator.checkRange("allGather", "send", send, sendOff, n, 1);
    LocalCommunicator.checkRange("allGather", "recv", recv, recvOff, n, world);
    for (int q = 0; q < world; q++) System.arraycopy(send, sendOff, recv, recvOff + q * n, n);
  }

  /** R times this rank's own chunk (chunk 0). */
  @Override
  public void reduceScatter(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    check();
    LocalCommunicator.checkRange("reduceScatter", "send", send, sendOff, n, world);
    LocalCommunicator.checkRange("reduceScatter", "recv", recv, recvOff, n, 1);
    for (int i = 0; i < n; i++) recv[recvOff + i] = send[sendOff + i] * world;
  }

  /** Every peer sends this rank the chunk this rank sends itself (chunk 0). */
  @Override
  public void allToAll(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    check();
    LocalCommunicator.checkRange("allToAll", "send", send, sendOff, n, world);
    LocalCommunicator.checkRange("allToAll", "recv", recv, recvOff, n, world);
    for (int q = 0; q < world; q++) System.arraycopy(send, sendOff, recv, recvOff + q * n, n);
  }

  /** Every peer's payload for this rank is this rank's own ({@code send[0]}). */
  @Override
  public byte[][] allToAllBytes(byte[][] send) {
    check();
    if (send.length != world) {
      throw new IllegalArgumentException("allToAllBytes: " + send.length + " payloads for " + world + " ranks");
    }
    byte[][] out = new byte[world][];
    for (int q = 0; q < world; q++) out[q] = send[0].clone();
    return out;
  }

  @Override
  public byte[][] allToAllControl(byte[][] send) {
    return allToAllBytes(send);
  }

  @Override
  public void barrier() {
    check();
  }

  /** Nothing crosses a wire. */
  @Override
  public long bytesSent() {
    return 0;
  }

  @Override
  public void close() {
    closed = true;
  }

  private void check() {
    if (closed) throw new CollectiveException("mirrored communicator of " + world + " ranks is closed");
  }
}
