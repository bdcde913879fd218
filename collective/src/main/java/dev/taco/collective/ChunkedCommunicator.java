package dev.taco.collective;

import java.util.Arrays;
import java.util.function.Supplier;

/**
 * The float collectives of DESIGN §4, written once on top of {@link #allToAllBytes}: every chunk that crosses
 * ranks is turned into a byte payload by a {@link ChunkCoder} (raw float32 for the exact transport, a codec for
 * {@link CompressedCommunicator}) and back.
 *
 * <p>All-reduce is two-shot: the {@code n} values are viewed as {@code R} chunks of {@code c} values (the last
 * ones padded with zeros, chunks lying wholly in the padding are never sent); phase 1 sends chunk {@code p} to
 * rank {@code p}, which sums the {@code R} contributions in rank order {@code 0..R-1} with float32 accumulation;
 * phase 2 encodes that owned sum once and sends the same payload to every rank, and every rank, the owner
 * included, decodes it, so all ranks hold the same bits.
 */
abstract class ChunkedCommunicator implements Communicator {

  private static final byte[] EMPTY = new byte[0];

  private final ChunkCoder coder;
  private final int chunkAlign;

  /**
   * @param coder turns chunks into payloads and back
   * @param chunkAlign the all-reduce chunk length is rounded up to a multiple of this (1 = no rounding)
   */
  ChunkedCommunicator(ChunkCoder coder, int chunkAlign) {
    if (chunkAlign < 1) {
      throw new IllegalArgumentException("chunkAlign must be >= 1, got " + chunkAlign);
    }
    this.coder = coder;
    this.chunkAlign = chunkAlign;
  }

  /** Short name used in error messages, e.g. {@code "local"} or {@code "compressed[bf16]"}. */
  abstract String label();

  /**
   * Two-shot sum all-reduce in place over {@code buf[off .. off+n)} (float32, n elements, any {@code n >= 0};
   * {@code n = 0} is a no-op without communication); see the class comment (DESIGN §4).
   *
   * @throws IllegalArgumentException if {@code n < 0}, {@code buf} is null or too short, or the coder rejects the
   *     input
   * @throws CollectiveException if the transport fails, is aborted or times out
   */
  @Override
  public void allReduce(float[] buf, int off, int n) {
    String op = "allReduce(n=" + n + ")";
    checkRange(op, "buf", buf, off, n, 1);
    if (n == 0) {
      return;
    }
    int world = worldSize();
    int me = rank();
    int c = chunkLength(n, world, chunkAlign);
    float[] work = new float[world * c];
    System.arraycopy(buf, off, work, 0, n);

    withContext(op, () -> {
      // Phase 1 (reduce-scatter): chunk p to rank p; decompress-reduce the owned chunk in rank order.
      byte[][] out = new byte[world][];
      for (int p = 0; p < world; p++) {
        int real = realLength(n, c, p);
        out[p] = p == me || real == 0 ? EMPTY : coder.encode(work, p * c, real, c);
      }
      byte[][] in = allToAllBytes(out);
      int mine = realLength(n, c, me);
      float[] acc = new float[c];
      if (mine > 0) {
        for (int q = 0; q < world; q++) {
          if (q == me) {
            for (int i = 0; i < c; i++) {
              acc[i] += work[me * c + i];
            }
          } else {
            coder.decode(in[q], acc, 0, mine, c, true);
          }
        }
        Arrays.fill(acc, mine, c, 0f); // keep the padding zero before re-encoding
      }
      // Phase 2 (all-gather): one payload per owned chunk, decoded by every rank including the owner.
      byte[] reduced = mine == 0 ? EMPTY : coder.encode(acc, 0, mine, c);
      byte[][] gathered = allToAllBytes(filled(world, reduced));
      for (int q = 0; q < world; q++) {
        int real = realLength(n, c, q);
        if (real > 0) {
          coder.decode(gathered[q], work, q * c, real, c, false);
        }
      }
      return null;
    });
    System.arraycopy(work, 0, buf, off, n);
  }

  /**
   * All-gather of {@code n} float32 values per rank into {@code recv[recvOff .. recvOff + R*n)}, rank-major; every
   * rank decodes every shard, its own included, from the payload that went on the wire (DESIGN §4).
   *
   * @throws IllegalArgumentException if {@code n < 0} or an array is null or too short
   * @throws CollectiveException if the transport fails, is aborted or times out
   */
  @Override
  public void allGather(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    String op = "allGather(n=" + n + ")";
    int world = worldSize();
    checkRange(op, "send", send, sendOff, n, 1);
    checkRange(op, "recv", recv, recvOff, n, world);
    if (n == 0) {
      return;
    }
    byte[] mine = coder.encode(send, sendOff, n, n);
    byte[][] in = withContext(op, () -> allToAllBytes(filled(world, mine)));
    for (int q = 0; q < world; q++) {
      coder.decode(in[q], recv, recvOff + q * n, n, n, false);
    }
  }

  /**
   * Sum reduce-scatter: {@code send} holds {@code R*n} float32 values, chunk p for rank p; this rank receives in
   * {@code recv[recvOff .. recvOff+n)} the sum of everybody's chunk {@code rank()}, accumulated in float32 in rank
   * order (DESIGN §4).
   *
   * @throws IllegalArgumentException if {@code n < 0} or an array is null or too short
   * @throws CollectiveException if the transport fails, is aborted or times out
   */
  @Override
  public void reduceScatter(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    String op = "reduceScatter(n=" + n + ")";
    int world = worldSize();
    int me = rank();
    checkRange(op, "send", send, sendOff, n, world);
    checkRange(op, "recv", recv, recvOff, n, 1);
    if (n == 0) {
      return;
    }
    byte[][] in = withContext(op, () -> allToAllBytes(encodeChunks(send, sendOff, n)));
    float[] acc = new float[n];
    for (int q = 0; q < world; q++) {
      if (q == me) {
        for (int i = 0; i < n; i++) {
          acc[i] += send[sendOff + me * n + i];
        }
      } else {
        coder.decode(in[q], acc, 0, n, n, true);
      }
    }
    System.arraycopy(acc, 0, recv, recvOff, n);
  }

  /**
   * All-to-all of {@code n} float32 values per rank pair: chunk p of {@code send} goes to rank p, chunk q of
   * {@code recv} comes from rank q; the own chunk is copied exactly (DESIGN §4).
   *
   * @throws IllegalArgumentException if {@code n < 0} or an array is null or too short
   * @throws CollectiveException if the transport fails, is aborted or times out
   */
  @Override
  public void allToAll(float[] send, int sendOff, int n, float[] recv, int recvOff) {
    String op = "allToAll(n=" + n + ")";
    int world = worldSize();
    int me = rank();
    checkRange(op, "send", send, sendOff, n, world);
    checkRange(op, "recv", recv, recvOff, n, world);
    if (n == 0) {
      return;
    }
    byte[][] in = withContext(op, () -> allToAllBytes(encodeChunks(send, sendOff, n)));
    System.arraycopy(send, sendOff + me * n, recv, recvOff + me * n, n); // own chunk never leaves the rank
    for (int q = 0; q < world; q++) {
      if (q != me) {
        coder.decode(in[q], recv, recvOff + q * n, n, n, false);
      }
    }
  }

  /** Encodes chunk p of {@code send} for every peer p; the own slot is an empty payload. */
  private byte[][] encodeChunks(float[] send, int sendOff, int n) {
    byte[][] out = new byte[worldSize()][];
    for (int p = 0; p < out.length; p++) {
      out[p] = p == rank() ? EMPTY : coder.encode(send, sendOff + p * n, n, n);
    }
    return out;
  }

  private <T> T withContext(String op, Supplier<T> body) {
    try {
      return body.get();
    } catch (CollectiveException e) {
      throw new CollectiveException(label() + " " + op + " on rank " + rank() + ": " + e.getMessage(), e);
    }
  }

  private static byte[][] filled(int world, byte[] payload) {
    byte[][] out = new byte[world][];
    Arrays.fill(out, payload);
    return out;
  }

  /** All-reduce chunk length: {@code ceil(n / world)} rounded up to a multiple of {@code align}. */
  static int chunkLength(int n, int world, int align) {
    long c = (n + (long) world - 1) / world;
    c = (c + align - 1) / align * align;
    if (c * world > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException("allReduce: n=" + n + " padded to " + world + " x " + c + " is too large");
    }
    return (int) c;
  }

  /** Number of real (not padding) values in chunk {@code p} of length {@code c} of an {@code n}-value buffer. */
  static int realLength(int n, int c, int p) {
    return (int) Math.max(0, Math.min(c, n - (long) p * c));
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
}
