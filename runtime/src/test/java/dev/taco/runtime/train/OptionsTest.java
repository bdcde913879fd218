package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.collective.FidelityGate;
import dev.taco.runtime.JsonFiles;
import java.lang.reflect.Field;
import java.lang.reflect.RecordComponent;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Trainer.Options}: built by name, the derived options filled in by {@code build()}, every value checked once
 * naming its flag, and the maps of the report and the checkpoints taken from the one declaration.
 */
class OptionsTest {
  @Test
  void theBuilderHasASetterAndADefaultPerComponentOfTheSameName() throws Exception {
    List<String> components = Arrays.stream(Trainer.Options.class.getRecordComponents()).map(RecordComponent::getName)
        .toList();
    assertThat(Arrays.stream(Trainer.Options.Builder.class.getDeclaredFields()).map(Field::getName))
        .containsExactlyInAnyOrderElementsOf(components);
    for (RecordComponent c : Trainer.Options.class.getRecordComponents()) {
      assertThat(Trainer.Options.Builder.class.getMethod(c.getName(), c.getType()).getReturnType()).as(c.getName())
          .isEqualTo(Trainer.Options.Builder.class);
    }
  }

  @Test
  void theDerivedOptionsFollowTheOnesGivenUnlessSetThemselves() {
    Trainer.Options o = Trainer.Options.builder().lr(1e-3f).microBatchSize(4).dataParallelSize(3).build();
    assertThat(o.minLr()).isEqualTo(1e-3f / 10);
    assertThat(o.globalBatchSize()).isEqualTo(12);
    assertThat(o.accumulation()).isEqualTo(1);
    Trainer.Options set = Trainer.Options.builder().lr(1e-3f).minLr(0f).microBatchSize(4).globalBatchSize(16).build();
    assertThat(set.minLr()).isZero();
    assertThat(set.accumulation()).isEqualTo(4);
    assertThat(Trainer.Options.builder().build().model().parameterCount()).as("the default model").isPositive();
  }

  @Test
  void reportAndCheckpointNamesComeFromTheComponents() {
    Trainer.Options o = Trainer.Options.builder().build();
    assertThat(o.asMap().keySet()).startsWith("num_layers", "hidden_size", "num_attention_heads", "seq_length",
        "tensor_model_parallel_size").contains("micro_batch_size", "lr_warmup_iters", "distributed_timeout_minutes")
        .hasSize(Trainer.Options.class.getRecordComponents().length);
    assertThat(o.asMap()).containsEntry("micro_batch_size", 8).containsEntry("min_lr", 2e-3f / 10);
    // what a checkpoint compares on resume: what changes the steps, not how often they are logged or evaluated
    assertThat(o.recorded(false).keySet()).containsExactly("sequence_parallel", "steps", "micro_batch_size",
        "global_batch_size", "data_parallel_size", "lr", "min_lr", "lr_warmup_iters", "weight_decay", "clip_grad",
        "seed", "dp_compression");
    assertThat(o.recorded(true).keySet()).endsWith("dp_compression", "calibration_steps", "recalibrate_interval",
        "auto_max_error");
    assertThat(Trainer.Options.flag("tensorModelParallelSize")).isEqualTo("--tensor-model-parallel-size");
  }

  @Test
  void everyValueOutOfRangeNamesItsFlag() {
    String[] bad = {"--num-attention-heads 3 does not divide --hidden-size 128", "--steps must be positive",
        "--global-batch-size 12 must be a positive multiple of --micro-batch-size x --data-parallel-size = 8",
        "--data-parallel-size must be positive", "--eval-iters must be positive", "--log-interval must be positive",
        "--dp-compression: unknown codec 'zip'", "--recalibrate-interval must be >= 0",
        "--distributed-timeout-minutes must be in 1..10080", "--auto-max-error gradients must be in (0, 1], got 2.0",
        "--dp-compression auto: auto chooses the TP collectives' codecs; name a codec"};
    List<Runnable> builds = List.of(() -> Trainer.Options.builder().numAttentionHeads(3).build(),
        () -> Trainer.Options.builder().steps(0).build(), () -> Trainer.Options.builder().globalBatchSize(12).build(),
        () -> Trainer.Options.builder().dataParallelSize(0).build(),
        () -> Trainer.Options.builder().evalIters(0).build(), () -> Trainer.Options.builder().logInterval(0).build(),
        () -> Trainer.Options.builder().dpCompression("zip").build(),
        () -> Trainer.Options.builder().recalibrateInterval(-1).build(),
        () -> Trainer.Options.builder().distributedTimeoutMinutes(0).build(),
        () -> Trainer.Options.builder().autoMaxError(FidelityGate.parse("activations=0.05,gradients=2")).build(),
        () -> Trainer.Options.builder().dpCompression("auto").build());
    for (int i = 0; i < bad.length; i++) {
      assertThatThrownBy(builds.get(i)::run).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining(bad[i]);
    }
  }

  /**
   * {@code --auto-max-error} in report.json's config and a checkpoint's options: one number while both directions share
   * it (as the option was written when it had one bound, so such a checkpoint resumes without a warning), else one bound
   * per direction; a resume with another gate is told so.
   */
  @Test
  void theFidelityGateIsRecordedAsOneNumberOrOnePerDirection() {
    Trainer.Options uniform = Trainer.Options.builder().build();
    Trainer.Options split = Trainer.Options.builder()
        .autoMaxError(FidelityGate.parse("activations=0.05,gradients=0.15")).build();
    assertThat(uniform.asMap()).containsEntry("auto_max_error", FidelityGate.of(0.05));
    assertThat(JsonFiles.toJsonLine(uniform.recorded(true))).contains("\"auto_max_error\":0.05");
    assertThat(JsonFiles.toJsonLine(split.asMap()))
        .contains("\"auto_max_error\":{\"activations\":0.05,\"gradients\":0.15}");
    Checkpoint.State saved = new Checkpoint.State(java.nio.file.Path.of("ck"), 10, new float[0], new float[0],
        new float[0], List.of(), null, List.of(), 10, 2, java.util.Map.of("auto_max_error", "0.05"));
    assertThat(saved.changedOptions(uniform.recorded(true))).as("the gate of before it had two bounds").isEmpty();
    assertThat(saved.changedOptions(split.recorded(true))).containsExactly(
        "auto_max_error {\"activations\":0.05,\"gradients\":0.15} (checkpoint: 0.05)");
  }

  @Test
  void anEmulatedRankRefusesWhatOneRankCannotStandFor() {
    var link = dev.taco.collective.link.LinkProfiles.byName("ib-ndr");
    Trainer.requireEmulatable(2, 1, link); // a TP group of 2, no DP, a link: accepted
    assertThatThrownBy(() -> Trainer.requireEmulatable(1, 1, link)).hasMessage(
        "--tp-transport emulated needs --tp of 2 or more, got 1");
    assertThatThrownBy(() -> Trainer.requireEmulatable(1, 2, link)).as("DP ranks are not TP ranks")
        .hasMessageContaining("--tp of 2 or more");
    assertThatThrownBy(() -> Trainer.requireEmulatable(2, 2, link)).hasMessageContaining(
        "--data-parallel-size must be 1");
    assertThatThrownBy(() -> Trainer.requireEmulatable(2, 1, null)).hasMessageContaining("needs --link PROFILE");
  }
}
