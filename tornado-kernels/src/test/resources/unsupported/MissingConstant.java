package unsupported;

import dev.taco.kernels.Constant;
import dev.taco.kernels.Parallel;

public class MissingConstant {
  public static void k(float[] x, int n,
      @Constant int g) { // ERROR: @Constant parameter 'g' has no value in the specialisation
    for (@Parallel int i = 0; i < n; i++) {
      x[i] = g;
    }
  }
}
