package unsupported;

import dev.taco.kernels.Parallel;

public class OuterArrayInParallel {
  public static void k(int[] a, int[] out, int n) {
    int[] hist = new int[8];
    for (@Parallel int i = 0; i < n; i++) {
      hist[a[i] & 7] += 1; // ERROR: hist is declared outside the @Parallel loop
      out[i] = hist[a[i] & 7];
    }
  }
}
