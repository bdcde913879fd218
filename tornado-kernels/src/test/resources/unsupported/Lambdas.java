package unsupported;

import dev.taco.kernels.Parallel;
import java.util.function.IntUnaryOperator;

public class Lambdas {
  public static void k(int[] x, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      IntUnaryOperator f = v -> v + 1; // ERROR: not supported on the GPU
      x[i] = f.applyAsInt(x[i]);
    }
  }
}
