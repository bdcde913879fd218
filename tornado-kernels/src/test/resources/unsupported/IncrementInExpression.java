package unsupported;

import dev.taco.kernels.Parallel;

public class IncrementInExpression {
  public static void k(int[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      int j = 0;
      x[i] = j++; // ERROR: ++ and -- are only supported as statements
    }
  }
}
