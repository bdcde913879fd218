package dev.taco.collective.nccl;

/**
 * The NCCL element types TACO moves, with their {@code ncclDataType_t} codes (nccl.h, unchanged from 2.19 to 2.28:
 * {@code ncclUint8 = 1}, {@code ncclFloat32 = 7}, {@code ncclBfloat16 = 9}; from 2.24 on {@code ncclFloat8e4m3 = 10}
 * and {@code ncclFloat8e5m2 = 11}, which NCCL reduces only on sm90 and later devices: {@link #fp8Problem}).
 */
public enum NcclDataType {
  /** {@code ncclUint8}: bytes (FP8 payloads, scales, any opaque data). */
  UINT8(1, 1, "uint8"),
  /** {@code ncclFloat32}: IEEE binary32. */
  FLOAT32(7, 4, "fp32"),
  /** {@code ncclBfloat16}: bfloat16, the upper half of a binary32. */
  BFLOAT16(9, 2, "bf16"),
  /** {@code ncclFloat8e4m3} (NCCL 2.24+): OCP E4M3, summed by NCCL in binary16 and rounded back at every hop. */
  FLOAT8_E4M3(10, 1, "fp8e4m3"),
  /** {@code ncclFloat8e5m2} (NCCL 2.24+): OCP E5M2, summed as {@link #FLOAT8_E4M3}. */
  FLOAT8_E5M2(11, 1, "fp8e5m2");

  /** {@code NCCL_VERSION(2,24,0)}: the first NCCL with the FP8 data types. */
  public static final int FP8_MIN_VERSION = 22400;

  /**
   * Why NCCL cannot reduce FP8 here, or null if it can: its FP8 data types are NCCL 2.24's, and its FP8 sums run on
   * sm90 and later only (older devices get {@code ncclInvalidArgument}, "FP8 reduction support begins with sm90 capable
   * devices"), so this is asked before the first call.
   *
   * @param version the loaded library's {@code NCCL_VERSION_CODE} (e.g. 22803)
   * @param major the GPU's compute capability, major (9 on H100)
   * @param minor the GPU's compute capability, minor
   * @return e.g. {@code "NCCL 2.21.5 has no FP8 data types (ncclFloat8e4m3 and ncclFloat8e5m2 came with NCCL 2.24)"}
   */
  public static String fp8Problem(int version, int major, int minor) {
    if (version < FP8_MIN_VERSION) {
      return "NCCL " + Nccl.versionString(version) + " has no FP8 data types (ncclFloat8e4m3 and ncclFloat8e5m2 came"
          + " with NCCL " + Nccl.versionString(FP8_MIN_VERSION) + ")";
    }
    if (major < 9) {
      return "NCCL reduces FP8 on sm90 and later GPUs only; this one is sm_" + major + minor;
    }
    return null;
  }

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

  /** @return the short name used in messages: {@code "uint8"}, {@code "fp32"}, {@code "bf16"}, {@code "fp8e4m3"}, ... */
  public String label() {
    return label;
  }
}
