package dev.taco.collective;

import dev.taco.codec.Codec;
import dev.taco.codec.MalformedPayloadException;
import java.util.Objects;

/**
 * The compressed collectives of DESIGN §4: wraps any {@link Communicator} and sends every float chunk through
 * its {@link Communicator#allToAllBytes} as a {@link Codec} payload (DESIGN §3).
 *
 * <ul>
 *   <li>all-reduce (two-shot): the {@code n} values are split into {@code R} chunks of
 *       {@code c = ceil(n/R)} values (rounded up to a multiple of {@code chunkAlign}); the tail is zero-padded so
 *       any {@code n >= 0} works, and chunks lying wholly in the padding are not sent. Compress each chunk, send
 *       chunk p to rank p, decompress-reduce the owned chunk with float32 accumulation in rank order (the owner's
 *       own contribution is used exactly), re-compress the owned sum once, all-gather that payload, decompress.
 *       Every rank, the owner included, decodes the same payload for each chunk, so all ranks end with
 *       bit-identical results. Each peer's value is quantised twice.</li>
 *   <li>all-gather: compress the own shard, all-gather, decompress (the own shard too, from its own payload).</li>
 *   <li>reduce-scatter: compress each chunk, all-to-all, decompress-reduce in rank order.</li>
 *   <li>all-to-all: compress each chunk for a peer; the own chunk is copied exactly.</li>
 * </ul>
 *
 * <p>Chunks go to the codec as {@code 1 x len} tensors (rows = 1, cols = len); {@code n = 0} is a no-op without
 * communication. {@link #bytesSent()}, {@link #barrier()}, {@link #allToAllBytes} and the rank numbers are the
 * inner communicator's. Errors: {@link IllegalArgumentException} for bad arguments or a non-finite input the codec
 * rejects, {@link MalformedPayloadException} for a payload that fails validation, {@link CollectiveException} from
 * the inner transport, with this operation added to the message.
 */
public final class CompressedCommunicator extends ChunkedCommunicator {

  private final Communicator inner;
  private final Codec codec;

  /**
   * Wraps {@code inner} with {@code codec}, chunks unaligned.
   *
   * @throws NullPointerException if an argument is null
   */
  public CompressedCommunicator(Communicator inner, Codec codec) {
    this(inner, codec, 1);
  }

  /**
   * Wraps {@code inner} with {@code codec}; the all-reduce chunk length is a multiple of {@code chunkAlign}
   * values (e.g. the codec's group size G, so that no group straddles two chunks).
   *
   * @throws IllegalArgumentException if {@code chunkAlign < 1}
   * @throws NullPointerException if {@code inner} or {@code codec} is null
   */
  public CompressedCommunicator(Communicator inner, Codec codec, int chunkAlign) {
    super(new CodecCoder(Objects.requireNonNull(codec, "codec")), chunkAlign);
    this.inner = Objects.requireNonNull(inner, "inner");
    this.codec = codec;
  }

  /** The wrapped transport. */
  public Communicator inner() {
    return inner;
  }

  /** The codec every chunk goes through. */
  public Codec codec() {
    return codec;
  }

  @Override
  String label() {
    return "compressed[" + codec.name() + "]";
  }

  /** The inner communicator's rank. */
  @Override
  public int rank() {
    return inner.rank();
  }

  /** The inner communicator's world size R. */
  @Override
  public int worldSize() {
    return inner.worldSize();
  }

  /** The inner communicator's byte all-to-all, unchanged (payloads are not re-encoded). */
  @Override
  public byte[][] allToAllBytes(byte[][] send) {
    return inner.allToAllBytes(send);
  }

  /** The inner communicator's barrier. */
  @Override
  public void barrier() {
    inner.barrier();
  }

  /** Bytes the inner transport sent to other ranks: the compressed payloads, headers included. */
  @Override
  public long bytesSent() {
    return inner.bytesSent();
  }

  /** Closes the inner communicator. */
  @Override
  public void close() {
    inner.close();
  }

  /** Encodes a whole (zero-padded) chunk as one {@code 1 x padded} codec tensor. */
  private record CodecCoder(Codec codec) implements ChunkCoder {

    @Override
    public byte[] encode(float[] x, int off, int real, int padded) {
      byte[] out = new byte[codec.encodedSize(1, padded)];
      codec.encode(x, off, 1, padded, out, 0);
      return out;
    }

    @Override
    public void decode(byte[] payload, float[] out, int off, int real, int padded, boolean accumulate) {
      int expected = codec.encodedSize(1, padded);
      if (payload.length != expected) { // checked before decoding, so a bad peer cannot write past the chunk
        throw new MalformedPayloadException(codec.name() + " chunk of " + padded + " values: expected "
            + expected + " bytes, got " + payload.length);
      }
      int got = codec.decode(payload, 0, payload.length, out, off, accumulate);
      if (got != padded) {
        throw new MalformedPayloadException(
            codec.name() + " chunk: expected " + padded + " values, payload holds " + got);
      }
    }
  }
}
