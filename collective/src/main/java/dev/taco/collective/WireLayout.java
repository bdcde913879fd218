package dev.taco.collective;

/**
 * Along which axis a collective's {@code rows x cols} tensor (tokens x hidden) is cut into the codec's groups on the
 * wire (docs/design.md §3.1, "data-driven reshaping"). The collective lays the tensor out this way before it sends and back
 * after it receives; the caller sees its own layout.
 */
public enum WireLayout {
  /** Groups of G contiguous values along the hidden axis, as computed. */
  IN_ORDER,
  /**
   * Along the hidden axis after a channel permutation ({@link Plan#permutation()}): slot {@code j} of every wire row
   * holds channel {@code permutation[j]}, so outlier channels can be dealt over different groups.
   */
  PERMUTED,
  /** Along the token axis: the tensor is sent transposed, {@code cols x rows} (all-reduce only). */
  TOKEN_AXIS;

  /** The lower-case name with dashes, as reports print it ({@code in-order}, {@code permuted}, {@code token-axis}). */
  public String label() {
    return name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
  }
}
