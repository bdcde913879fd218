package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Lanes.L;
import static dev.taco.runtime.layers.Lanes.S;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;

/**
 * {@link LayerNorm}'s forward and backward for the CPU on vector lanes ({@link Lanes}), with the kernels' float
 * operations per element in their order, so their bits. Shapes and formulas: {@link LayerNorm}.
 *
 * <p>The per-position sums over the C channels (mean, variance; the two means of the backward) are sequential in the
 * kernels, so a lane cannot take channels: here a lane takes a position, {@link Lanes#L} positions at a time, and each
 * lane adds its position's channels in order, reading them with a gather (stride C). The elementwise passes take a
 * lane per channel; so do the column sums of dweight and dbias, each adding the positions in order. Positions past
 * the last whole block of {@link Lanes#L} go through the scalar kernel.
 */
public final class LayerNormLanes {
  private LayerNormLanes() {}

  /**
   * out(B,T,C), mean(B,T), rstd(B,T) from inp(B,T,C), weight(C), bias(C), as {@link LayerNorm#forward}.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void forward(float[] out, int outOff, float[] mean, int meanOff, float[] rstd, int rstdOff,
      float[] inp, int inpOff, float[] weight, int weightOff, float[] bias, int biasOff,
      int B, int T, int C) {
    LayerNorm.checkForward(out, outOff, mean, meanOff, rstd, rstdOff, inp, inpOff, weight, weightOff, bias, biasOff,
        B, T, C);
    int rows = B * T, whole = rows / L * L;
    int[] stride = rowStarts(C);
    for (int r0 = 0; r0 < whole; r0 += L) {
      int x0 = inpOff + r0 * C;
      FloatVector s = FloatVector.zero(S);
      for (int c = 0; c < C; c++) {
        s = s.add(FloatVector.fromArray(S, inp, x0 + c, stride, 0));
      }
      FloatVector m = s.div(C);
      FloatVector v = FloatVector.zero(S);
      for (int c = 0; c < C; c++) {
        FloatVector d = FloatVector.fromArray(S, inp, x0 + c, stride, 0).sub(m);
        v = v.add(d.mul(d));
      }
      m.intoArray(mean, meanOff + r0);
      Lanes.inverseSqrt(v.div(C).add(LayerNorm.EPS)).intoArray(rstd, rstdOff + r0);
      for (int r = r0; r < r0 + L; r++) {
        float mr = mean[meanOff + r], rr = rstd[rstdOff + r];
        int x = inpOff + r * C, o = outOff + r * C;
        for (int c = 0; c < C; c += L) {
          VectorMask<Float> k = S.indexInRange(c, C);
          FloatVector.fromArray(S, inp, x + c, k).sub(mr).mul(rr)
              .mul(FloatVector.fromArray(S, weight, weightOff + c, k))
              .add(FloatVector.fromArray(S, bias, biasOff + c, k))
              .intoArray(out, o + c, k);
        }
      }
    }
    if (whole < rows) {
      LayerNorm.layernormForward(out, outOff + whole * C, mean, meanOff + whole, rstd, rstdOff + whole,
          inp, inpOff + whole * C, weight, weightOff, bias, biasOff, 1, rows - whole, C);
    }
  }

  /**
   * dinp(B,T,C) += dL/dinp, dweight(C) += Σ dout·norm, dbias(C) += Σ dout, as {@link LayerNorm#backward}.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void backward(float[] dinp, int dinpOff, float[] dweight, int dweightOff, float[] dbias, int dbiasOff,
      float[] dout, int doutOff, float[] inp, int inpOff, float[] weight, int weightOff,
      float[] mean, int meanOff, float[] rstd, int rstdOff, int B, int T, int C) {
    LayerNorm.checkBackward(dinp, dinpOff, dweight, dweightOff, dbias, dbiasOff, dout, doutOff, inp, inpOff, weight,
        weightOff, mean, meanOff, rstd, rstdOff, B, T, C);
    int rows = B * T, whole = rows / L * L;
    int[] stride = rowStarts(C);
    float[] means = new float[2 * L];
    for (int r0 = 0; r0 < whole; r0 += L) {
      int x0 = inpOff + r0 * C, d0 = doutOff + r0 * C;
      FloatVector m = FloatVector.fromArray(S, mean, meanOff + r0);
      FloatVector r = FloatVector.fromArray(S, rstd, rstdOff + r0);
      FloatVector gMean = FloatVector.zero(S), gNormMean = gMean;
      for (int c = 0; c < C; c++) {
        FloatVector g = FloatVector.fromArray(S, dout, d0 + c, stride, 0).mul(weight[weightOff + c]);
        gMean = gMean.add(g);
        gNormMean = gNormMean.add(g.mul(FloatVector.fromArray(S, inp, x0 + c, stride, 0).sub(m)).mul(r));
      }
      gMean.div(C).intoArray(means, 0);
      gNormMean.div(C).intoArray(means, L);
      for (int k = 0; k < L; k++) {
        int row = r0 + k;
        float mr = mean[meanOff + row], rr = rstd[rstdOff + row], gm = means[k], gnm = means[L + k];
        int x = inpOff + row * C, d = doutOff + row * C, di = dinpOff + row * C;
        for (int c = 0; c < C; c += L) {
          VectorMask<Float> q = S.indexInRange(c, C);
          FloatVector g = FloatVector.fromArray(S, weight, weightOff + c, q)
              .mul(FloatVector.fromArray(S, dout, d + c, q));
          FloatVector norm = FloatVector.fromArray(S, inp, x + c, q).sub(mr).mul(rr);
          FloatVector.fromArray(S, dinp, di + c, q).add(g.sub(gm).sub(norm.mul(gnm)).mul(rr))
              .intoArray(dinp, di + c, q);
        }
      }
    }
    if (whole < rows) {
      LayerNorm.layernormBackwardRows(dinp, dinpOff + whole * C, dout, doutOff + whole * C, inp, inpOff + whole * C,
          weight, weightOff, mean, meanOff + whole, rstd, rstdOff + whole, 1, rows - whole, C);
    }
    for (int bt = 0; bt < rows; bt++) { // dweight, dbias: a lane per channel, the positions in order
      float mr = mean[meanOff + bt], rr = rstd[rstdOff + bt];
      int x = inpOff + bt * C, d = doutOff + bt * C;
      for (int c = 0; c < C; c += L) {
        VectorMask<Float> q = S.indexInRange(c, C);
        FloatVector g = FloatVector.fromArray(S, dout, d + c, q);
        FloatVector.fromArray(S, dweight, dweightOff + c, q)
            .add(g.mul(FloatVector.fromArray(S, inp, x + c, q).sub(mr)).mul(rr))
            .intoArray(dweight, dweightOff + c, q);
        FloatVector.fromArray(S, dbias, dbiasOff + c, q).add(g).intoArray(dbias, dbiasOff + c, q);
      }
    }
  }

  /** {0, C, 2C, ...}: the gather's index map of {@link Lanes#L} consecutive positions. */
  private static int[] rowStarts(int C) {
    int[] map = new int[L];
    for (int k = 0; k < L; k++) {
      map[k] = k * C;
    }
    return map;
  }
}
