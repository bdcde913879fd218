package dev.taco.kernels.cuda;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.gpu.TacoGpuKernels;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real SIMT kernel given to a {@link TaskGraph} as a method reference ({@code TacoGpuKernels::compress}) goes the
 * whole way to PTX the plan takes on a GPU: its request from the {@code @Constant} values, CUDA C from
 * {@link KernelSources}, and {@code nvcc --ptx -arch=sm_90} (skipped where nvcc is absent); the entry point takes
 * exactly the task's launch arguments.
 */
class TaskGraphNvccTest {
  @TempDir
  Path dir;

  @Test
  void aMethodReferenceTaskTranslatesAndCompiles() throws Exception {
    DeviceBuffer b = new DeviceBuffer(null, 0x7000_0000L, 1 << 20, false);
    ImmutableTaskGraph g = new TaskGraph("g")
        .task("compress", TacoGpuKernels::compress, KERNEL_CONTEXT, b, b, b, 8, 1024, 128, true, Fp8.E4M3, false)
        .snapshot();
    KernelRequest r = g.kernelRequest("compress");
    String cuda = KernelSources.defaults().cudaSource(r);
    Matcher m = Pattern.compile("extern \"C\" __global__ void compress\\(([^)]*)\\)").matcher(cuda);
    assertThat(m.find()).as(cuda).isTrue();
    assertThat(m.group(1).split(",")).hasSameSizeAs(g.launchArguments("compress").toArray());
    assertThat(cuda).contains("constexpr int groupSize = 128;").contains("constexpr bool bf16 = false;");

    Path nvcc = nvcc();
    assumeTrue(nvcc != null, "nvcc not found on PATH or in /usr/local/cuda/bin");
    Path cu = dir.resolve("compress.cu");
    Path ptx = dir.resolve("compress.ptx");
    Files.writeString(cu, cuda);
    Process p = new ProcessBuilder(nvcc.toString(), "--ptx", "-arch=sm_90", cu.toString(), "-o", ptx.toString())
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor(300, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(out).isZero();
    assertThat(Files.readString(ptx)).contains(".entry compress").doesNotContain("ld.local");
  }

  private static Path nvcc() {
    for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      Path p = Path.of(d, "nvcc");
      if (Files.isExecutable(p)) {
        return p;
      }
    }
    Path p = Path.of("/usr/local/cuda/bin/nvcc");
    return Files.isExecutable(p) ? p : null;
  }
}
