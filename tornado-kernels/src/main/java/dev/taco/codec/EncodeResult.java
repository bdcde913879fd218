package dev.taco.codec;

/**
 * What {@link AbstractCodec#encodeWithStats} reports besides the payload.
 *
 * @param bytes payload size in bytes (header included)
 * @param saturated number of values whose scaled magnitude exceeded the target format's largest finite value
 *     and were clipped to it (FP8 max for taco, +-127 for int8, bf16 max for none; 0 for fp32)
 */
public record EncodeResult(int bytes, long saturated) {}
