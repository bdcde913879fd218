package dev.taco.runtime.layers;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;
import dev.taco.kernels.Vec16;

/**
 * GELU with the tanh approximation GPT-2 was trained with:
 * {@code gelu(x) = 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))}.
 *
 * <p>Shapes: {@code inp}, {@code out} are (N), any flattening of (B,T,4C). Elementwise.
 * Reference: Hendrycks, Gimpel, "Gaussian Error Linear Units (GELUs)", arXiv:1606.08415, §2;
 * GPT-2's {@code gelu} in its model.py uses this form, not the exact erf one, so a model that is to
 * match GPT-2's numbers must too.
 */
public final class Gelu {
  private Gelu() {}

  /**
   * sqrt(2/π) rounded to float, {@code (float) Math.sqrt(2.0 / Math.PI)} (GeluTest checks the bits), written as a
   * literal so that it is a compile-time constant the kernel translator inlines.
   */
  static final float SQRT_2_OVER_PI = 0.7978846f;
  static final float K = 0.044715f;

  /** out(N) = gelu(inp(N)). Overwrites {@code out}; {@code out} may alias {@code inp} at the same offset. */
  public static void forward(float[] out, int outOff, float[] inp, int inpOff, int N) {
    checkForward(out, outOff, inp, inpOff, N);
    geluForward(out, outOff, inp, inpOff, N);
  }

  /** The checks of {@link #forward} (and of {@link GeluLanes#forward}). */
  static void checkForward(float[] out, int outOff, float[] inp, int inpOff, int N) {
    Check.positive("N", N);
    Check.span("out", out, outOff, N);
    Check.span("inp", inp, inpOff, N);
  }

  /** Kernel of {@link #forward}, one iteration per element. No checks. */
  @Kernel
  public static void geluForward(float[] out, int outOff, float[] inp, int inpOff, int N) {
    for (@Parallel int i = 0; i < N; i++) {
      out[outOff + i] = gelu(inp[inpOff + i]);
    }
  }

  /**
   * Kernel: the GPU's bf16-mode GELU forward, eight elements per iteration: {@code out = bf16(gelu(pre))} from the bf16
   * pre-activation the fc GEMM wrote (PyTorch's bf16 autocast stores both in bf16 too); 16-byte loads and stores.
   * {@code groups} = N / 8; offsets multiples of 8 elements. No checks.
   */
  @Kernel
  public static void geluForwardBf16(short[] out, int outOff, short[] pre, int preOff, int groups) {
    for (@Parallel int g = 0; g < groups; g++) {
      float[] v = new float[8];
      Vec16.loadBf16x8(pre, preOff + 8 * g, v);
      for (int k = 0; k < 8; k++) {
        v[k] = gelu(v[k]);
      }
      Vec16.storeBf16x8(out, outOff + 8 * g, v);
    }
  }

  /**
   * dinp(N) += dout · gelu'(inp), where with u = sqrt(2/π)(x + 0.044715x³):
   * gelu'(x) = 0.5(1 + tanh u) + 0.5·x·(1 − tanh² u)·sqrt(2/π)(1 + 3·0.044715x²).
   */
  public static void backward(float[] dinp, int dinpOff, float[] dout, int doutOff, float[] inp, int inpOff, int N) {
    checkBackward(dinp, dinpOff, dout, doutOff, inp, inpOff, N);
    geluBackward(dinp, dinpOff, dout, doutOff, inp, inpOff, N);
  }

  /** The checks of {@link #backward} (and of {@link GeluLanes#backward}). */
  static void checkBackward(float[] dinp, int dinpOff, float[] dout, int doutOff, float[] inp, int inpOff, int N) {
    Check.positive("N", N);
    Check.span("dinp", dinp, dinpOff, N);
    Check.span("dout", dout, doutOff, N);
    Check.span("inp", inp, inpOff, N);
  }

  /** Kernel of {@link #backward}, one iteration per element. No checks. */
  @Kernel
  public static void geluBackward(float[] dinp, int dinpOff, float[] dout, int doutOff, float[] inp, int inpOff,
      int N) {
    for (@Parallel int i = 0; i < N; i++) {
      dinp[dinpOff + i] += grad(inp[inpOff + i]) * dout[doutOff + i];
    }
  }

  /**
   * Kernel: {@code dinp = GELU'(inp) · dout}, overwriting (the GPU backend's form: the first writer of the gradient,
   * so it needs no zeroing pass; the same value as {@link #geluBackward} into zeros). No checks.
   */
  @Kernel
  public static void geluBackwardInto(float[] dinp, int dinpOff, float[] dout, int doutOff, float[] inp, int inpOff,
      int N) {
    for (@Parallel int i = 0; i < N; i++) {
      dinp[dinpOff + i] = grad(inp[inpOff + i]) * dout[doutOff + i];
    }
  }

  /**
   * Kernel: the GPU's bf16-mode GELU backward, eight elements per iteration: {@code dinp = bf16(GELU'(pre) · dout)},
   * overwritten, all three bf16 (dout as the dX GEMM wrote it, pre as {@link #geluForwardBf16} read it): the operand the
   * previous linear layer's backward multiplies and sums for its bias gradient; 16-byte loads and stores.
   * {@code groups} = N / 8; offsets multiples of 8 elements. No checks.
   */
  @Kernel
  public static void geluBackwardBf16(short[] dinp, int dinpOff, short[] dout, int doutOff, short[] pre, int preOff,
      int groups) {
    for (@Parallel int g = 0; g < groups; g++) {
      float[] d = new float[8];
      float[] x = new float[8];
      Vec16.loadBf16x8(dout, doutOff + 8 * g, d);
      Vec16.loadBf16x8(pre, preOff + 8 * g, x);
      for (int k = 0; k < 8; k++) {
        d[k] = grad(x[k]) * d[k];
      }
      Vec16.storeBf16x8(dinp, dinpOff + 8 * g, d);
    }
  }

  /** gelu(x) of the tanh form. */
  static float gelu(float x) {
    float u = SQRT_2_OVER_PI * (x + K * x * x * x);
    return 0.5f * x * (1f + tanh(u));
  }

  /** GELU'(x) of the tanh form. */
  static float grad(float x) {
    float u = SQRT_2_OVER_PI * (x + K * x * x * x);
    float th = tanh(u);
    float du = SQRT_2_OVER_PI * (1f + 3f * K * x * x);
    return 0.5f * (1f + th) + 0.5f * x * (1f - th * th) * du;
  }

  static float tanh(float u) {
    return 1f - 2f / ((float) Math.exp(2f * u) + 1f);
  }
}
