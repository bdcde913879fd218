package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Lanes.L;
import static dev.taco.runtime.layers.Lanes.S;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;

/**
 * {@link CrossEntropy}'s forward and backward for the CPU on vector lanes ({@link Lanes}), a lane per vocabulary
 * entry, with the kernels' float operations per element, so their bits: the softmax is {@link Lanes#softmax} with
 * scale 1 (its row sum the kernel's sequential one), the loss the kernel's log-sum-exp form. Shapes:
 * {@link CrossEntropy}.
 */
public final class CrossEntropyLanes {
  private CrossEntropyLanes() {}

  /**
   * probs(B,T,V) = softmax(logits), losses(B,T) = −log probs[target]; returns the mean loss, as
   * {@link CrossEntropy#forward}.
   *
   * @throws IllegalArgumentException if a size is not positive, a span does not fit its array or a target is not in
   *     [0,V)
   */
  public static float forward(float[] losses, int lossesOff, float[] probs, int probsOff, float[] logits,
      int logitsOff, int[] targets, int targetsOff, int B, int T, int V) {
    CrossEntropy.checkForward(losses, lossesOff, probs, probsOff, logits, logitsOff, targets, targetsOff, B, T, V);
    for (int bt = 0; bt < B * T; bt++) {
      int l = logitsOff + bt * V, p = probsOff + bt * V;
      float max = Lanes.max(logits, l, V, 1f);
      float sum = Lanes.softmax(probs, p, logits, l, V, 1f, max);
      losses[lossesOff + bt] = (float) (Math.log(sum) + max - logits[l + targets[targetsOff + bt]]);
    }
    return CrossEntropy.mean(losses, lossesOff, B * T);
  }

  /**
   * dlogits(B,T,V) += dloss · (probs − onehot(targets)) / (B·T), as {@link CrossEntropy#backward}.
   *
   * @throws IllegalArgumentException if a size is not positive, a span does not fit its array or a target is not in
   *     [0,V)
   */
  public static void backward(float[] dlogits, int dlogitsOff, float[] probs, int probsOff, int[] targets,
      int targetsOff, int B, int T, int V, float dloss) {
    CrossEntropy.checkBackward(dlogits, dlogitsOff, probs, probsOff, targets, targetsOff, B, T, V);
    float scale = dloss / (B * T);
    for (int bt = 0; bt < B * T; bt++) {
      int d = dlogitsOff + bt * V, p = probsOff + bt * V, tgt = targets[targetsOff + bt];
      float atTarget = dlogits[d + tgt];
      for (int v = 0; v < V; v += L) { // probs − 0 is probs, bit for bit
        VectorMask<Float> m = S.indexInRange(v, V);
        FloatVector.fromArray(S, dlogits, d + v, m).add(FloatVector.fromArray(S, probs, p + v, m).mul(scale))
            .intoArray(dlogits, d + v, m);
      }
      dlogits[d + tgt] = atTarget + scale * (probs[p + tgt] - 1f);
    }
  }
}
