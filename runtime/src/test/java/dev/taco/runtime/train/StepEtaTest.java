package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The progress bar's time to go leaves the slow first step (kernel compilation) out of the rate. */
class StepEtaTest {
  @Test
  void theRateComesFromTheStepsAfterTheFirstObservation() {
    StepEta eta = new StepEta();
    assertThat(eta.at(0, 120, Duration.ofSeconds(5))).isEmpty();
    // step 1 took 10 s (compiling): no estimate from it alone, where elapsed/done would say 1190 s to go
    assertThat(eta.at(1, 120, Duration.ofSeconds(10))).isEmpty();
    assertThat(eta.at(1, 120, Duration.ofSeconds(10).plusMillis(500))).isEmpty();
    // 4 more steps in 0.4 s: 0.1 s a step, 115 steps left
    assertThat(eta.at(5, 120, Duration.ofMillis(10_400))).contains(Duration.ofMillis(11_500));
    assertThat(eta.at(120, 120, Duration.ofMillis(21_900))).contains(Duration.ZERO);
  }

  @Test
  void aBarFirstSeenFinishedSaysNothingIsLeft() {
    assertThat(new StepEta().at(3, 3, Duration.ofSeconds(2))).isEqualTo(Optional.of(Duration.ZERO));
  }
}
