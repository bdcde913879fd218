package unsupported;

import dev.taco.kernels.Parallel;

public class ArrayLength {
  public static void k(float[] x) {
    for (@Parallel int i = 0; i < x.length; i++) { // ERROR: array length is only known for fixed-size local arrays
      x[i] = 0f;
    }
  }
}
