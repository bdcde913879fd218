package unsupported;

import dev.taco.kernels.Parallel;

public class Allocation {
  public static void k(float[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      StringBuilder sb = new StringBuilder(); // ERROR: not supported on the GPU
      x[i] = sb.length();
    }
  }
}
