package dev.taco.codec;

/**
 * A codec refused its input because it holds NaN or ±Inf (policy {@code nonfinite=refuse}, docs/design.md §3): the message
 * names the first such value, its flat index, row and column, and advises {@code nonfinite=propagate} for data that is
 * non-finite on purpose. Layers that know more (the collective: the site, the chunk, the rank) add it with
 * {@link #NonFiniteInputException(String, NonFiniteInputException)}, which keeps the type, so that a training loop
 * tells a diverged run from any other bad argument by type, not by reading the message.
 */
public final class NonFiniteInputException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;
  private static final String ADVICE = "; encode with nonfinite=propagate to send it";

  /** What was refused and where, without the advice. */
  private final String location;

  /**
   * The codec's own refusal.
   *
   * @param codec the codec's name
   * @param value the first non-finite value (NaN, Infinity or -Infinity)
   * @param index its index in the {@code rows x cols} input, row-major
   * @param cols the input's columns (> 0), for the row and column named
   */
  public NonFiniteInputException(String codec, float value, int index, int cols) {
    this(codec + ": non-finite input " + value + " at index " + index + " (row " + index / cols + ", col "
        + index % cols + ")", (Throwable) null);
  }

  /**
   * The refusal {@code cause} with {@code context} (where the input came from) in front.
   *
   * @param context e.g. {@code "all-reduce at layer0.attn.fwd"}
   * @param cause the refusal
   */
  public NonFiniteInputException(String context, NonFiniteInputException cause) {
    this(context + ": " + cause.location, (Throwable) cause);
  }

  private NonFiniteInputException(String location, Throwable cause) {
    super(location + ADVICE, cause);
    this.location = location;
  }

  /** The message without its advice to encode with {@code nonfinite=propagate} (for a run that diverged). */
  public String location() {
    return location;
  }
}
