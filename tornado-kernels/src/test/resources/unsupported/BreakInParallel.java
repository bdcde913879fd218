package unsupported;

import dev.taco.kernels.Parallel;

public class BreakInParallel {
  public static void k(float[] a, int[] out, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      for (int j = 0; j < 4; j++) {
        if (a[i] > j) break; // a nested loop's break is fine
      }
      if (a[i] < 0) break; // ERROR: break in the @Parallel loop would stop only this GPU thread's iterations
      out[i] = 1;
    }
  }
}
