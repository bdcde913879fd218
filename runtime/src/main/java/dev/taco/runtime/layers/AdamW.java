package dev.taco.runtime.layers;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;

/**
 * AdamW (Loshchilov &amp; Hutter, "Decoupled Weight Decay Regularization", 2019) over a flat parameter array, the
 * update of llm.c's {@code gpt2_update}. Moments {@code m}, {@code v} are float32 state of the same length.
 *
 * <p>A host wrapper, {@link #update}, checks the arguments and computes the bias corrections; the kernel,
 * {@link #adamwUpdate}, is the elementwise update (docs/design.md §5), translatable to CUDA.
 */
public final class AdamW {
  private AdamW() {}

  /**
   * One update of {@code params[0..n)} in place from {@code grads} (already scaled, e.g. by gradient clipping).
   *
   * @param step 1-based step count, for bias correction
   * @param decay per-element weight decay switch ({@code 0} or {@code 1}): LayerNorm gains and biases get none
   * @throws IllegalArgumentException if {@code n} is negative, an array is shorter than {@code n}, or {@code step < 1}
   */
  public static void update(float[] params, float[] grads, float[] m, float[] v, byte[] decay, int n, float lr,
      float beta1, float beta2, float eps, float weightDecay, float gradScale, int step) {
    check(params, grads, m, v, decay, n, step);
    adamwUpdate(params, 0, grads, 0, m, 0, v, 0, decay, 0, n, lr, beta1, beta2, eps, weightDecay, gradScale,
        biasCorrection(beta1, step), biasCorrection(beta2, step));
  }

  /** The checks of {@link #update} (and of {@link AdamWLanes#update}). */
  static void check(float[] params, float[] grads, float[] m, float[] v, byte[] decay, int n, int step) {
    if (n < 0 || step < 1) {
      throw new IllegalArgumentException("need n >= 0 and step >= 1, got n = " + n + ", step = " + step);
    }
    if (params.length < n || grads.length < n || m.length < n || v.length < n || decay.length < n) {
      throw new IllegalArgumentException("every array needs n = " + n + " elements: params " + params.length
          + ", grads " + grads.length + ", m " + m.length + ", v " + v.length + ", decay " + decay.length);
    }
  }

  /**
   * The bias correction {@code 1 − beta^step} as a float, computed on the host with Java's {@code pow}, so that a CPU
   * and a GPU launch of {@link #adamwUpdate} get the same two floats.
   *
   * @param step 1-based step count
   */
  public static float biasCorrection(float beta, int step) {
    return 1f - (float) Math.pow(beta, step);
  }

  /**
   * Kernel of {@link #update}, one iteration per element of {@code [0, n)} of each array from its offset: with
   * g = gradScale·grads, m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g², params −= lr·(m/c1 / (sqrt(v/c2) + eps) +
   * weightDecay·decay·params), where {@code c1 = 1 − β1^step}, {@code c2 = 1 − β2^step} are the bias corrections.
   * float32 throughout. No checks.
   */
  @Kernel
  public static void adamwUpdate(float[] params, int paramsOff, float[] grads, int gradsOff, float[] m, int mOff,
      float[] v, int vOff, byte[] decay, int decayOff, int n, float lr, float beta1, float beta2, float eps,
      float weightDecay, float gradScale, float c1, float c2) {
    for (@Parallel int i = 0; i < n; i++) {
      float g = grads[gradsOff + i] * gradScale;
      float mi = beta1 * m[mOff + i] + (1f - beta1) * g;
      float vi = beta2 * v[vOff + i] + (1f - beta2) * g * g;
      m[mOff + i] = mi;
      v[vOff + i] = vi;
      float mhat = mi / c1;
      float vhat = vi / c2;
      int p = paramsOff + i;
      params[p] -= lr * (mhat / ((float) Math.sqrt(vhat) + eps) + weightDecay * decay[decayOff + i] * params[p]);
    }
  }
}
