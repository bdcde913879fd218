package dev.taco.collective.device;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.codec.Bf16Codec;
import dev.taco.codec.Codecs;
import dev.taco.collective.Plan;
import org.junit.jupiter.api.Test;

/** Which plans the device collectives run, and the visible fallback of the others (no GPU needed). */
class DevicePlansTest {
  @Test
  void everyTacoPlanCalibrationCanChooseRunsOnTheGpuAsIs() {
    int[] perm = {2, 0, 1, 3};
    for (String spec : new String[] {"taco", "taco:e5m2", "taco:g=32", "taco:g=256,hadamard=off", "taco-no-hadamard",
        "taco-no-ash", "none", "fp32", "int8-group", "int8-group:g=32", "fp8-tensor", "mxfp4", "mxfp4:hadamard=off",
        "nvfp4", "nvfp4:hadamard=on"}) {
      Plan p = spec.equals("fp32") ? Plan.EXACT : Plan.of(Codecs.byName(spec));
      for (Plan q : new Plan[] {p, p.permuted(perm), p.tokenAxis()}) {
        DeviceCollectives.Resolved r = DeviceCollectives.resolve(q);
        assertThat(r.reason()).as(q.describe()).isNull();
        assertThat(r.plan()).isEqualTo(q);
      }
    }
  }

  @Test
  void plansWithoutGpuKernelsFallBackToBf16InTheSameLayoutWithTheReason() {
    int[] perm = {1, 0, 3, 2};
    for (String spec : new String[] {"hadamard-int8", "int4-group", "fp8-group", "taco-no-ds"}) {
      Plan asked = Plan.of(Codecs.byName(spec)).permuted(perm);
      DeviceCollectives.Resolved r = DeviceCollectives.resolve(asked);
      assertThat(r.plan().codec()).as(spec).isInstanceOf(Bf16Codec.class);
      assertThat(r.plan().permutation()).isEqualTo(perm);
      assertThat(r.reason()).contains(Codecs.byName(spec).name()).contains("no GPU kernels").contains("bf16 (none)");
      assertThat(DeviceCollectives.unsupported(asked)).isNotNull();
    }
  }
}
