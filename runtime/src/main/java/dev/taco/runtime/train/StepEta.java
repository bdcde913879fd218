package dev.taco.runtime.train;

import java.time.Duration;
import java.util.Optional;
import java.util.function.Function;
import me.tongfei.progressbar.ProgressState;

/**
 * The training progress bar's time to go, from the steps after the first one it saw done: the first step of a run
 * compiles the kernels (about 10 s of the default CPU run, against 0.1 s for a later step), so the bar's own estimate,
 * elapsed time over steps done, read 20 minutes at step 1 of a two-minute run. Empty (the bar prints {@code ?}) until
 * a second observation has more steps than the first.
 */
final class StepEta implements Function<ProgressState, Optional<Duration>> {
  private long firstSteps = -1;
  private Duration firstElapsed;

  @Override
  public Optional<Duration> apply(ProgressState s) {
    return at(s.getCurrent(), s.getMax(), s.getElapsedAfterStart());
  }

  /**
   * The estimate at {@code done} of {@code steps} steps after {@code elapsed}: the rate since the first observation
   * with a step done, times the steps left.
   */
  synchronized Optional<Duration> at(long done, long steps, Duration elapsed) {
    if (done < 1) return Optional.empty();
    if (firstSteps < 0) {
      firstSteps = done;
      firstElapsed = elapsed;
    }
    if (done <= firstSteps) return done >= steps ? Optional.of(Duration.ZERO) : Optional.empty();
    Duration perStep = elapsed.minus(firstElapsed).dividedBy(done - firstSteps);
    return Optional.of(perStep.multipliedBy(Math.max(0, steps - done)));
  }
}
