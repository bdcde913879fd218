package dev.taco.kernels.cuda;

/**
 * A grid or block size (CUDA {@code dim3}): counts of blocks per grid or threads per block.
 *
 * @param x size along x, ≥ 1
 * @param y size along y, ≥ 1
 * @param z size along z, ≥ 1
 */
public record Dim3(int x, int y, int z) {
  /**
   * @throws IllegalArgumentException if a component is &lt; 1
   */
  public Dim3 {
    if (x < 1 || y < 1 || z < 1)
      throw new IllegalArgumentException("dim3 components must be >= 1: " + x + "x" + y + "x" + z);
  }

  /**
   * @param x size along x
   * @return {@code (x, 1, 1)}
   * @throws IllegalArgumentException if x &lt; 1
   */
  public static Dim3 of(int x) { return new Dim3(x, 1, 1); }

  /**
   * @param x size along x
   * @param y size along y
   * @return {@code (x, y, 1)}
   * @throws IllegalArgumentException if a component is &lt; 1
   */
  public static Dim3 of(int x, int y) { return new Dim3(x, y, 1); }

  /**
   * Blocks needed to cover {@code n} items with {@code perBlock} items per block (ceiling division).
   *
   * @param n        item count, ≥ 1
   * @param perBlock items per block, ≥ 1
   * @return {@code (ceil(n / perBlock), 1, 1)}
   * @throws IllegalArgumentException if the count exceeds 2^31 − 1 blocks or an argument is &lt; 1
   */
  public static Dim3 cover(long n, int perBlock) {
    if (n < 1 || perBlock < 1) throw new IllegalArgumentException("n and perBlock must be >= 1");
    long b = (n + perBlock - 1) / perBlock;
    if (b > Integer.MAX_VALUE) throw new IllegalArgumentException("grid too large: " + b + " blocks");
    return of((int) b);
  }

  /** @return x·y·z */
  public long volume() { return (long) x * y * z; }
}
