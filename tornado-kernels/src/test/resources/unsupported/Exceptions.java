package unsupported;

import dev.taco.kernels.Parallel;

public class Exceptions {
  public static void k(int[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      if (x[i] < 0) {
        throw new IllegalArgumentException(); // ERROR: exceptions are not supported
      }
    }
  }
}
