package dev.taco.collective.nccl;

import java.util.Arrays;
import java.util.Objects;

/**
 * An NCCL unique id ({@code ncclUniqueId}, nccl.h: {@code typedef struct { char internal[128]; } ncclUniqueId;},
 * {@code NCCL_UNIQUE_ID_BYTES = 128}): made once by {@code ncclGetUniqueId} on rank 0, handed to every rank (see
 * {@link Rendezvous}) and passed by value to {@code ncclCommInitRankConfig}. Immutable; holds a copy of the bytes.
 */
public final class UniqueId {
  /** {@code NCCL_UNIQUE_ID_BYTES}. */
  public static final int BYTES = 128;

  private final byte[] bytes;

  private UniqueId(byte[] bytes) {
    this.bytes = bytes;
  }

  /**
   * @param bytes the id, exactly {@value #BYTES} bytes (copied)
   * @return the id
   * @throws IllegalArgumentException for another length
   */
  public static UniqueId of(byte[] bytes) {
    Objects.requireNonNull(bytes, "bytes");
    if (bytes.length != BYTES) {
      throw new IllegalArgumentException("an ncclUniqueId has " + BYTES + " bytes, got " + bytes.length);
    }
    return new UniqueId(bytes.clone());
  }

  /** @return a copy of the {@value #BYTES} bytes */
  public byte[] bytes() {
    return bytes.clone();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof UniqueId u && Arrays.equals(bytes, u.bytes);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(bytes);
  }

  /** @return a short digest, not the bytes (the id is a rendezvous credential) */
  @Override
  public String toString() {
    return String.format("UniqueId[%08x]", Arrays.hashCode(bytes));
  }
}
