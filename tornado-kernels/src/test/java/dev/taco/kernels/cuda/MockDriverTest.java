package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * Exercises the JNA marshalling of the whole backend without a GPU: a C mock of libcuda and libnvrtc
 * ({@code mock_cuda.c} next to this class: host memory for device memory, kernels run on the CPU by name, stream
 * capture and graph replay, a log of the stream-ordered calls) is built with {@code cc}, and programs run against it
 * in child JVMs (so this JVM's {@link Cuda} stays the real answer): {@link GpuSelfCheck}, and the
 * {@link ExecutionPlan} scenarios of {@link MockDriverScenarios} (lanes and cross-lane events, capture and replay,
 * refusals), each reported as a test of its own. It checks argument passing (handles as 64-bit values, {@code size_t},
 * out-parameters, string arrays, kernel parameter packing), status checking, error strings and call order, not CUDA
 * itself. Skipped where there is no C compiler.
 */
class MockDriverTest {
  @TempDir
  static Path dir;
  static Path so;

  private static Path cc() {
    for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      for (String n : new String[] {"cc", "gcc", "clang"}) {
        Path p = Path.of(d, n);
        if (Files.isExecutable(p)) {
          return p;
        }
      }
    }
    return null;
  }

  @BeforeAll
  static void buildMock() throws Exception {
    Path cc = cc();
    assumeTrue(cc != null, "no C compiler (cc/gcc/clang) on PATH to build the mock driver");
    Path src = dir.resolve("mock_cuda.c");
    try (InputStream in = MockDriverTest.class.getResourceAsStream("mock_cuda.c")) {
      Files.write(src, in.readAllBytes());
    }
    so = dir.resolve("libmockcuda.so");
    Process build = new ProcessBuilder(cc.toString(), "-O1", "-Wall", "-shared", "-fPIC", "-o", so.toString(),
        src.toString()).redirectErrorStream(true).start();
    String buildOut = new String(build.getInputStream().readAllBytes());
    assertThat(build.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(build.exitValue()).as(buildOut).isZero();
  }

  /** Runs {@code mainClass} in a child JVM against the mock; returns its output. */
  private static String runAgainstMock(String mainClass, String... args) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
        "-Dtaco.libcuda=" + so, "-Dtaco.libnvrtc=" + so, "-Dtaco.cache=" + dir.resolve("cache"),
        "-Dtaco.cuda.dir=" + dir.resolve("cuda"),
        "-Dtaco.kernel.sources=src/test/java" + File.pathSeparator + "src/main/java", mainClass));
    cmd.addAll(List.of(args));
    Process run = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(run.getInputStream().readAllBytes());
    assertThat(run.waitFor(180, TimeUnit.SECONDS)).as(out).isTrue();
    System.out.println(out.lines().filter(l -> l.startsWith("PASS") || l.startsWith("FAIL") || l.contains("passed,"))
        .reduce("", (a, b) -> a + "[mock] " + b + "\n"));
    return out;
  }

  @Test
  void selfCheckRunsAgainstMockDriver() throws Exception {
    String out = runAgainstMock("dev.taco.kernels.cuda.GpuSelfCheck", "--only",
        "device,round-trip,nvrtc-cache,nvrtc-error,vector-add,task-graph,cuda-graph,launch-overhead,launch-error");
    assertThat(out).as(out).contains("9 passed, 0 failed");
    assertThat(out).contains("PASS device: Mock GPU, sm_90, 132 SMs")
        .contains("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument");
  }

  @TestFactory
  Stream<DynamicTest> executionPlanScenariosAgainstMockDriver() throws Exception {
    String out = runAgainstMock(MockDriverScenarios.class.getName());
    return MockDriverScenarios.scenarios().keySet().stream().map(name -> DynamicTest.dynamicTest(name,
        () -> assertThat(out).as(out).contains("PASS " + name + "\n")));
  }
}
