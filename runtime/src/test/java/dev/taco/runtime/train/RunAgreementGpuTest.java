package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.collective.CollectiveException;
import dev.taco.collective.LocalGroup;
import dev.taco.collective.device.DeviceLocalTransport;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.collective.CollectiveSites;
import dev.taco.runtime.model.GptConfig;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Ranks of a GPU run started with different arguments (each NCCL process parses its own command line) stop before the
 * first step with an error on every rank, naming the settings; ranks started alike go on. Device-local ranks on one GPU
 * stand in for NCCL's processes: both transports agree through the same {@code DeviceTransport.agree}.
 */
@Tag("gpu")
class RunAgreementGpuTest {
  static Trainer.Options options(long seed, float lr) {
    return Trainer.Options.builder().seqLength(64).numLayers(2).hiddenSize(64).steps(10).lr(lr).minLr(0f)
        .lrWarmupIters(0).seed(seed).evalInterval(10).evalIters(1).calibrationSteps(0).build();
  }

  static final GptConfig CFG = options(1, 1e-3f).model();

  /** Runs the agreement on two device-local ranks whose settings {@code rank1} gives for rank 1. */
  static List<Object> agree(CudaContext ctx, Trainer.Options rank1, String codec1) {
    return LocalGroup.run(2, comm -> {
      boolean one = comm.rank() == 1;
      try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm)) {
        Trainer.agreeOnTheRun(t, CFG, one ? rank1 : options(1, 1e-3f),
            new CollectiveSites(comm, one ? codec1 : "taco", 1, 0));
      }
      return comm.rank();
    });
  }

  @Test
  void ranksStartedWithDifferentArgumentsStopNamingTheSettings() {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
    try (CudaContext ctx = CudaContext.open(0)) {
      assertThat(agree(ctx, options(1, 1e-3f), "taco")).containsExactly(0, 1);
      for (Object[] bad : new Object[][] {{options(2, 1e-3f), "taco", "seed=2"},
          {options(1, 2e-3f), "taco", "lr=0.002"}, {options(1, 1e-3f), "int8-group", "compression int8-group"}}) {
        assertThatThrownBy(() -> agree(ctx, (Trainer.Options) bad[0], (String) bad[1])).as((String) bad[2])
            .isInstanceOf(CollectiveException.class)
            .hasMessageContaining("disagree on the model, the training options and the compression")
            .hasMessageContaining("start every rank with the same arguments");
      }
    }
  }
}
