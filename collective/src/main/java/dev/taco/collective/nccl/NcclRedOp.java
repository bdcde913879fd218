package dev.taco.collective.nccl;

/** The NCCL reductions TACO uses, with their {@code ncclRedOp_t} codes (nccl.h: {@code ncclSum = 0}, {@code ncclMax = 2}). */
public enum NcclRedOp {
  /** {@code ncclSum}. */
  SUM(0),
  /** {@code ncclMax}: the group's absmax of {@code nccl-fp8}'s scale. */
  MAX(2);

  private final int code;

  NcclRedOp(int code) {
    this.code = code;
  }

  /** @return the {@code ncclRedOp_t} value */
  public int code() {
    return code;
  }
}
