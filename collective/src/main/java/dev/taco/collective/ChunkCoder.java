package dev.taco.collective;

/**
 * Turns one chunk of float32 values into the byte payload that goes on the wire, and back (DESIGN §4).
 *
 * <p>A chunk is {@code padded} values at {@code x[off ..]} of which the first {@code real} are data and the rest
 * are zeros (the padding that makes any tensor size split into equal chunks); {@code 1 <= real <= padded}. A coder
 * may send only the real values (exact transport) or all {@code padded} (a codec that wants equal chunks).
 */
interface ChunkCoder {

  /** Encodes the chunk {@code x[off .. off+padded)} into a fresh payload. */
  byte[] encode(float[] x, int off, int real, int padded);

  /**
   * Decodes a payload made by {@link #encode} with the same {@code real} and {@code padded} into
   * {@code out[off ..]}, adding to it when {@code accumulate} is set; writes at most {@code padded} values, of
   * which the first {@code real} are meaningful.
   *
   * @throws dev.taco.codec.MalformedPayloadException if the payload does not hold such a chunk
   */
  void decode(byte[] payload, float[] out, int off, int real, int padded, boolean accumulate);
}
