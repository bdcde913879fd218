package unsupported;

import dev.taco.kernels.Parallel;

public class ReturnInParallel {
  public static void k(int[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      if (x[i] == 0) {
        return; // ERROR: return inside the @Parallel loop
      }
      x[i] = 1;
    }
  }
}
