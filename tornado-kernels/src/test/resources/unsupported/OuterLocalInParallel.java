package unsupported;

import dev.taco.kernels.Parallel;

public class OuterLocalInParallel {
  public static void k(float[] a, float[] out, int n) {
    float s = 0f;
    for (@Parallel int i = 0; i < n; i++) {
      s += a[i]; // ERROR: s is declared outside the @Parallel loop: on the GPU each thread has its own copy
      out[i] = s;
    }
  }
}
