package unsupported;

import dev.taco.kernels.Parallel;

public class NonConstantField {
  static int scale = 3;

  public static void k(int[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      x[i] = x[i] * scale; // ERROR: is not a static final constant
    }
  }
}
