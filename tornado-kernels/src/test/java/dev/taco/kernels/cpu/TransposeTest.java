package dev.taco.kernels.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link Transpose} against the element-by-element definition on fresh random matrices (seed in the messages), at sizes
 * below, at and across the tile edge and degenerate ones, with offsets, leaving the destination outside the matrix
 * untouched; a matrix that does not fit is refused before anything is written.
 */
class TransposeTest {
  @Test
  void equalsTheDefinitionAtEverySizeAroundTheTile() {
    long seed = System.nanoTime();
    SplittableRandom rnd = new SplittableRandom(seed);
    int[] sizes = {0, 1, 2, 31, 32, 33, 64, 65, 100};
    for (int rows : sizes) {
      for (int cols : sizes) {
        float[] src = new float[3 + rows * cols];
        for (int i = 0; i < src.length; i++) src[i] = (float) rnd.nextGaussian();
        float[] dst = new float[5 + rows * cols + 2];
        java.util.Arrays.fill(dst, Float.NaN);
        Transpose.transpose(src, 3, rows, cols, dst, 5);
        for (int r = 0; r < rows; r++) {
          for (int c = 0; c < cols; c++) {
            assertThat(dst[5 + c * rows + r]).as("%d x %d at (%d, %d), seed %d", rows, cols, r, c, seed)
                .isEqualTo(src[3 + r * cols + c]);
          }
        }
        for (int i : new int[] {0, 4, 5 + rows * cols, dst.length - 1}) {
          assertThat(dst[i]).as("outside the matrix, %d x %d", rows, cols).isNaN();
        }
      }
    }
  }

  @Test
  void aMatrixThatDoesNotFitIsRefusedBeforeWriting() {
    float[] dst = new float[10];
    assertThatThrownBy(() -> Transpose.transpose(new float[12], 0, 3, 4, dst, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("3 x 4");
    assertThat(dst).containsOnly(0f);
    assertThatThrownBy(() -> Transpose.transpose(new float[12], -1, 3, 4, new float[12], 0))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
