package dev.taco.collective;

/**
 * One rank's handle on a group of {@link #worldSize()} ranks that run the same sequence of collectives, in the
 * style of an NCCL communicator or a {@code torch.distributed} process group (docs/design.md §4).
 *
 * <p>All buffers are float32 and all counts are in elements. Every rank must call the same collectives in the
 * same order with the same counts. A collective that cannot complete (a peer failed, was aborted or timed out)
 * throws {@link CollectiveException} naming the rank and the operation; it never hangs forever.
 */
public interface Communicator extends AutoCloseable {

  /** This rank, in {@code [0, worldSize)}. */
  int rank();

  /** Number of ranks in the group (the tensor-parallel size R). */
  int worldSize();

  /**
   * Sum all-reduce, in place: afterwards {@code buf[off .. off+n)} holds the element-wise sum over ranks, the same
   * bits on every rank.
   */
  void allReduce(float[] buf, int off, int n);

  /**
   * All-gather: rank r's {@code send[sendOff .. sendOff+n)} lands in {@code recv[recvOff + r*n ..]} on every rank
   * ({@code recv} holds {@code worldSize*n} values, rank-major).
   */
  void allGather(float[] send, int sendOff, int n, float[] recv, int recvOff);

  /**
   * Sum reduce-scatter: {@code send} holds {@code worldSize*n} values (chunk p for rank p); rank r receives in
   * {@code recv[recvOff .. recvOff+n)} the sum over ranks of their chunk r.
   */
  void reduceScatter(float[] send, int sendOff, int n, float[] recv, int recvOff);

  /**
   * All-to-all: chunk p of {@code send} ({@code n} values at {@code sendOff + p*n}) goes to rank p, and chunk q
   * of {@code recv} comes from rank q.
   */
  void allToAll(float[] send, int sendOff, int n, float[] recv, int recvOff);

  /**
   * All-to-all of byte payloads of any length: {@code send[p]} goes to rank p; the result's element q came from
   * rank q ({@code send[rank()]} is returned as is, without a copy on the wire). The primitive beneath the
   * compressed collectives.
   */
  byte[][] allToAllBytes(byte[][] send);

  /**
   * {@link #allToAllBytes} for control messages (the check that every rank calls the same collective): the same
   * exchange, not counted in {@link #bytesSent()}, which counts the collectives' payloads.
   */
  byte[][] allToAllControl(byte[][] send);

  /** Blocks until every rank has entered the barrier. */
  void barrier();

  /** Bytes this rank has sent to other ranks since it was created (what the collectives put on the wire). */
  long bytesSent();

  @Override
  void close();
}
