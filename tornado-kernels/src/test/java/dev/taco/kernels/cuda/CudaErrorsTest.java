package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** Error-code → message mapping; runs without a GPU. */
class CudaErrorsTest {
  @Test
  void namesCommonCodes() {
    assertThat(CudaErrors.name(0)).isEqualTo("CUDA_SUCCESS");
    assertThat(CudaErrors.name(1)).isEqualTo("CUDA_ERROR_INVALID_VALUE");
    assertThat(CudaErrors.name(2)).isEqualTo("CUDA_ERROR_OUT_OF_MEMORY");
    assertThat(CudaErrors.name(100)).isEqualTo("CUDA_ERROR_NO_DEVICE");
    assertThat(CudaErrors.name(218)).isEqualTo("CUDA_ERROR_INVALID_PTX");
    assertThat(CudaErrors.name(700)).isEqualTo("CUDA_ERROR_ILLEGAL_ADDRESS");
    assertThat(CudaErrors.name(701)).isEqualTo("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    assertThat(CudaErrors.name(999)).isEqualTo("CUDA_ERROR_UNKNOWN");
    assertThat(CudaErrors.name(12345)).isEqualTo("CUDA_ERROR_UNRECOGNIZED_12345");
    assertThat(CudaErrors.known(12345)).isFalse();
  }

  @Test
  void exceptionMessageNamesCallCodeNameAndDescription() {
    CudaException e = new CudaException("cuLaunchKernel", 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument");
    assertThat(e.getMessage()).isEqualTo("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument");
    assertThat(e.call()).isEqualTo("cuLaunchKernel");
    assertThat(e.code()).isEqualTo(1);
    assertThat(e.errorName()).isEqualTo("CUDA_ERROR_INVALID_VALUE");
    assertThat(e.errorString()).isEqualTo("invalid argument");
  }

  @Test
  void nvrtcNames() {
    assertThat(Nvrtc.errorName(0)).isEqualTo("NVRTC_SUCCESS");
    assertThat(Nvrtc.errorName(5)).isEqualTo("NVRTC_ERROR_INVALID_OPTION");
    assertThat(Nvrtc.errorName(6)).isEqualTo("NVRTC_ERROR_COMPILATION");
    assertThat(Nvrtc.errorName(11)).isEqualTo("NVRTC_ERROR_INTERNAL_ERROR");
    assertThat(Nvrtc.errorName(-1)).isEqualTo("NVRTC_ERROR_UNRECOGNIZED_-1");
    NvrtcException e = new NvrtcException("nvrtcCompileProgram", 6, "NVRTC_ERROR_COMPILATION", "k.cu for compute_90",
        "k.cu(1): error: identifier \"y\" is undefined\n");
    assertThat(e.getMessage())
        .startsWith("nvrtcCompileProgram failed (k.cu for compute_90): NVRTC_ERROR_COMPILATION (6)\n")
        .contains("identifier \"y\" is undefined");
    assertThat(e.log()).contains("error");
  }

  /** The fallback table must match the cuda.h it was taken from, where a toolkit is installed (CI has one). */
  @Test
  void tableMatchesCudaHeader() throws Exception {
    Path h = Path.of(System.getenv().getOrDefault("CUDA_HOME", "/usr/local/cuda"), "include", "cuda.h");
    assumeTrue(Files.isRegularFile(h), "no cuda.h at " + h);
    Matcher m = Pattern.compile("^\\s+(CUDA_(?:SUCCESS|ERROR_[A-Z0-9_]+))\\s*=\\s*(\\d+)", Pattern.MULTILINE)
        .matcher(Files.readString(h));
    int n = 0;
    while (m.find()) {
      assertThat(CudaErrors.name(Integer.parseInt(m.group(2)))).as("code %s", m.group(2)).isEqualTo(m.group(1));
      n++;
    }
    assertThat(n).isGreaterThan(50);
  }
}
