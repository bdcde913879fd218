package dev.taco.kernels.cpu;

/**
 * Out-of-place transpose of a row-major float matrix on the CPU, in square tiles of {@value #TILE}: a tile's rows are
 * read and its columns written while both stay in the L1 cache, where an element-by-element loop writes each element to
 * a different cache line (a 1024 x 1024 transpose: one 64-byte line touched per element written, against one per 16).
 * Used by the token-axis wire layout ({@code collective.HostWire}) and {@code taco analyze}.
 */
public final class Transpose {
  private Transpose() {}

  /** Tile edge, in elements: a 32 x 32 float tile is 4 KiB, read and written tiles together 8 KiB of L1. */
  static final int TILE = 32;

  /**
   * {@code dst} (cols x rows) = {@code src} (rows x cols) transposed, both row-major and dense from their offsets.
   *
   * @throws IllegalArgumentException if a size or offset is negative or a matrix does not fit its array
   */
  public static void transpose(float[] src, int srcOff, int rows, int cols, float[] dst, int dstOff) {
    long n = (long) rows * cols;
    if (rows < 0 || cols < 0 || srcOff < 0 || dstOff < 0 || srcOff + n > src.length || dstOff + n > dst.length) {
      throw new IllegalArgumentException("transpose of " + rows + " x " + cols + " from offset " + srcOff + " of "
          + src.length + " into offset " + dstOff + " of " + dst.length + " elements does not fit");
    }
    for (int r0 = 0; r0 < rows; r0 += TILE) {
      int r1 = Math.min(rows, r0 + TILE);
      for (int c0 = 0; c0 < cols; c0 += TILE) {
        int c1 = Math.min(cols, c0 + TILE);
        for (int r = r0; r < r1; r++) {
          int s = srcOff + r * cols;
          for (int c = c0; c < c1; c++) {
            dst[dstOff + c * rows + r] = src[s + c];
          }
        }
      }
    }
  }
}
