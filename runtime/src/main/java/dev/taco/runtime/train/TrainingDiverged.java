package dev.taco.runtime.train;

/**
 * A training run stopped because its loss, its gradient norm, its validation loss or a TP tensor became NaN or
 * infinite. Thrown by {@link Trainer#run} with the steps before it in {@link #partial()} (its {@code stopped} is
 * {@code diverged}), so that the report can show how the run got there.
 */
public final class TrainingDiverged extends RunFailed {
  /** Inside a rank: the message names the step and the value, and ends with the advice to lower --lr. */
  TrainingDiverged(String message, Throwable cause) {
    this(message, cause, null);
  }

  TrainingDiverged(String message, Throwable cause, RunResult partial) {
    super(message, cause, partial);
  }
}
