package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.codec.Fp8Format;
import dev.taco.codec.PayloadHeader;
import dev.taco.codec.TacoCodec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The host helpers of {@link TwoShotGpuKernels} (no GPU needed): block sizes, payload sizes, shape checks. */
class TwoShotGpuShapeTest {
  @ParameterizedTest(name = "cols={0} G={1}: {2} threads")
  @CsvSource({"1, 32, 32", "1, 256, 32", "7, 64, 32", "1024, 32, 32", "1025, 32, 64", "3072, 64, 96", "4100, 32, 160",
      "4100, 256, 160", "16384, 64, 512", "16383, 256, 512", "16384, 32, 512"})
  void threadsCoverThePaddedRowInWholeWarps(int cols, int g, int threads) {
    assertThat(TwoShotGpuKernels.threads(cols, g)).isEqualTo(threads);
  }

  @Test
  void rawThreadsAndSizes() {
    assertThat(TwoShotGpuKernels.rawThreads(1)).isEqualTo(32);
    assertThat(TwoShotGpuKernels.rawThreads(1025)).isEqualTo(64);
    assertThat(TwoShotGpuKernels.rawThreads(16384)).isEqualTo(512);
    assertThat(TwoShotGpuKernels.rawBytes(8, 100, TwoShotGpuKernels.RAW_BF16)).isEqualTo(1600);
    assertThat(TwoShotGpuKernels.transposeBlocks(33, 64)).isEqualTo(4);
    for (int g : TwoShotGpuKernels.GROUP_SIZES) {
      for (int cols : new int[] {1, 7, 333, 4100, 16384}) {
        TacoCodec c = new TacoCodec(g, Fp8Format.E5M2, 1f, false);
        assertThat(TwoShotGpuKernels.bodyBytes(8, cols, g)).isEqualTo(c.encodedSize(8, cols) - PayloadHeader.SIZE);
      }
    }
  }

  @ParameterizedTest(name = "{0} x {1}, G={2}")
  @CsvSource({"8, 1, 32", "8, 7, 256", "16, 4100, 64", "8, 16384, 128", "2, 1024, 64", "65536, 16384, 256"})
  void supportedShapesPass(int rows, int cols, int g) {
    assertThatCode(() -> TwoShotGpuKernels.checkShape(rows, cols, g)).doesNotThrowAnyException();
  }

  @ParameterizedTest(name = "{0} x {1}, G={2}: {3}")
  @CsvSource(delimiter = '|', value = {
      "8|100|16|G must be 32, 64, 128 or 256, got 16",
      "8|100|512|G must be 32, 64, 128 or 256, got 512",
      "0|100|64|rows must be positive, got 0",
      "8|0|64|cols = 0 unsupported: cols must be in 1..16384",
      "8|16385|64|cols = 16385 unsupported",
      "3|100|64|must be a multiple of 8 so that the FP8 codes are 8-byte aligned (pad rows to a multiple of 8; got rows = 3)",
      "262144|16384|32|over 2^31-1"})
  void unsupportedShapesAreNamed(int rows, int cols, int g, String message) {
    assertThatThrownBy(() -> TwoShotGpuKernels.checkShape(rows, cols, g)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(message);
  }

  @Test
  void rawShapesAndSlots() {
    assertThatCode(() -> TwoShotGpuKernels.checkRawShape(3, 7, TwoShotGpuKernels.RAW_FP32)).doesNotThrowAnyException();
    assertThatThrownBy(() -> TwoShotGpuKernels.checkRawShape(3, 7, 3)).hasMessageContaining("raw wire format must be");
    assertThatThrownBy(() -> TwoShotGpuKernels.checkRawShape(3, 20000, 2)).hasMessageContaining("cols = 20000");
    assertThatCode(() -> TwoShotGpuKernels.checkSlots(4, 4096, 4000)).doesNotThrowAnyException();
    assertThatThrownBy(() -> TwoShotGpuKernels.checkSlots(4, 4008, 4000)).hasMessageContaining("multiple of 16");
    assertThatThrownBy(() -> TwoShotGpuKernels.checkSlots(4, 3984, 4000)).hasMessageContaining("at least");
    assertThatThrownBy(() -> TwoShotGpuKernels.checkSlots(0, 16, 0)).hasMessageContaining("world must be positive");
    assertThatThrownBy(() -> TwoShotGpuKernels.checkSlots(8, 1L << 28, 1000)).hasMessageContaining("over 2^31-1");
  }
}
