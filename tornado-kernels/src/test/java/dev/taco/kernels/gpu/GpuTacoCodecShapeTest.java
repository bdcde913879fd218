package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** {@link GpuTacoCodec#checkShape} (host side, no GPU needed): what the kernels support, and a message per violation. */
class GpuTacoCodecShapeTest {
  @ParameterizedTest(name = "{0} x {1}, G={2}")
  @CsvSource({"2, 1024, 64", "8, 4096, 64", "6, 5120, 64", "4, 16384, 256", "32, 1024, 128", "65536, 16384, 64"})
  void supportedShapesPass(int rows, int cols, int g) {
    assertThatCode(() -> GpuTacoCodec.checkShape(rows, cols, g)).doesNotThrowAnyException();
  }

  @ParameterizedTest(name = "{0} x {1}, G={2}: {3}")
  @CsvSource(delimiter = '|', value = {
      "8|1024|0|G must be one of [64, 128, 256], got 0",
      "8|1024|32|G must be one of [64, 128, 256], got 32",
      "8|1024|100|G must be one of [64, 128, 256]",
      "8|2048|512|G must be one of [64, 128, 256]",
      "0|1024|64|rows must be positive, got 0",
      "-3|1024|64|rows must be positive",
      "8|512|64|cols = 512 unsupported: cols must be a multiple of 1024 in 1024..16384",
      "8|1536|64|cols = 1536 unsupported",
      "8|32768|64|cols = 32768 unsupported",
      "8|0|64|cols = 0 unsupported",
      "65537|16384|64|is more than 2^30 elements",
      "3|1024|64|must be a multiple of 8"})
  void unsupportedShapesAreNamed(int rows, int cols, int g, String message) {
    assertThatThrownBy(() -> GpuTacoCodec.checkShape(rows, cols, g)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(message);
  }
}
