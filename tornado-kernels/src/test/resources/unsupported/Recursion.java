package unsupported;

import dev.taco.kernels.Parallel;

public class Recursion {
  public static void k(int[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      x[i] = fact(x[i]);
    }
  }

  static int fact(int v) { // ERROR: recursion is not supported on the GPU: fact -> fact
    return v <= 1 ? 1 : v * fact(v - 1);
  }
}
