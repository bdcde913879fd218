package dev.taco.collective;

import dev.taco.codec.MalformedPayloadException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * One rank of a {@link LocalGroup}: the exact, in-process transport of DESIGN §4.
 *
 * <p>The float collectives are exact float32: values travel as raw little-endian float32 (4 bytes per element,
 * no header), sums are accumulated in float32 in rank order {@code 0..R-1} by the rank that owns the chunk and
 * then gathered, so every rank gets bit-identical results. All-reduce is two-shot (reduce-scatter then
 * all-gather of {@code ceil(n/R)}-value chunks), so each rank sends about {@code (R-1)/R * n} elements in each
 * phase, as a ring or two-shot NCCL all-reduce would; {@link #bytesSent()} counts exactly those bytes (own
 * chunks never count).
 *
 * <p>A communicator must be used by one thread at a time. Collectives throw {@link CollectiveException} if the
 * group is aborted or times out, and {@link IllegalArgumentException} for bad arguments.
 */
public final class LocalCommunicator extends ChunkedCommunicator {

  private final LocalGroup group;
  private final int rank;
  private long round;
  private volatile long bytesSent;
  private boolean closed;

  LocalCommunicator(LocalGroup group, int rank) {
    super(RawFloat32.INSTANCE, 1);
    this.group = group;
    this.rank = rank;
  }

  LocalGroup group() {
    return group;
  }

  @Override
  String label() {
    return "local";
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
   * All-to-all of byte payloads (DESIGN §4): {@code send[p]} is copied to rank p; element q of the result is the
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
    if (send == null) {
      throw new IllegalArgumentException("allToAllBytes: send is null");
    }
    if (send.length != worldSize()) {
      throw new IllegalArgumentException(
          "allToAllBytes: send has " + send.length + " payloads, needs worldSize = " + worldSize());
    }
    long bytes = 0;
    for (int p = 0; p < send.length; p++) {
      if (send[p] == null) {
        throw new IllegalArgumentException("allToAllBytes: send[" + p + "] is null");
      }
      bytes += p == rank ? 0 : send[p].length;
    }
    checkOpen("allToAllBytes");
    byte[][] recv = group.exchange(rank, round++, send, "allToAllBytes");
    bytesSent += bytes;
    return recv;
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

  /** The exact wire format: the real values as little-endian float32, no header, no padding. */
  private enum RawFloat32 implements ChunkCoder {
    INSTANCE;

    @Override
    public byte[] encode(float[] x, int off, int real, int padded) {
      byte[] out = new byte[real * Float.BYTES];
      view(out).put(x, off, real);
      return out;
    }

    @Override
    public void decode(byte[] payload, float[] out, int off, int real, int padded, boolean accumulate) {
      if (payload.length != real * Float.BYTES) {
        throw new MalformedPayloadException(
            "raw float32 chunk: expected " + real * Float.BYTES + " bytes, got " + payload.length);
      }
      FloatBuffer in = view(payload);
      if (!accumulate) {
        in.get(out, off, real);
        return;
      }
      for (int i = 0; i < real; i++) {
        out[off + i] += in.get(i);
      }
    }

    private static FloatBuffer view(byte[] bytes) {
      return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
    }
  }
}
