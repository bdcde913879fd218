package unsupported;

import dev.taco.kernels.Parallel;

public class DynamicArray {
  public static void k(float[] x, int n, int g) {
    for (@Parallel int i = 0; i < n; i++) {
      float[] v = new float[g]; // ERROR: array size must be a positive compile-time constant
      x[i] = v[0];
    }
  }
}
