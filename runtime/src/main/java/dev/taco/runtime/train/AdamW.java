package dev.taco.runtime.train;

import dev.taco.kernels.Parallel;

/**
 * AdamW (Loshchilov &amp; Hutter, "Decoupled Weight Decay Regularization", 2019) over a flat parameter array, the
 * update of llm.c's {@code gpt2_update}. Moments {@code m}, {@code v} are float32 state of the same length.
 */
public final class AdamW {
  private AdamW() {}

  /**
   * One update of {@code params[0..n)} in place from {@code grads} (already scaled, e.g. by gradient clipping).
   *
   * @param step 1-based step count, for bias correction
   * @param decay per-element weight decay switch ({@code 0} or {@code 1}): LayerNorm gains and biases get none
   */
  public static void update(float[] params, float[] grads, float[] m, float[] v, byte[] decay, int n, float lr,
      float beta1, float beta2, float eps, float weightDecay, float gradScale, int step) {
    float c1 = 1f - (float) Math.pow(beta1, step);
    float c2 = 1f - (float) Math.pow(beta2, step);
    for (@Parallel int i = 0; i < n; i++) {
      float g = grads[i] * gradScale;
      float mi = beta1 * m[i] + (1f - beta1) * g;
      float vi = beta2 * v[i] + (1f - beta2) * g * g;
      m[i] = mi;
      v[i] = vi;
      float mhat = mi / c1;
      float vhat = vi / c2;
      params[i] -= lr * (mhat / ((float) Math.sqrt(vhat) + eps) + weightDecay * decay[i] * params[i]);
    }
  }
}
