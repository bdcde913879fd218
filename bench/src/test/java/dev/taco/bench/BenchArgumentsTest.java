package dev.taco.bench;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The benchmark mains refuse bad arguments by name before they start any work (no JMH fork, no training step). */
class BenchArgumentsTest {

  @Test
  void trainStepProfileNamesABadArgumentOrCount() {
    assertThatThrownBy(() -> TrainStepProfile.main(new String[] {"5"})).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'5'").hasMessageContaining("steps=N");
    assertThatThrownBy(() -> TrainStepProfile.main(new String[] {"steps=0"}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("steps must be at least 1, got 0");
    assertThatThrownBy(() -> TrainStepProfile.main(new String[] {"warmup=-1"}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'warmup=-1'");
  }

  @Test
  void codecBenchNamesAnUnknownCodecBeforeJmhRuns() {
    assertThatThrownBy(() -> CodecBench.main(new String[] {"codecs=taco;bogus"}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unknown codec 'bogus'");
    assertThatThrownBy(() -> CodecBench.main(new String[] {"codec=taco"})).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknown argument codec=taco");
  }
}
