package dev.taco.codec;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Bytes;
import dev.taco.kernels.simd.ElementLanes;

/**
 * {@code none}: bfloat16 on the wire, 2 bytes per element plus the header: what Megatron-LM sends under mixed
 * precision. Codes are rounded to nearest even; a finite value beyond bf16's max (about 3.3895e38) saturates to
 * +-max instead of becoming Inf (counted as saturated). Policy propagate sends NaN and +-Inf as bf16 NaN and +-Inf.
 * Layout and checks in {@link ElementCodec}.
 */
public final class Bf16Codec extends ElementCodec {

  /** Policy {@link NonFinite#REFUSE}. */
  public Bf16Codec() {
    this(NonFinite.REFUSE);
  }

  /** @param nonFinite NaN/Inf policy */
  public Bf16Codec(NonFinite nonFinite) {
    super(nonFinite);
  }

  @Override
  public String name() {
    return "none";
  }

  @Override
  protected int codecId() {
    return PayloadHeader.BF16;
  }

  @Override
  int width() {
    return 2;
  }

  @Override
  boolean put(byte[] out, int off, float v) {
    short c = Bf16.encodeSaturating(v);
    Bytes.putU16(out, off, c);
    return c != Bf16.encode(v);
  }

  @Override
  float get(byte[] in, int off) {
    return Bf16.decode((short) Bytes.getU16(in, off));
  }

  @Override
  ElementLanes lanes() {
    return ElementLanes.BF16;
  }
}
