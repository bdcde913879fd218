package dev.taco.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * One rank of a {@link LocalGroup}: the exact, in-process transport of docs/design.md §4.
 *
 * <p>The float collectives are exact float32, written once in {@link TwoShot} with the {@link Plan#EXACT} plan over a
 * {@link HostWire} on this communicator: values travel as raw little-endian float32 (4 bytes per element, no header);
 * the all-reduce is two-shot (each rank owns {@code ceil(n/R)} values, sums its peers' chunks in rank order, adds its
 * own and sends that sum to every rank), so every rank gets bit-identical results and sends about {@code (R-1)/R * n}
 * elements in each phase, as a two-shot NCCL all-reduce would; {@link #bytesSent()} counts exactly those bytes (own
 * chunks never count).
 *
 * <p>A communicator must be used by one thread at a time. Collectives throw {@link CollectiveException} if the
 * group is aborted or times out, and {@link IllegalArgumentException} for bad arguments.
 */
public final class LocalCommunicator implements Communicator {

  private final LocalGroup group;
  private final int rank;
  private final HostWire wire = new HostWire(this);
  private long round;
  private volatile long bytesSent;
  private boolean closed;

  LocalCommunicator(LocalGroup group, int rank) {
    this.group = group;
    this.rank = rank;
  }

  LocalGroup group() {
    return group;
  }

  /** This rank, in {@code [0, worldSize)}. */
  @Override
  public int rank() {
    return rank;
  }

  /** Number of ranks in the group. */
  @Override
  public int worldSize() {
    return group.worldSize();
  }

  /**
   * Two-shot sum all-reduce in place over {@code buf[off .. off+n)} (float32, any {@code n >= 0}; {@code n = 0} is a
   * no-op without communication), exact (see the class comment).
   *
   * @throws IllegalArgumentException if {@code n < 0} or {@code buf} is null or too short
   * @throws CollectiveException if the group is aborted, a peer failed or this rank times out
   */
  @Override
  public void allReduce(float[] buf, int off, int n) {
    String op = "allReduce(n=" + n + ")";
    checkRange(op, "buf", buf, off, n, 1);
    checkOpen(op);
    if (n == 0) {
      return;
    }
    float[] work = java.util.Arrays.copyOfRange(buf, off, off + n);
    withContext(op, () -> TwoShot.allReduce(wire, Plan.EXACT, work, n, 1));
    System.arraycopy(work, 0, buf, off, n);
  }

  /**
   * All-gather of {@code n} float32 values per rank into {@code recv[recvOff .. recvOff + R*n)}, rank-major, exact.
   *
   * @throws IllegalArgumentException if {@code n < 0} or an array is null or too short
   * @throws CollectiveException if the group is aborted, a peer failed or this rank times out
   */
  @Override
  public void allGather(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    String op = "allGather(n=" + n + ")";
    checkRange(op, "send", send, sendOff, n, 1);
    checkRange(op, "recv", recv, recvOff, n, worldSize());
    checkOpen(op);
    if (n == 0) {
      return;
    }
    float[] shard = java.util.Arrays.copyOfRange(send, sendOff, sendOff + n);
    float[] out = new float[worldSize() * n];
    withContext(op, () -> TwoShot.allGather(wire, Plan.EXACT, shard, n, 1, out));
    System.arraycopy(out, 0, recv, recvOff, out.length);
  }

  /**
   * Sum reduce-scatter: {@code send} holds {@code R*n} float32 values, chunk p for rank p; this rank receives in
   * {@code recv[recvOff .. recvOff+n)} the sum of everybody's chunk {@code rank()} (its peers' in rank order, then its
   * own), exact.
   *
   * @throws IllegalArgumentException if {@code n < 0} or an array is null or too short
   * @throws CollectiveException if the group is aborted, a peer failed or this rank times out
   */
  @Override
  public void reduceScatter(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    String op = "reduceScatter(n=" + n + ")";
    int world = worldSize();
    checkRange(op, "send", send, sendOff, n, world);
    checkRange(op, "recv", recv, recvOff, n, 1);
    checkOpen(op);
    if (n == 0) {
      return;
    }
    float[] x = java.util.Arrays.copyOfRange(send, sendOff, sendOff + world * n);
    float[] shard = new float[n];
    withContext(op, () -> TwoShot.reduceScatter(wire, Plan.EXACT, x, world * n, 1, shard));
    System.arraycopy(shard, 0, recv, recvOff, n);
  }

  /**
   * All-to-all of {@code n} float32 values per rank pair: chunk p of {@code send} goes to rank p, chunk q of
   * {@code recv} comes from rank q; the own chunk is copied.
   *
   * @throws IllegalArgumentException if {@code n < 0} or an array is null or too short
   * @throws CollectiveException if the group is aborted, a peer failed or this rank times out
   */
  @Override
  public void allToAll(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    String op = "allToAll(n=" + n + ")";
    int world = worldSize();
    checkRange(op, "send", send, sendOff, n, world);
    checkRange(op, "recv", recv, recvOff, n, world);
    checkOpen(op);
    if (n == 0) {
      return;
    }
    byte[][] out = new byte[world][];
    for (int p = 0; p < world; p++) {
      out[p] = new byte[p == rank ? 0 : n * Float.BYTES];
      if (p != rank) {
        view(out[p]).put(send, sendOff + p * n, n);
      }
    }
    byte[][] in = withContext(op, () -> allToAllBytes(out));
    for (int q = 0; q < world; q++) { // every chunk checked before recv is written
      if (q != rank && in[q].length != n * Float.BYTES) {
        throw new CollectiveException(op + " on rank " + rank + ": rank " + q + " sent " + in[q].length
            + " bytes, expected " + n * Float.BYTES + " (every rank must call allToAll with the same n); recv is"
            + " unchanged");
      }
    }
    for (int q = 0; q < world; q++) {
      if (q == rank) {
        System.arraycopy(send, sendOff + q * n, recv, recvOff + q * n, n);
      } else {
        view(in[q]).get(recv, recvOff + q * n, n);
      }
    }
  }

  /**
   * All-to-all of byte payloads (docs/design.md §4): {@code send[p]} is copied to rank p; element q of the result is the
   * copy rank q sent here, which this rank now owns; element {@code rank()} is {@code send[rank()]} itself. Adds
   * the lengths of the payloads for other ranks to {@link #bytesSent()}.
   *
   * @param send one payload per rank, {@code worldSize()} non-null arrays (any lengths, zero included)
   * @return {@code worldSize()} payloads by source rank
   * @throws IllegalArgumentException if {@code send} is null, has the wrong length or a null entry
   * @throws CollectiveException if the group is aborted, a peer failed or this rank times out
   */
  @Override
  public byte[][] allToAllBytes(byte[][] send) {
    long bytes = checkPayloads(send, "allToAllBytes");
    byte[][] recv = group.exchange(rank, round++, send, "allToAllBytes");
    bytesSent += bytes;
    return recv;
  }

  /**
   * {@link #allToAllBytes} without counting the bytes (control messages).
   *
   * @throws IllegalArgumentException as {@link #allToAllBytes}
   * @throws CollectiveException if the group is aborted, a peer failed or this rank times out
   */
  @Override
  public byte[][] allToAllControl(byte[][] send) {
    checkPayloads(send, "allToAllControl");
    return group.exchange(rank, round++, send, "allToAllControl");
  }

  /** Validates an all-to-all's payloads; returns the bytes they put on the wire (the other ranks' ones). */
  private long checkPayloads(byte[][] send, String op) {
    if (send == null) {
      throw new IllegalArgumentException(op + ": send is null");
    }
    if (send.length != worldSize()) {
      throw new IllegalArgumentException(
          op + ": send has " + send.length + " payloads, needs worldSize = " + worldSize());
    }
    long bytes = 0;
    for (int p = 0; p < send.length; p++) {
      if (send[p] == null) {
        throw new IllegalArgumentException(op + ": send[" + p + "] is null");
      }
      bytes += p == rank ? 0 : send[p].length;
    }
    checkOpen(op);
    return bytes;
  }

  /**
   * Blocks until every rank has entered the barrier.
   *
   * @throws CollectiveException if the group is aborted, a peer failed or this rank times out
   */
  @Override
  public void barrier() {
    checkOpen("barrier");
    group.await(rank, "barrier");
  }

  /** Bytes this rank has put on the wire for other ranks since creation (payload bytes; 4 per float32). */
  @Override
  public long bytesSent() {
    return bytesSent;
  }

  /**
   * Aborts the whole group: every rank's pending and later collectives throw {@link CollectiveException} whose
   * message names this rank and {@code cause}.
   */
  public void abort(Throwable cause) {
    group.abort(rank, "rank " + rank + " aborted the group: " + cause);
  }

  /**
   * Closes this rank; idempotent. Later collectives on it throw {@link CollectiveException}, and peers waiting
   * for it in a collective are aborted rather than left to time out.
   */
  @Override
  public void close() {
    if (!closed) {
      closed = true;
      group.close(rank);
    }
  }

  private void checkOpen(String op) {
    if (closed) {
      throw new CollectiveException(op + " on rank " + rank + ": the communicator is closed");
    }
  }

  private <T> T withContext(String op, java.util.function.Supplier<T> body) {
    try {
      return body.get();
    } catch (CollectiveException e) {
      throw new CollectiveException("local " + op + " on rank " + rank + ": " + e.getMessage(), e);
    }
  }

  private void withContext(String op, Runnable body) {
    withContext(op, () -> {
      body.run();
      return null;
    });
  }

  /**
   * Checks that {@code arr[off .. off + count*n)} exists.
   *
   * @throws IllegalArgumentException naming the operation and the argument
   */
  static void checkRange(String op, String name, float[] arr, int off, int n, int count) {
    if (n < 0) {
      throw new IllegalArgumentException(op + ": n must be >= 0, got " + n);
    }
    if (arr == null) {
      throw new IllegalArgumentException(op + ": " + name + " is null");
    }
    long need = (long) n * count;
    if (off < 0 || off + need > arr.length) {
      throw new IllegalArgumentException(
          op + ": " + name + " too short: needs " + need + " values from offset " + off + ", has length "
              + arr.length);
    }
  }

  private static FloatBuffer view(byte[] bytes) {
    return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
  }
}
