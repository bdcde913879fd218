package dev.taco.runtime.train;

/**
 * A training run that ended on an error after some of its steps: thrown by {@link Trainer#run} with what it measured
 * up to then in {@link #partial()}, so that the report keeps those steps. A run whose checkpoint could not be saved (a
 * full disk) stops after that step ({@code stopped} is {@code save-failed}); one whose numbers became non-finite is a
 * {@link TrainingDiverged}.
 */
public class RunFailed extends IllegalStateException {
  private final transient RunResult partial;

  RunFailed(String message, Throwable cause, RunResult partial) {
    super(message, cause);
    this.partial = partial;
  }

  /** The run up to where it ended; null only inside a rank. */
  public RunResult partial() {
    return partial;
  }
}
