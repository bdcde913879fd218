package unsupported;

import dev.taco.kernels.Parallel;

public class InstanceCall {
  public static void k(int[] x, int[] y, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      x[i] = y.clone()[i]; // ERROR: instance method calls are not supported
    }
  }
}
