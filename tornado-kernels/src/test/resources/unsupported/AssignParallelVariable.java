package unsupported;

import dev.taco.kernels.Parallel;

public class AssignParallelVariable {
  public static void k(int[] out, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      out[i] = 1;
      i++; // ERROR: the @Parallel loop variable i cannot be assigned in its loop
    }
  }
}
