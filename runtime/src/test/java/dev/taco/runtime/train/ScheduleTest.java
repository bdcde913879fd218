package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

/** Megatron-LM's schedule: linear warmup over --lr-warmup-iters steps, cosine decay from --lr to --min-lr. */
class ScheduleTest {
  static Trainer.Options opts(int steps, float lr, float minLr, int warmup) {
    return Trainer.Options.builder().steps(steps).lr(lr).minLr(minLr).lrWarmupIters(warmup).build();
  }

  @Test
  void warmupIsInStepsThenCosineToMinLr() {
    Trainer.Options o = opts(100, 2e-3f, 2e-4f, 20);
    assertThat(Trainer.learningRate(o, 0)).isEqualTo(2e-3f / 20);
    assertThat(Trainer.learningRate(o, 9)).isCloseTo(2e-3f * 10 / 20, within(1e-9f));
    assertThat(Trainer.learningRate(o, 19)).isEqualTo(2e-3f);
    assertThat(Trainer.learningRate(o, 20)).isEqualTo(2e-3f); // the decay starts at the peak
    assertThat(Trainer.learningRate(o, 60)).isCloseTo((2e-3f + 2e-4f) / 2, within(1e-8f)); // half way
    for (int s = 21; s < 100; s++) assertThat(Trainer.learningRate(o, s)).isLessThan(Trainer.learningRate(o, s - 1));
    assertThat(Trainer.learningRate(o, 100)).isCloseTo(2e-4f, within(1e-9f));
    // a run of 50 steps warms up as long as one of 100: the warmup does not shrink with --steps
    assertThat(Trainer.learningRate(opts(50, 2e-3f, 2e-4f, 20), 4)).isEqualTo(Trainer.learningRate(o, 4));
  }

  @Test
  void aWarmupLongerThanTheRunEndsAtTheRunAndZeroWarmupStartsAtThePeak() {
    Trainer.Options o = opts(10, 1e-3f, 0f, 20);
    assertThat(Trainer.learningRate(o, 9)).isEqualTo(1e-3f);
    assertThat(Trainer.learningRate(opts(10, 1e-3f, 0f, 0), 0)).isEqualTo(1e-3f);
  }

  @Test
  void outOfRangeValuesNameTheirFlag() {
    assertThatThrownBy(() -> opts(10, 1e-3f, 2e-3f, 5)).hasMessageContaining("--min-lr");
    assertThatThrownBy(() -> opts(10, 1e-3f, Float.NaN, 5)).hasMessageContaining("--min-lr");
    assertThatThrownBy(() -> opts(10, 1e-3f, 0f, -1)).hasMessageContaining("--lr-warmup-iters");
    assertThatThrownBy(() -> Trainer.Options.builder().weightDecay(-0.1f).build()).hasMessageContaining(
        "--weight-decay");
    assertThatThrownBy(() -> Trainer.Options.builder().clipGrad(Float.NaN).build()).hasMessageContaining("--clip-grad");
  }
}
