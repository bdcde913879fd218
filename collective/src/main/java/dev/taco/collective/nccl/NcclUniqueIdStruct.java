package dev.taco.collective.nccl;

import com.sun.jna.Structure;

/**
 * JNA mapping of {@code ncclUniqueId} (nccl.h 2.19 and 2.28: {@code typedef struct { char
 * internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;}, 128 bytes, alignment 1, {@code internal} at offset 0).
 * {@code ncclCommInitRankConfig} takes it BY VALUE: use {@link ByValue} (on x86-64 a struct larger than 16 bytes is
 * copied to the stack, which libffi does for JNA).
 */
@Structure.FieldOrder({"internal"})
public class NcclUniqueIdStruct extends Structure {
  /** The id's bytes ({@code char internal[128]}). */
  public byte[] internal = new byte[UniqueId.BYTES];

  /** An all-zero id. */
  public NcclUniqueIdStruct() {}

  /** @param id the id to copy in */
  public NcclUniqueIdStruct(UniqueId id) {
    internal = id.bytes();
  }

  /** The by-value form, for {@code ncclCommInitRankConfig(..., ncclUniqueId commId, ...)}. */
  public static final class ByValue extends NcclUniqueIdStruct implements Structure.ByValue {
    /** An all-zero id. */
    public ByValue() {}

    /** @param id the id to copy in */
    public ByValue(UniqueId id) {
      super(id);
    }
  }

  /** @return the byte offset of a field in the native layout (for layout tests) */
  int offsetOf(String field) {
    return fieldOffset(field);
  }
}
