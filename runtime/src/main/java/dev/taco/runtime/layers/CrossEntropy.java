package dev.taco.runtime.layers;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.Parallel;

/**
 * Softmax over the vocabulary fused with the cross-entropy loss against the next token.
 *
 * <p>Shapes: {@code logits}, {@code probs} are (B,T,V); {@code targets} is (B,T) ids in [0,V);
 * {@code losses} is (B,T), the per-position loss −log softmax(logits)[target]. The training loss is
 * their mean. Fusing the two gives the simple gradient softmax − onehot and avoids forming the
 * softmax Jacobian. Reference: Goodfellow, Bengio, Courville, "Deep Learning", 2016, §6.2.2.3.
 */
public final class CrossEntropy {
  private CrossEntropy() {}

  /**
   * probs(B,T,V) = softmax(logits) per position, losses(B,T) = −log probs[target]; returns the mean
   * loss over the B·T positions. Overwrites {@code probs} and {@code losses}.
   */
  public static float forward(float[] losses, int lossesOff, float[] probs, int probsOff,
      float[] logits, int logitsOff, int[] targets, int targetsOff,
      int B, int T, int V) {
    checkForward(losses, lossesOff, probs, probsOff, logits, logitsOff, targets, targetsOff, B, T, V);
    crossentropyForward(losses, lossesOff, probs, probsOff, logits, logitsOff, targets, targetsOff, B, T, V);
    return mean(losses, lossesOff, B * T);
  }

  /** The checks of {@link #forward} (and of {@link CrossEntropyLanes#forward}). */
  static void checkForward(float[] losses, int lossesOff, float[] probs, int probsOff, float[] logits, int logitsOff,
      int[] targets, int targetsOff, int B, int T, int V) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("V", V);
    Check.span("losses", losses, lossesOff, Check.n(B, T));
    Check.span("probs", probs, probsOff, Check.n(B, T, V));
    Check.span("logits", logits, logitsOff, Check.n(B, T, V));
    Check.span("targets", targets, targetsOff, Check.n(B, T));
    Check.ids("targets", targets, targetsOff, B * T, V);
  }

  /**
   * The mean of {@code n} losses, a sequential reduction in float64 on the host, in order: the mean does not depend on
   * a launch shape.
   */
  static float mean(float[] losses, int lossesOff, int n) {
    double total = 0.0;
    for (int i = 0; i < n; i++) {
      total += losses[lossesOff + i];
    }
    return (float) (total / n);
  }

  /**
   * Kernel of {@link #forward}: softmax and loss fused, one iteration per position (b,t): probs[b,t,:] and
   * losses[b,t]. Targets must lie in [0,V). No checks.
   */
  @Kernel
  public static void crossentropyForward(float[] losses, int lossesOff, float[] probs, int probsOff,
      float[] logits, int logitsOff, int[] targets, int targetsOff,
      int B, int T, int V) {
    for (@Parallel int bt = 0; bt < B * T; bt++) {
      int l = logitsOff + bt * V;
      int p = probsOff + bt * V;
      // Subtract the row maximum so that exp() cannot overflow; it cancels in the ratio.
      float max = Float.NEGATIVE_INFINITY;
      for (int v = 0; v < V; v++) {
        max = Math.max(max, logits[l + v]);
      }
      float sum = 0f;
      for (int v = 0; v < V; v++) {
        float e = (float) Math.exp(logits[l + v] - max);
        probs[p + v] = e;
        sum += e;
      }
      float inv = 1f / sum;
      for (int v = 0; v < V; v++) {
        probs[p + v] *= inv;
      }
      // log-sum-exp form rather than −log(probs[target]): finite even when that probability underflows.
      int tgt = targets[targetsOff + bt];
      losses[lossesOff + bt] = (float) (Math.log(sum) + max - logits[l + tgt]);
    }
  }

  /**
   * SIMT kernel, the GPU's form of {@link #crossentropyForward}: one warp per position, lanes striding over the V
   * logits, the maximum and the sum by warp reductions. No checks; targets must lie in [0,V).
   */
  @Kernel
  public static void crossentropyForwardWarp(KernelContext ctx, float[] losses, int lossesOff, float[] probs,
      int probsOff, float[] logits, int logitsOff, int[] targets,
      int targetsOff, int B, int T, int V) {
    int bt = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (bt >= B * T) {
      return;
    }
    int lane = ctx.laneId();
    int l = logitsOff + bt * V;
    int p = probsOff + bt * V;
    float max = Float.NEGATIVE_INFINITY;
    for (int v = lane; v < V; v += KernelContext.WARP_SIZE) {
      max = Math.max(max, logits[l + v]);
    }
    max = ctx.warpReduceMax(max);
    float sum = 0f;
    for (int v = lane; v < V; v += KernelContext.WARP_SIZE) {
      float e = (float) Math.exp(logits[l + v] - max);
      probs[p + v] = e;
      sum += e;
    }
    sum = ctx.warpReduceSum(sum);
    float inv = 1f / sum;
    for (int v = lane; v < V; v += KernelContext.WARP_SIZE) {
      probs[p + v] *= inv;
    }
    if (lane == 0) {
      losses[lossesOff + bt] = (float) (Math.log(sum) + max - logits[l + targets[targetsOff + bt]]);
    }
  }

  /**
   * dlogits(B,T,V) += dloss · (probs − onehot(targets)) / (B·T): the gradient of dloss × mean loss.
   * {@code dloss} is 1 for a plain step; a caller uses e.g. 1/accumulationSteps or a loss scale.
   */
  public static void backward(float[] dlogits, int dlogitsOff, float[] probs, int probsOff,
      int[] targets, int targetsOff, int B, int T, int V, float dloss) {
    checkBackward(dlogits, dlogitsOff, probs, probsOff, targets, targetsOff, B, T, V);
    crossentropyBackward(dlogits, dlogitsOff, probs, probsOff, targets, targetsOff, B, T, V, dloss);
  }

  /** The checks of {@link #backward} (and of {@link CrossEntropyLanes#backward}). */
  static void checkBackward(float[] dlogits, int dlogitsOff, float[] probs, int probsOff, int[] targets,
      int targetsOff, int B, int T, int V) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("V", V);
    Check.span("dlogits", dlogits, dlogitsOff, Check.n(B, T, V));
    Check.span("probs", probs, probsOff, Check.n(B, T, V));
    Check.span("targets", targets, targetsOff, Check.n(B, T));
    Check.ids("targets", targets, targetsOff, B * T, V);
  }

  /** Kernel of {@link #backward}, one iteration per element (b,t,v). Targets must lie in [0,V). No checks. */
  @Kernel
  public static void crossentropyBackward(float[] dlogits, int dlogitsOff, float[] probs, int probsOff,
      int[] targets, int targetsOff, int B, int T, int V, float dloss) {
    float scale = dloss / (B * T);
    for (@Parallel int i = 0; i < B * T * V; i++) {
      int bt = i / V;
      float indicator = i - bt * V == targets[targetsOff + bt] ? 1f : 0f;
      dlogits[dlogitsOff + i] += scale * (probs[probsOff + i] - indicator);
    }
  }
}
