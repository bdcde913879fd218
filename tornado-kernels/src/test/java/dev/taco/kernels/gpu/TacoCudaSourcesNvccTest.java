package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.Fp8;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The generated CUDA of {@link TacoGpuKernels} compiles with {@code nvcc --ptx -arch=sm_90} (skipped with the reason
 * when nvcc is not on PATH), and the PTX has no local-memory traffic (the register arrays stay in registers) and has
 * 128-bit global loads. The .cu and .ptx files are kept in {@code target/generated-cuda/gpu}.
 */
class TacoCudaSourcesNvccTest {
  static final Path OUT = Path.of("target/generated-cuda/gpu");

  static Stream<Arguments> units() {
    return Stream.of(Arguments.of(64, true, true, false), Arguments.of(256, false, true, false),
        Arguments.of(128, true, false, false), Arguments.of(64, true, false, true));
  }

  @ParameterizedTest(name = "G={0} hadamard={1} bf16={2} reduce={3}")
  @MethodSource("units")
  void compilesToPtxWithoutLocalMemoryAndWithVectorLoads(int g, boolean hadamard, boolean bf16, boolean reduce)
      throws Exception {
    String key = TacoCudaSources.key(g, hadamard, Fp8.E4M3, bf16, reduce);
    Files.createDirectories(OUT);
    Path cu = OUT.resolve(key + ".cu");
    Files.writeString(cu, TacoCudaSources.source(g, hadamard, Fp8.E4M3, bf16, reduce));
    Path nvcc = nvcc();
    assumeTrue(nvcc != null, "nvcc is not on PATH: CUDA compile check skipped");
    Path ptx = OUT.resolve(key + ".ptx");
    Process p = new ProcessBuilder(nvcc.toString(), "--ptx", "-arch=sm_90", "-o", ptx.toString(), cu.toString())
        .redirectErrorStream(true).start();
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(300, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("nvcc %s:%n%s", cu, log).isZero();
    String text = Files.readString(ptx);
    assertThat(text).as("local memory in %s", ptx).doesNotContain("ld.local").doesNotContain("st.local");
    assertThat(text).as("128-bit global loads in %s", ptx).containsPattern("ld\\.global(\\.nc)?\\.v4");
    assertThat(text).contains(".entry decompress");
    if (!reduce) {
      assertThat(text).contains(".entry compress").contains(".entry unfusedEncode").contains("shfl.sync.bfly");
    }
  }

  @Test
  void keysNameTheSpecialisation() {
    assertThat(TacoCudaSources.key(256, false, Fp8.E5M2, true, false)).isEqualTo("taco-g256-h0-f2-bf16");
    assertThat(TacoCudaSources.key(64, true, Fp8.E4M3, false, true)).isEqualTo("taco-g64-h1-f1-reduce");
  }

  static Path nvcc() {
    for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      Path p = Path.of(d, "nvcc");
      if (Files.isExecutable(p)) {
        return p;
      }
    }
    return null;
  }
}
