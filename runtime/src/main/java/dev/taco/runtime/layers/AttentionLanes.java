package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Lanes.L;
import static dev.taco.runtime.layers.Lanes.S;

import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;

/**
 * {@link Attention}'s forward and backward for the CPU on vector lanes (the Vector API, {@link Lanes}): the same
 * interface and buffers ((B,NH,T,T) probabilities kept for the backward), the same float operations per element in the
 * same order as its kernels, so the same bits (in a NaN, NaN where they give NaN).
 *
 * <ul>
 *   <li>The dot products q·k (and dout·v) take one lane per key t2: the keys of a head are transposed into a
 *       (HS, ⌈T⌉) scratch, so that a vector of keys is one contiguous load per channel, and each lane keeps the four
 *       partial sums of {@link Attention#dot} in its order.</li>
 *   <li>The weighted sums over keys (att·v, dS·k) and over queries (dSᵀ·q, Pᵀ·dout) take one lane per channel of
 *       the head, summing in the kernels' order of t2 (or t).</li>
 *   <li>The softmax of a row ({@link Attention#softmaxForward}): the maximum and the exponentials on lanes
 *       ({@link Lanes#exp}, the bits of {@code (float) Math.exp}); the row sum, like the dot of
 *       {@link Attention#softmaxBackward}, in the kernel's sequential order, so in a scalar loop.</li>
 * </ul>
 *
 * <p>Work is per (batch, head), one row at a time: its scores, softmax and weighted sum while the row is in cache (the
 * kernels' separate passes over all rows give the same values, each row being independent). Not thread-safe: one
 * instance per thread (the scratch of the transposed keys is reused, grown when a larger head comes).
 */
public final class AttentionLanes {
  private float[] transposed = new float[0];

  /**
   * out(B,T,NH·HS) and att(B,NH,T,T) from qkv(B,T,3·NH·HS), as {@link Attention#forward} (layout and shapes there).
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public void forward(float[] out, int outOff, float[] att, int attOff, float[] qkv, int qkvOff,
      int B, int T, int NH, int HS) {
    Attention.checkForward(out, outOff, att, attOff, qkv, qkvOff, B, T, NH, HS);
    int D = NH * HS, C3 = 3 * D, stride = Lanes.roundUp(T);
    float[] kt = scratch(HS * stride);
    float scale = Attention.scale(HS);
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < NH; h++) {
        int q0 = qkvOff + b * T * C3 + h * HS; // q of (b, 0, h); k at + D, v at + 2D
        transpose(kt, stride, qkv, q0 + D, C3, T, HS);
        for (int t = 0; t < T; t++) {
          int a = attOff + ((b * NH + h) * T + t) * T;
          dots(att, a, qkv, q0 + t * C3, kt, stride, HS, t + 1);
          softmaxRow(att, a, t, T, scale);
          weightedSum(out, outOff + (b * T + t) * D + h * HS, false, att, a, 1, qkv, q0 + 2 * D, C3, t + 1, HS);
        }
      }
    }
  }

  /**
   * dqkv(B,T,3·NH·HS) += the gradient of the attention core, as {@link Attention#backward}: {@code scratch}
   * (B,NH,T,T) holds dpreatt on exit, {@code att} is not modified.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public void backward(float[] dqkv, int dqkvOff, float[] scratch, int scratchOff, float[] dout, int doutOff,
      float[] qkv, int qkvOff, float[] att, int attOff, int B, int T, int NH, int HS) {
    Attention.checkBackward(dqkv, dqkvOff, scratch, scratchOff, dout, doutOff, qkv, qkvOff, att, attOff,
        B, T, NH, HS);
    int D = NH * HS, C3 = 3 * D, stride = Lanes.roundUp(T);
    float[] vt = scratch(HS * stride);
    float scale = Attention.scale(HS);
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < NH; h++) {
        int q0 = qkvOff + b * T * C3 + h * HS, dq0 = dqkvOff + b * T * C3 + h * HS;
        int o0 = doutOff + b * T * D + h * HS, bh = (b * NH + h) * T;
        transpose(vt, stride, qkv, q0 + 2 * D, C3, T, HS);
        for (int t = 0; t < T; t++) {
          int s = scratchOff + (bh + t) * T;
          dots(scratch, s, dout, o0 + t * D, vt, stride, HS, t + 1); // dP
          softmaxBackwardRow(scratch, s, att, attOff + (bh + t) * T, t, T, scale); // scale·dS, in place
          weightedSum(dqkv, dq0 + t * C3, true, scratch, s, 1, qkv, q0 + D, C3, t + 1, HS); // dq
        }
        for (int t2 = 0; t2 < T; t2++) { // dk[t2] and dv[t2]: columns t2 of dS and P, over the queries t >= t2
          int col = (bh + t2) * T + t2;
          weightedSum(dqkv, dq0 + t2 * C3 + D, true, scratch, scratchOff + col, T, qkv, q0 + t2 * C3, C3, T - t2, HS);
          weightedSum(dqkv, dq0 + t2 * C3 + 2 * D, true, att, attOff + col, T, dout, o0 + t2 * D, D, T - t2, HS);
        }
      }
    }
  }

  private float[] scratch(int n) {
    if (transposed.length < n) {
      transposed = new float[n];
    }
    return transposed;
  }

  /**
   * dst[j·stride + i] = src[off + i·rowStride + j] for i &lt; rows, j &lt; cols: one head's keys (or values), transposed.
   */
  static void transpose(float[] dst, int stride, float[] src, int off, int rowStride, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
      int r = off + i * rowStride;
      for (int j = 0; j < cols; j++) {
        dst[j * stride + i] = src[r + j];
      }
    }
  }

  /**
   * dst[dstOff + c] = {@link Attention#dot}(a[aOff, aOff+n), column c of bt) for c &lt; count, a lane per column: bt is
   * (n, stride) row-major with {@code stride >= } {@link Lanes#roundUp}(count) (the columns past count are read, not
   * stored). Each lane adds in the dot's order: four partial sums over j ≡ 0..3 (mod 4), the rest of n into the first,
   * then (s0 + s1) + (s2 + s3).
   */
  static void dots(float[] dst, int dstOff, float[] a, int aOff, float[] bt, int stride, int n, int count) {
    for (int c = 0; c < count; c += L) {
      FloatVector s0 = FloatVector.zero(S), s1 = s0, s2 = s0, s3 = s0;
      int j = 0;
      for (; j + 3 < n; j += 4) {
        int r = j * stride + c;
        s0 = s0.add(FloatVector.fromArray(S, bt, r).mul(a[aOff + j]));
        s1 = s1.add(FloatVector.fromArray(S, bt, r + stride).mul(a[aOff + j + 1]));
        s2 = s2.add(FloatVector.fromArray(S, bt, r + 2 * stride).mul(a[aOff + j + 2]));
        s3 = s3.add(FloatVector.fromArray(S, bt, r + 3 * stride).mul(a[aOff + j + 3]));
      }
      for (; j < n; j++) {
        s0 = s0.add(FloatVector.fromArray(S, bt, j * stride + c).mul(a[aOff + j]));
      }
      s0.add(s1).add(s2.add(s3)).intoArray(dst, dstOff + c, S.indexInRange(c, count));
    }
  }

  /**
   * dst[dstOff + j] (+)= Σ over i &lt; n, in order, of w[wOff + i·wStride] · x[xOff + i·xStride + j], for j &lt; hs, a lane
   * per j: from 0 when not {@code add} (the kernels' {@code out = 0} before their {@code +=}), else from dst.
   */
  static void weightedSum(float[] dst, int dstOff, boolean add, float[] w, int wOff, int wStride,
      float[] x, int xOff, int xStride, int n, int hs) {
    int j = 0;
    for (; j + 2 * L <= hs; j += 2 * L) { // two channel vectors at once: two independent chains of adds
      FloatVector acc0 = add ? FloatVector.fromArray(S, dst, dstOff + j) : FloatVector.zero(S);
      FloatVector acc1 = add ? FloatVector.fromArray(S, dst, dstOff + j + L) : FloatVector.zero(S);
      for (int i = 0; i < n; i++) {
        float f = w[wOff + i * wStride];
        int r = xOff + i * xStride + j;
        acc0 = acc0.add(FloatVector.fromArray(S, x, r).mul(f));
        acc1 = acc1.add(FloatVector.fromArray(S, x, r + L).mul(f));
      }
      acc0.intoArray(dst, dstOff + j);
      acc1.intoArray(dst, dstOff + j + L);
    }
    for (; j < hs; j += L) {
      VectorMask<Float> m = S.indexInRange(j, hs);
      FloatVector acc = add ? FloatVector.fromArray(S, dst, dstOff + j, m) : FloatVector.zero(S);
      for (int i = 0; i < n; i++) {
        acc = acc.add(FloatVector.fromArray(S, x, xOff + i * xStride + j, m).mul(w[wOff + i * wStride]));
      }
      acc.intoArray(dst, dstOff + j, m);
    }
  }

  /**
   * Row t of {@link Attention#softmaxForward} in place at {@code p}: softmax over t2 &lt;= t of scale·row
   * ({@link Lanes#softmax}), 0 above.
   */
  static void softmaxRow(float[] row, int p, int t, int T, float scale) {
    Lanes.softmax(row, p, row, p, t + 1, scale, Lanes.max(row, p, t + 1, scale));
    Arrays.fill(row, p + t + 1, p + T, 0f);
  }

  /**
   * Row t of {@link Attention#softmaxBackward} in place at {@code g}: scale·P∘(dP − Σ P∘dP) for t2 &lt;= t, 0 above; P at
   * {@code a}. The row sum in the kernel's sequential order.
   */
  static void softmaxBackwardRow(float[] g, int gOff, float[] probs, int a, int t, int T, float scale) {
    int n = t + 1;
    float dot = 0f;
    for (int t2 = 0; t2 < n; t2++) {
      dot += probs[a + t2] * g[gOff + t2];
    }
    for (int c = 0; c < n; c += L) {
      VectorMask<Float> m = S.indexInRange(c, n);
      FloatVector.fromArray(S, g, gOff + c, m).sub(dot).mul(FloatVector.fromArray(S, probs, a + c, m)).mul(scale)
          .intoArray(g, gOff + c, m);
    }
    Arrays.fill(g, gOff + n, gOff + T, 0f);
  }
}
