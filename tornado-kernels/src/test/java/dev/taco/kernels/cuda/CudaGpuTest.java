package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The GPU checks of {@link GpuSelfCheck} as JUnit tests: skipped with the reason where there is no GPU
 * (CPU machines, CI), run for real on a GPU machine. {@code gpu-check.sh} runs the same checks without Maven.
 */
@Tag("gpu") // bench/gpu-tests.sh selects by this tag: without it the device runs listed this class and ran none of it
class CudaGpuTest {
  private static CudaContext ctx;

  @BeforeAll
  static void open() {
    if (Cuda.available()) ctx = CudaContext.open(0);
  }

  @AfterAll
  static void close() {
    if (ctx != null) ctx.close();
  }

  private static String run(String check) throws Exception {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
    String detail = GpuSelfCheck.checks().get(check).run(ctx);
    System.out.println(check + ": " + detail);
    assertThat(detail).isNotBlank();
    return detail;
  }

  @Test
  void device() throws Exception { run("device"); }

  @Test
  void roundTrip() throws Exception { run("round-trip"); }

  @Test
  void nvrtcCache() throws Exception { run("nvrtc-cache"); }

  @Test
  void nvrtcError() throws Exception { run("nvrtc-error"); }

  @Test
  void vectorAdd() throws Exception { run("vector-add"); }

  @Test
  void headersBf16Fp8() throws Exception { run("headers-bf16-fp8"); }

  @Test
  void taskGraph() throws Exception { run("task-graph"); }

  @Test
  void copyBandwidth() throws Exception { run("copy-bandwidth"); }

  @Test
  void launchOverhead() throws Exception { run("launch-overhead"); }

  @Test
  void launchError() throws Exception { run("launch-error"); }
}
