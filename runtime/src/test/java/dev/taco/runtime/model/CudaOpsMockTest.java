package dev.taco.runtime.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The GPU backend without a GPU: {@link CudaOpsMockSteps} runs training steps against {@code tornado-kernels}' mock CUDA
 * driver and cuBLAS (built here with the C compiler), which accept a launch only with well-formed arguments and log
 * every stream operation. So every layer kernel's launch by method reference binds its values to the kernel's
 * parameters (a mistyped value fails the step), a one-rank step becomes one CUDA graph that carries its token uploads,
 * and two device-local ranks run calibrated TP collectives between their layers. Skipped without a C compiler or the
 * mock's sources (a checkout's {@code tornado-kernels} module).
 */
class CudaOpsMockTest {
  static final Path MOCKS = Path.of("../tornado-kernels/src/test/resources/dev/taco/kernels/cuda");

  @TempDir
  static Path dir;

  static Path cuda;
  static Path cublas;

  private static Path cc() {
    for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      for (String n : new String[] {"cc", "gcc", "clang"}) {
        Path p = Path.of(d, n);
        if (Files.isExecutable(p)) return p;
      }
    }
    return null;
  }

  private static Path build(Path cc, String source, String library) throws Exception {
    Path so = dir.resolve(library);
    Process p = new ProcessBuilder(cc.toString(), "-O1", "-shared", "-fPIC", "-o", so.toString(),
        MOCKS.resolve(source).toString(), "-lm").redirectErrorStream(true).start();
    String log = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(log).isZero();
    return so;
  }

  @BeforeAll
  static void buildMocks() throws Exception {
    Path cc = cc();
    assumeTrue(cc != null, "no C compiler (cc/gcc/clang) on PATH to build the mock CUDA libraries");
    assumeTrue(Files.isRegularFile(MOCKS.resolve("mock_cuda.c")), "the mock's sources are not at " + MOCKS);
    cuda = build(cc, "mock_cuda.c", "libmockcuda.so");
    cublas = build(cc, "mock_cublas.c", "libmockcublas.so");
  }

  /** The child JVM's output for {@code mode}; fails if it does not exit 0. */
  private static String run(String mode) throws Exception {
    List<String> cmd = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "--enable-native-access=ALL-UNNAMED", "--add-modules=jdk.incubator.vector", "-cp",
        System.getProperty("java.class.path"), "-Dtaco.libcuda=" + cuda, "-Dtaco.libnvrtc=" + cuda,
        "-Dtaco.libcublas=" + cublas, "-Dtaco.libcublaslt=" + cublas, "-Dtaco.cache=" + dir.resolve("cache"),
        "-Dtaco.cuda.dir=" + dir.resolve("cuda"),
        "-Dtaco.kernel.sources=../tornado-kernels/src/main/java" + File.pathSeparator + "src/main/java",
        CudaOpsMockSteps.class.getName(), mode);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor(300, TimeUnit.SECONDS)).as(out).isTrue();
    assertThat(p.exitValue()).as(out).isZero();
    return out;
  }

  /** The log lines of the part headed {@code === head}. */
  private static List<String> part(String out, String head) {
    String rest = out.substring(out.indexOf("=== " + head + "\n") + head.length() + 5);
    int end = rest.indexOf("=== ");
    return (end < 0 ? rest : rest.substring(0, end)).lines().toList();
  }

  private static List<String> launched(List<String> log) {
    return log.stream().filter(l -> l.startsWith("launch ")).map(l -> l.split(" ")[1]).distinct().toList();
  }

  @Test
  void anFp32StepLaunchesEveryLayerKernelThenReplaysAsOneGraphWithItsUploads() throws Exception {
    String out = run("fp32");
    assertThat(launched(part(out, "fp32 step 1"))).as(out).contains("encoderForward", "layernormForwardWarp",
        "matmulForwardBias", "softmaxForwardWarp", "residualBiasForward4", "geluForward", "crossentropyForwardWarp",
        "crossentropyBackward", "layernormBackwardRowsWarp", "layernormParamPartials", "geluBackwardInto",
        "softmaxBackwardWarp", "oneHotRows", "encoderBackwardWpe", "gradNormPartials", "foldPartials", "adamwUpdate");
    List<String> captured = part(out, "fp32 step 2");
    assertThat(captured).as(out).contains("begin-capture s1 mode=1");
    assertThat(captured.stream().filter(l -> l.startsWith("capture htod"))).as("tokens and targets in the graph")
        .hasSize(2);
    List<String> replayed = part(out, "fp32 step 3");
    assertThat(replayed.stream().filter(l -> l.startsWith("graph-launch"))).hasSize(1);
    assertThat(replayed.subList(0, replayed.indexOf(replayed.stream().filter(l -> l.startsWith("graph-launch"))
        .findFirst().orElseThrow()))).as("nothing launched or copied before the graph").noneMatch(
            l -> l.startsWith("launch") || l.startsWith("htod"));
    assertThat(launched(replayed)).as("the optimizer after the graph").containsExactly("gradNormPartials",
        "foldPartials", "adamwUpdate");
    assertThat(out).contains("graph launches 2");
  }

  @Test
  void aBf16StepRunsFlashAttentionAndTheBf16MlpKernels() throws Exception {
    String out = run("bf16");
    assertThat(launched(part(out, "bf16 step 1"))).as(out).contains("flashForward", "flashBackwardDot",
        "flashBackwardKeyValue", "flashBackwardQuery", "geluForwardBf16", "geluBackwardBf16", "roundToBf16x8");
    assertThat(part(out, "bf16 step 1")).anyMatch(l -> l.startsWith("lt-matmul"));
    assertThat(out).contains("graph launches 2");
  }

  @Test
  void twoDeviceLocalRanksCalibrateEverySiteThroughTheDeviceCollectives() throws Exception {
    String out = run("tp2");
    assertThat(out).contains("tp2 ranks done, sites with plans: [8, 8]");
  }
}
