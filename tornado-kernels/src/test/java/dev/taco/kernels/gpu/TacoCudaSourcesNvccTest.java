package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.cuda.KernelSources;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The generated CUDA of {@link TacoGpuKernels}' specialisations ({@link TacoCudaSources}, through
 * {@link KernelSources}) compiles with {@code nvcc --ptx -arch=sm_90} (skipped with the reason when nvcc is not on
 * PATH), and the PTX has no local-memory traffic (the register arrays stay in registers) and 128-bit global accesses.
 * The .cu and .ptx files are kept in {@code target/generated-cuda/gpu}.
 */
class TacoCudaSourcesNvccTest {
  static final Path OUT = Path.of("target/generated-cuda/gpu");

  static Stream<KernelRequest> kernels() {
    return Stream.of(TacoCudaSources.compress(64, true, Fp8.E4M3, true),
        TacoCudaSources.compress(256, false, Fp8.E4M3, true),
        TacoCudaSources.decompress(128, true, Fp8.E4M3, false, false),
        TacoCudaSources.decompress(64, true, Fp8.E4M3, false, true),
        TacoCudaSources.unfusedStats(64, true, Fp8.E5M2, true),
        TacoCudaSources.unfusedTransform(128, true, false),
        TacoCudaSources.unfusedEncode(64, Fp8.E4M3));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("kernels")
  void compilesToPtxWithoutLocalMemoryAndWithVectorAccesses(KernelRequest kernel) throws Exception {
    KernelSources sources = KernelSources.defaults();
    String name = sources.file(kernel).getFileName().toString().replace(".cu", "");
    Files.createDirectories(OUT);
    Path cu = OUT.resolve(name + ".cu");
    Files.writeString(cu, sources.cudaSource(kernel));
    Path nvcc = nvcc();
    assumeTrue(nvcc != null, "nvcc is not on PATH: CUDA compile check skipped");
    Path ptx = OUT.resolve(name + ".ptx");
    Process p = new ProcessBuilder(nvcc.toString(), "--ptx", "-arch=sm_90", "-o", ptx.toString(), cu.toString())
        .redirectErrorStream(true).start();
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(300, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("nvcc %s:%n%s", cu, log).isZero();
    String text = Files.readString(ptx);
    assertThat(text).as("local memory in %s", ptx).doesNotContain("ld.local").doesNotContain("st.local");
    assertThat(text).as("128-bit global accesses in %s", ptx).containsPattern("(ld|st)\\.global(\\.nc)?\\.v4");
    assertThat(text).contains(".entry " + kernel.methodName());
    if (kernel.methodName().equals("compress")) {
      assertThat(text).contains("shfl.sync.bfly");
    }
  }

  @Test
  void kernelsListsEverySpecialisationOnce() {
    List<KernelRequest> all = TacoCudaSources.kernels();
    assertThat(new HashSet<>(all)).hasSameSizeAs(all);
    // per G: compress, decompress, unfusedStats for 2 x 2 x 2 (Hadamard, format, input); reduce for 2 x 2;
    // unfusedTransform for 2 x 2 (Hadamard, input); unfusedEncode for 2 formats
    assertThat(all).hasSize(3 * (3 * 8 + 4 + 4 + 2));
    assertThat(all).allMatch(r -> r.className().equals(TacoGpuKernels.class.getName()));
    assertThat(all).contains(TacoCudaSources.decompress(256, false, Fp8.E5M2, false, true));
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
