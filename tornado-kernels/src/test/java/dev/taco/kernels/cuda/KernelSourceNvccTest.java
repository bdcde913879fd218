package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CUDA C that the GPU self-check hands NVRTC compiles with {@code nvcc --ptx -arch=sm_90} where nvcc
 * is installed (CPU machines and CI have it), so a typo in a kernel shows up without a GPU.
 */
class KernelSourceNvccTest {
  @TempDir
  Path dir;

  private static Path nvcc() {
    for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      Path p = Path.of(d, "nvcc");
      if (Files.isExecutable(p)) return p;
    }
    Path p = Path.of("/usr/local/cuda/bin/nvcc");
    return Files.isExecutable(p) ? p : null;
  }

  @Test
  void selfCheckKernelsCompileWithNvcc() throws Exception {
    Path nvcc = nvcc();
    assumeTrue(nvcc != null, "nvcc not found on PATH or in /usr/local/cuda/bin");
    Path cu = dir.resolve("selfcheck.cu");
    Files.writeString(cu, GpuSelfCheck.VECTOR_ADD_SRC + "\n" + GpuSelfCheck.CONVERT_SRC);
    Path ptx = dir.resolve("selfcheck.ptx");
    Process p = new ProcessBuilder(nvcc.toString(), "--ptx", "-arch=sm_90", "-std=c++17", cu.toString(), "-o",
        ptx.toString())
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(out).isZero();
    assertThat(Files.readString(ptx)).contains(".entry vector_add").contains(".entry empty_kernel")
        .contains(".entry convert");
  }
}
