package unsupported;

import dev.taco.kernels.KernelContext;

public class TooMuchShared {
  public static void k(KernelContext ctx, float[] x) {
    float[] a = ctx.allocateFloatLocalArray(8192);
    int[] b = ctx.allocateIntLocalArray(4097); // ERROR: the kernel's shared arrays take 49168 bytes with this one
    a[ctx.localIdx] = x[ctx.globalIdx];
    b[ctx.localIdx] = 1;
    ctx.barrier();
    x[ctx.globalIdx] = a[0] + b[0];
  }
}
