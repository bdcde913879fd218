package dev.taco.runtime.model;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Method;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Every {@link Ops} and {@link TensorParallel} operation falls in one breakdown category, but the bookkeeping and
 * {@code replay}, whose work is made of timed operations (the GPU side is in GptCudaGpuTest).
 */
class OpTimesTest {
  @Test
  void everyOperationHasACategoryAndBookkeepingIsNotTimed() {
    Set<String> seen = new TreeSet<>();
    java.util.List<Method> all = new java.util.ArrayList<>(java.util.List.of(Ops.class.getMethods()));
    all.addAll(java.util.List.of(TensorParallel.class.getMethods()));
    for (Method m : all) {
      String c = OpTimes.category(m.getName());
      if (Set.of("alloc", "fromHost", "toHost", "copyToDevice", "bytesSent", "replay", "attentionStateSize")
          .contains(m.getName())) {
        assertThat(c).as(m.getName()).isNull();
      } else {
        assertThat(c).as(m.getName()).isIn("gemm", "attention", "tp_collectives", "optimizer", "other_kernels");
        seen.add(c);
      }
    }
    assertThat(seen).containsExactlyInAnyOrder("gemm", "attention", "tp_collectives", "optimizer", "other_kernels");
    assertThat(OpTimes.category("matmulBackward")).isEqualTo("gemm");
    assertThat(OpTimes.category("layerNormForward")).isEqualTo("other_kernels");
    for (Method m : TensorParallel.class.getMethods()) {
      if (!m.getName().equals("bytesSent")) assertThat(OpTimes.category(m.getName())).isEqualTo("tp_collectives");
    }
  }
}
