package unsupported;

import dev.taco.kernels.Parallel;

public class ParameterInParallel {
  public static void k(int[] out, int n, int step) {
    for (@Parallel int i = 0; i < n; i++) {
      step = step * 2; // ERROR: step is declared outside the @Parallel loop
      out[i] = step;
    }
  }
}
