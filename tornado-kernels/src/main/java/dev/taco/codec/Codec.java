package dev.taco.codec;

/**
 * A lossy or lossless encoding of a float32 tensor into a self-describing byte payload, used on the wire of
 * the tensor-parallel collectives (docs/design.md §3).
 *
 * <p>The tensor is {@code rows x cols} float32 values, row-major, starting at {@code x[off]}. A payload made by
 * {@link #encode} carries its own header (magic, version, codec id, shape, group size, format, checksum), so
 * {@link #decode} needs nothing but the bytes. Implementations are stateless and thread-safe.
 *
 * <p><b>NaN/Inf policy.</b> By default ({@code nonfinite=refuse}) {@link #encode} refuses a tensor holding NaN or
 * +-Inf with an {@link IllegalArgumentException} naming the first such value's index, row and column (a site that
 * produces them has a bug worth stopping for). With {@code nonfinite=propagate} in the codec spec
 * ({@link Codecs#byName}, e.g. {@code taco,nonfinite=propagate}) the tensor is sent: every scale is computed from
 * the <em>finite</em> values only, so the other values of the group/tensor keep their normal error; the header gets
 * flag 0x80; a NaN decodes to NaN in its position; +-Inf decodes to +-Inf where the wire format has infinities
 * ({@code fp32}, {@code none}, taco with E5M2) and to NaN where it has none (E4M3 and the integer codecs, whose
 * marker codes -128 / -8 / E4M3 NaN all mean NaN). Codecs with a Hadamard transform send the affected groups
 * ({@code hadamard-int8}) or rows (taco) untransformed, so that one NaN does not poison its whole group. A finite
 * tensor gives the same payload under both policies. Decoding accepts flagged payloads whatever the decoder's own
 * policy (the payload describes itself).
 */
public interface Codec {

  /** The codec's base name as the command line spells it ({@code none}, {@code taco}, ...; see {@link Codecs#names}). */
  String name();

  /**
   * Exact size in bytes of the payload {@link #encode} writes for a {@code rows x cols} tensor.
   *
   * @throws IllegalArgumentException if {@code rows} or {@code cols} is not positive
   */
  int encodedSize(int rows, int cols);

  /**
   * Encodes {@code x[off .. off + rows*cols)} into {@code out[outOff ..]}.
   *
   * @return the number of bytes written, equal to {@link #encodedSize}
   * @throws IllegalArgumentException for non-positive sizes, a too-small output, or (policy refuse) a NaN/Inf input
   *     (the message names the index, row and column of the first non-finite value; the payload's bytes in
   *     {@code out} are then unspecified: an encoder may find the value only as it writes the body)
   */
  int encode(float[] x, int off, int rows, int cols, byte[] out, int outOff);

  /**
   * Decodes the payload in {@code in[inOff .. inOff + len)} into {@code out[outOff ..]}, writing {@code rows*cols}
   * values; when {@code accumulate} is true the decoded values are added to {@code out} instead (the
   * decompress-reduce step of a compressed reduction, fp32 accumulation).
   *
   * @return the number of values written, {@code rows*cols} from the header
   * @throws MalformedPayloadException if the payload is truncated, has a bad magic, version, codec id, checksum,
   *     shape or group size; nothing is written to {@code out} in that case
   */
  int decode(byte[] in, int inOff, int len, float[] out, int outOff, boolean accumulate);

  /**
   * Decompress-reduce, the reduce step of a compressed reduce-scatter or all-reduce (docs/design.md §3.5, §4): {@code
   * out[outOff + i] = (sum over q of decode(payloads[q])[i]) + own[ownOff + i]} for {@code i < rows*cols}, over the
   * non-null payloads in index order (the caller passes them by source rank, its own slot null), float32 accumulation
   * from +0. Codecs with an orthonormal transform sum in the transformed domain and apply the inverse transform once
   * instead of once per payload ({@link TacoCodec}); the result then differs from decoding each payload and summing
   * by float rounding only.
   *
   * @param payloads whole payloads (each array is one payload), null entries skipped
   * @param own the caller's exact contribution, {@code rows x cols} from {@code ownOff}, or null for none
   * @param out {@code rows x cols} from {@code outOff}; may be {@code own} at the same offset
   * @throws MalformedPayloadException if a payload fails validation, holds another shape than {@code rows x cols} or
   *     disagrees with the others on group size, format or transform; {@code out} is then unchanged
   * @throws IllegalArgumentException for bad sizes or ranges, or {@code out} overlapping {@code own} at another offset
   */
  void decodeReduce(byte[][] payloads, int rows, int cols, float[] own, int ownOff, float[] out, int outOff);
}
