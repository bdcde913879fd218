package unsupported;

import dev.taco.kernels.Parallel;

public class WriteInExpression {
  public static void k(int[] x, int[] y, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      y[i] = next(x, i) + x[i]; // ERROR: next writes an array and returns a value
    }
  }

  /** Writes through a helper: the write counts for the caller too. */
  static int next(int[] c, int j) {
    return bump(c, j);
  }

  static int bump(int[] c, int j) {
    c[j] += 1;
    return c[j];
  }
}
