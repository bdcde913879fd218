package unsupported;

import dev.taco.kernels.Parallel;

public class SideEffectOutsideLoop {
  public static void k(float[] x, int n) {
    x[0] = 1f; // ERROR: outside the @Parallel loop only local variable declarations are allowed
    for (@Parallel int i = 1; i < n; i++) {
      x[i] = x[0];
    }
  }
}
