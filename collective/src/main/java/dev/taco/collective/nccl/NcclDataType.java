package dev.taco.collective.nccl;

/**
 * The NCCL element types TACO moves, with their {@code ncclDataType_t} codes (nccl.h, unchanged from 2.19 to 2.28:
 * {@code ncclUint8 = 1}, {@code ncclFloat32 = 7}, {@code ncclBfloat16 = 9}).
 */
public enum NcclDataType {
  /** {@code ncclUint8}: bytes (FP8 payloads, scales, any opaque data). */
  UINT8(1, 1, "uint8"),
  /** {@code ncclFloat32}: IEEE binary32. */
  FLOAT32(7, 4, "fp32"),
  /** {@code ncclBfloat16}: bfloat16, the upper half of a binary32. */
  BFLOAT16(9, 2, "bf16");

  private final int code;
  private final int bytes;
  private final String label;

  NcclDataType(int code, int bytes, String label) {
    this.code = code;
    this.bytes = bytes;
    this.label = label;
  }

  /** @return the {@code ncclDataType_t} value */
  public int code() {
    return code;
  }

  /** @return bytes per element */
  public int bytes() {
    return bytes;
  }

  /** @return the short name used in messages: {@code "uint8"}, {@code "fp32"}, {@code "bf16"} */
  public String label() {
    return label;
  }
}
