package dev.taco.codec;

import dev.taco.kernels.Fp8;

/** The FP8 formats of the OCP 8-bit floating point specification, with their wire-format code. */
public enum Fp8Format {
  /** 4 exponent, 3 mantissa bits, max 448, NaN but no Inf (wire code 1). */
  E4M3(Fp8.E4M3),
  /** 5 exponent, 2 mantissa bits, max 57344, IEEE-like Inf/NaN (wire code 2). */
  E5M2(Fp8.E5M2);

  private final int code;

  Fp8Format(int code) {
    this.code = code;
  }

  /** The wire code (the header's {@code fp8 format} byte; also the {@link Fp8} kernel constant). */
  public int code() {
    return code;
  }
}
