package unsupported;

import dev.taco.kernels.Parallel;

public class Strings {
  public static void k(int[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      x[i] = "abc".length(); // ERROR: strings and null are not supported
    }
  }
}
