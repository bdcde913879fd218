package dev.taco.runtime.layers;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;

/**
 * Token + position embedding, the first layer of GPT-2: {@code out[b,t,:] = wte[tok[b,t],:] + wpe[t,:]}.
 *
 * <p>Shapes: {@code inp} is (B,T) token ids in [0,V) (bytes 0..255 in this project, V = 256);
 * {@code wte} is (V,C); {@code wpe} is (maxT,C) of which rows 0..T-1 are used; {@code out} is (B,T,C).
 * Reference: Radford et al., "Language Models are Unsupervised Multitask Learners" (GPT-2), 2019, §2.3,
 * which keeps the learned absolute position embedding of GPT-1.
 */
public final class Encoder {
  private Encoder() {}

  /** out(B,T,C) = wte[inp[b,t]] + wpe[t]. Overwrites {@code out}. */
  public static void forward(float[] out, int outOff, int[] inp, int inpOff,
      float[] wte, int wteOff, float[] wpe, int wpeOff,
      int B, int T, int C, int V) {
    checkForward(out, outOff, inp, inpOff, wte, wteOff, wpe, wpeOff, B, T, C, V);
    encoderForward(out, outOff, inp, inpOff, wte, wteOff, wpe, wpeOff, B, T, C);
  }

  /** The checks of {@link #forward} (and of {@link EncoderLanes#forward}). */
  static void checkForward(float[] out, int outOff, int[] inp, int inpOff, float[] wte, int wteOff, float[] wpe,
      int wpeOff, int B, int T, int C, int V) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("C", C);
    Check.positive("V", V);
    Check.span("out", out, outOff, Check.n(B, T, C));
    Check.span("inp", inp, inpOff, Check.n(B, T));
    Check.span("wte", wte, wteOff, Check.n(V, C));
    Check.span("wpe", wpe, wpeOff, Check.n(T, C));
    Check.ids("inp", inp, inpOff, B * T, V);
  }

  /**
   * Kernel of {@link #forward}: one iteration per element (b,t,c), {@code out[b,t,c] = wte[inp[b,t],c] + wpe[t,c]}
   * (consecutive iterations touch consecutive channels: coalesced on a GPU). No checks (the wrapper's); ids must lie
   * in [0,V).
   */
  @Kernel
  public static void encoderForward(float[] out, int outOff, int[] inp, int inpOff,
      float[] wte, int wteOff, float[] wpe, int wpeOff, int B, int T, int C) {
    for (@Parallel int i = 0; i < B * T * C; i++) {
      int bt = i / C;
      int c = i - bt * C;
      out[outOff + i] = wte[wteOff + inp[inpOff + bt] * C + c] + wpe[wpeOff + (bt % T) * C + c];
    }
  }

  /**
   * dwte(V,C) += scatter of dout by token, dwpe(T,C) += dout summed over the batch.
   *
   * <p>Several positions may carry the same token, so a loop over positions would race on dwte. We
   * loop over vocabulary rows instead: row v scans the (small, cache-resident) token array and adds the
   * dout rows of the positions holding v. Every dwte row has one writer, each dout row is read once in
   * total, the innermost loop is contiguous, and the result does not depend on the thread count. The
   * scan costs V·B·T integer compares, negligible for byte-level V = 256.
   */
  public static void backward(float[] dwte, int dwteOff, float[] dwpe, int dwpeOff,
      float[] dout, int doutOff, int[] inp, int inpOff,
      int B, int T, int C, int V) {
    checkBackward(dwte, dwteOff, dwpe, dwpeOff, dout, doutOff, inp, inpOff, B, T, C, V);
    encoderBackwardWte(dwte, dwteOff, dout, doutOff, inp, inpOff, B, T, C, V);
    encoderBackwardWpe(dwpe, dwpeOff, dout, doutOff, B, T, C);
  }

  /** The checks of {@link #backward} (and of {@link EncoderLanes#backward}). */
  static void checkBackward(float[] dwte, int dwteOff, float[] dwpe, int dwpeOff, float[] dout, int doutOff,
      int[] inp, int inpOff, int B, int T, int C, int V) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("C", C);
    Check.positive("V", V);
    Check.span("dwte", dwte, dwteOff, Check.n(V, C));
    Check.span("dwpe", dwpe, dwpeOff, Check.n(T, C));
    Check.span("dout", dout, doutOff, Check.n(B, T, C));
    Check.span("inp", inp, inpOff, Check.n(B, T));
    Check.ids("inp", inp, inpOff, B * T, V);
  }

  /**
   * Kernel: dwte(V,C) += the dout rows of the positions holding each token; one iteration per vocabulary row v,
   * which scans the (B,T) ids and gathers (see {@link #backward}: one writer per row, deterministic).
   */
  @Kernel
  public static void encoderBackwardWte(float[] dwte, int dwteOff, float[] dout, int doutOff, int[] inp, int inpOff,
      int B, int T, int C, int V) {
    for (@Parallel int v = 0; v < V; v++) {
      int e = dwteOff + v * C;
      for (int bt = 0; bt < B * T; bt++) {
        if (inp[inpOff + bt] == v) {
          int d = doutOff + bt * C;
          for (int c = 0; c < C; c++) {
            dwte[e + c] += dout[d + c];
          }
        }
      }
    }
  }

  /** Kernel: dwpe(T,C) += dout(B,T,C) summed over b, in order b = 0..B-1; one iteration per element (t,c). */
  @Kernel
  public static void encoderBackwardWpe(float[] dwpe, int dwpeOff, float[] dout, int doutOff, int B, int T, int C) {
    for (@Parallel int i = 0; i < T * C; i++) {
      for (int b = 0; b < B; b++) {
        dwpe[dwpeOff + i] += dout[doutOff + b * T * C + i];
      }
    }
  }

  /**
   * Kernel: the one-hot rows of the token ids, {@code out[n·V + v] = (inp[n] == v) ? 1 : 0} for n &lt; N, one iteration
   * per element (the GPU backend's form of the wte gradient: {@code dwte += onehot^T · dout} as one exact fp32 GEMM,
   * whose products are exact and whose sums differ from {@link #encoderBackwardWte}'s only in order). No checks.
   */
  @Kernel
  public static void oneHotRows(float[] out, int outOff, int[] inp, int inpOff, int N, int V) {
    for (@Parallel int i = 0; i < N * V; i++) {
      int n = i / V;
      out[outOff + i] = inp[inpOff + n] == i - n * V ? 1f : 0f;
    }
  }

  /**
   * Kernel: {@link #encoderBackwardWte}'s sums with one iteration per element (v,c) of dwte, each scanning the ids in
   * position order: the same additions in the same order per element, with V·C iterations instead of V (the GPU
   * backend's form: a warp reads one id for 32 consecutive channels; on one CPU thread the V-row form is the faster).
   * No checks; ids must lie in [0,V).
   */
  @Kernel
  public static void encoderBackwardWteColumns(float[] dwte, int dwteOff, float[] dout, int doutOff, int[] inp,
      int inpOff, int B, int T, int C, int V) {
    for (@Parallel int i = 0; i < V * C; i++) {
      int v = i / C;
      int c = i - v * C;
      float s = dwte[dwteOff + i];
      for (int bt = 0; bt < B * T; bt++) {
        if (inp[inpOff + bt] == v) {
          s += dout[doutOff + bt * C + c];
        }
      }
      dwte[dwteOff + i] = s;
    }
  }
}
