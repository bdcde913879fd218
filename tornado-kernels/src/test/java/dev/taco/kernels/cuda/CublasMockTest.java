package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cuBLAS and cuBLASLt bindings without a GPU: {@code mock_cuda.c} (the driver) and {@code mock_cublas.c} (both
 * BLAS libraries: column-major reference GEMMs, the epilogues, status strings, a call log) are built with {@code cc},
 * and {@link CublasMockScenarios} runs against them in a child JVM (so this JVM's {@link Cuda} and {@link Cublas} stay
 * the real answer), each scenario reported as a test of its own. Skipped where there is no C compiler.
 */
class CublasMockTest {
  @TempDir
  static Path dir;
  static Path cuda;
  static Path cublas;
  static String out;

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
    Path src = dir.resolve(source);
    try (InputStream in = CublasMockTest.class.getResourceAsStream(source)) {
      Files.write(src, in.readAllBytes());
    }
    Path so = dir.resolve(library);
    Process p = new ProcessBuilder(cc.toString(), "-O1", "-Wall", "-shared", "-fPIC", "-o", so.toString(),
        src.toString(), "-lm").redirectErrorStream(true).start();
    String log = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(log).isZero();
    return so;
  }

  @BeforeAll
  static void buildAndRun() throws Exception {
    Path cc = cc();
    assumeTrue(cc != null, "no C compiler (cc/gcc/clang) on PATH to build the mock libraries");
    cuda = build(cc, "mock_cuda.c", "libmockcuda.so");
    cublas = build(cc, "mock_cublas.c", "libmockcublas.so");
    List<String> cmd = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "--enable-native-access=ALL-UNNAMED", "--add-modules=jdk.incubator.vector", "-cp",
        System.getProperty("java.class.path"), "-Dtaco.libcuda=" + cuda, "-Dtaco.libcublas=" + cublas,
        "-Dtaco.libcublaslt=" + cublas, CublasMockScenarios.class.getName());
    Process run = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    out = new String(run.getInputStream().readAllBytes());
    assertThat(run.waitFor(180, TimeUnit.SECONDS)).as(out).isTrue();
  }

  @TestFactory
  Stream<DynamicTest> scenariosAgainstMockCublas() {
    return CublasMockScenarios.scenarios().keySet().stream().map(name -> DynamicTest.dynamicTest(name,
        () -> assertThat(out).as(out).contains("PASS " + name + "\n")));
  }
}
