package dev.taco.collective;

import dev.taco.codec.AbstractCodec;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;

/**
 * What one collective site puts on the wire (docs/design.md §3.1, §4): a codec, or none for exact float32, and the layout the
 * tensor is sent in. A plan is a typed value, frozen per site by calibration and shared by every rank; the payload size
 * of any chunk follows from the plan and the chunk's shape alone, so every exchange has sizes known in advance.
 *
 * @param codec the codec every chunk goes through (its header, G, format and transform), or null for exact float32
 *     (raw little-endian values, no header)
 * @param layout the wire layout
 * @param permutation for {@link WireLayout#PERMUTED} only: a permutation of {@code 0..cols-1}, wire slot {@code j}
 *     holds channel {@code permutation[j]}; null otherwise
 */
public record Plan(AbstractCodec codec, WireLayout layout, int[] permutation) {

  /** Exact float32, in order: what the exact transport and the tests' references send. */
  public static final Plan EXACT = new Plan(null, WireLayout.IN_ORDER, null);

  /**
   * Validates and copies the permutation.
   *
   * @throws IllegalArgumentException if the permutation is missing for PERMUTED, given for another layout, or not a
   *     permutation
   */
  public Plan {
    Objects.requireNonNull(layout, "layout");
    if ((layout == WireLayout.PERMUTED) != (permutation != null)) {
      throw new IllegalArgumentException("a channel permutation goes with the permuted layout only (layout " + layout
          + ", permutation " + (permutation == null ? "none" : "given") + ")");
    }
    if (permutation != null) {
      permutation = permutation.clone();
      boolean[] seen = new boolean[permutation.length];
      for (int p : permutation) {
        if (p < 0 || p >= seen.length || seen[p]) {
          throw new IllegalArgumentException("not a permutation of 0.." + (seen.length - 1) + ": "
              + Arrays.toString(Arrays.copyOf(permutation, Math.min(16, permutation.length))));
        }
        seen[p] = true;
      }
    }
  }

  /** {@code codec} in order ({@code null}: exact). */
  public static Plan of(AbstractCodec codec) {
    return new Plan(codec, WireLayout.IN_ORDER, null);
  }

  /** This plan's codec with {@code permutation} ({@link WireLayout#PERMUTED}). */
  public Plan permuted(int[] permutation) {
    return new Plan(codec, WireLayout.PERMUTED, permutation);
  }

  /** This plan's codec along the token axis ({@link WireLayout#TOKEN_AXIS}). */
  public Plan tokenAxis() {
    return new Plan(codec, WireLayout.TOKEN_AXIS, null);
  }

  /** True for exact float32 (no codec). */
  public boolean exact() {
    return codec == null;
  }

  /**
   * True for {@code nccl-fp8}, whose ranks share one scale and whose payloads are summed in FP8 in NCCL's ring order
   * (docs/design.md §4.1): its collectives agree on the scale first ({@link Wire#groupScale}).
   */
  public boolean groupScaled() {
    return codec instanceof dev.taco.codec.NcclFp8Codec;
  }

  /** The permutation (a copy), or null. */
  @Override
  public int[] permutation() {
    return permutation == null ? null : permutation.clone();
  }

  /**
   * e.g. {@code taco:e4m3,g=256,alpha=1.0,hadamard=off in-order}, {@code fp32 in-order}, or
   * {@code ... permuted#3f0c...} (the first 128 bits of the permutation's SHA-256, in hex: two plans that describe
   * alike send alike, unless SHA-256 collides; {@link Wire#agree} compares ranks' plans by this text, and a 32-bit
   * hash let two different permutations of 64 channels pass it).
   */
  public String describe() {
    return codecAndLayout() + (permutation == null ? "" : "#" + digest(permutation));
  }

  /**
   * {@link #describe()} without the permutation's digest: what a collective's cost depends on (a permutation moves
   * channels, not bytes), so pricing caches by it.
   */
  public String codecAndLayout() {
    return (codec == null ? "fp32" : codec.toString()) + " " + layout.label();
  }

  /** The first 16 bytes of the SHA-256 of the permutation's entries (int32 big-endian), as 32 hex digits. */
  private static String digest(int[] permutation) {
    ByteBuffer bytes = ByteBuffer.allocate(Integer.BYTES * permutation.length);
    bytes.asIntBuffer().put(permutation);
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes.array()), 0, 16);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Plan p && Objects.equals(String.valueOf(codec), String.valueOf(p.codec))
        && layout == p.layout && Arrays.equals(permutation, p.permutation);
  }

  @Override
  public int hashCode() {
    return Objects.hash(String.valueOf(codec), layout, Arrays.hashCode(permutation));
  }

  @Override
  public String toString() {
    return "Plan[" + describe() + "]";
  }
}
