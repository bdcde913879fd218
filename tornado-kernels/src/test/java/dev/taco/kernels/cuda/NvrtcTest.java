package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** NVRTC compilation to PTX; needs libnvrtc but no GPU, and skips with the reason where it is missing. */
class NvrtcTest {
  @TempDir
  Path dir;

  @Test
  void defaultOptionsTargetTheArchitectureWithCxx17() {
    List<String> o = Nvrtc.defaultOptions("compute_90");
    assertThat(o).startsWith("--gpu-architecture=compute_90", "--std=c++17");
    assertThat(o).noneMatch(s -> s.contains("fast-math") || s.contains("fast_math"));
  }

  @Test
  void compilesVectorAddToPtx() {
    assumeTrue(Nvrtc.available(), Nvrtc.unavailableReason());
    String ptx = Nvrtc.get().compile(GpuSelfCheck.VECTOR_ADD_SRC, "vector_add.cu", "compute_90", List.of());
    assertThat(ptx).contains(".target sm_90").contains(".entry vector_add").contains(".entry empty_kernel");
  }

  @Test
  void compilesBf16AndFp8Headers() {
    assumeTrue(Nvrtc.available(), Nvrtc.unavailableReason());
    String ptx = Nvrtc.get().compile(GpuSelfCheck.CONVERT_SRC, "convert.cu", "compute_90", List.of());
    assertThat(ptx).contains(".entry convert");
  }

  @Test
  void compileErrorCarriesTheLog() {
    assumeTrue(Nvrtc.available(), Nvrtc.unavailableReason());
    assertThatThrownBy(() -> Nvrtc.get().compile("extern \"C\" __global__ void k(float* x) { x[0] = nope; }", "bad.cu",
        "compute_90", List.of()))
        .isInstanceOfSatisfying(NvrtcException.class, e -> {
          assertThat(e.code()).isEqualTo(6);
          assertThat(e.log()).contains("nope");
          assertThat(e.getMessage()).contains("bad.cu").contains("nope");
        });
  }

  @Test
  void cachedCompileHitsOnSecondCall() {
    assumeTrue(Nvrtc.available(), Nvrtc.unavailableReason());
    PtxCache cache = new PtxCache(dir);
    String a = Nvrtc.compileCached(GpuSelfCheck.VECTOR_ADD_SRC, "v.cu", "compute_90", List.of(), cache);
    String b = Nvrtc.compileCached(GpuSelfCheck.VECTOR_ADD_SRC, "v.cu", "compute_90", List.of(), cache);
    assertThat(b).isEqualTo(a);
    assertThat(cache.misses()).isEqualTo(1);
    assertThat(cache.hits()).isEqualTo(1);
  }
}
