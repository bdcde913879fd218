package unsupported;

import dev.taco.kernels.KernelContext;

public class SharedArrayInHelper {
  public static void k(KernelContext ctx, float[] x) {
    float a = sum(ctx, x[ctx.globalIdx]);
    x[ctx.globalIdx] = a;
  }

  static float sum(KernelContext ctx, float v) {
    float[] s = ctx.allocateFloatLocalArray(32); // ERROR: not in a device function
    s[ctx.localIdx & 31] = v;
    ctx.barrier();
    return s[0];
  }
}
