package dev.taco.runtime.layers;

import dev.taco.kernels.Parallel;

/**
 * The core of causal multi-head self-attention: softmax(q·k^T / sqrt(HS) + causal mask) · v, per head.
 * The QKV projection before it and the output projection after it are {@link Matmul}s.
 *
 * <p>Shapes: {@code qkv} is (B,T,3·NH·HS), {@code out} is (B,T,NH·HS), {@code att} is (B,NH,T,T).
 * NH is the number of heads held by this rank (tensor parallelism splits heads, so a rank with R-way
 * TP of a model with H heads passes NH = H/R) and HS the head size.
 *
 * <p>Layout of one (b,t) row of {@code qkv}, 3·NH·HS floats, with D = NH·HS:
 * <pre>
 *   [0,    D)   q: head h at [      h·HS,       (h+1)·HS)
 *   [D,   2D)   k: head h at [D   + h·HS, D   + (h+1)·HS)
 *   [2D,  3D)   v: head h at [2D  + h·HS, 2D  + (h+1)·HS)
 * </pre>
 * that is, all q heads, then all k heads, then all v heads (the GPT-2 / llm.c c_attn layout restricted
 * to this rank's heads). A column-parallel QKV projection must therefore arrange each rank's weight
 * columns as [its q heads | its k heads | its v heads]. In {@code out}, head h occupies
 * [h·HS, (h+1)·HS) of each (b,t) row, the order the row-parallel output projection expects.
 * {@code att[b,h,t,t2]} is the softmax probability of key t2 for query t; entries with t2 &gt; t are 0.
 *
 * <p>Reference: Vaswani et al., "Attention Is All You Need", 2017, eq. 1; the causal mask of GPT
 * (Radford et al., 2018).
 */
public final class Attention {
  private Attention() {}

  /** out(B,T,NH·HS) and att(B,NH,T,T) from qkv(B,T,3·NH·HS). Overwrites its outputs. */
  public static void forward(float[] out, int outOff, float[] att, int attOff, float[] qkv, int qkvOff,
                             int B, int T, int NH, int HS) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("NH", NH);
    Check.positive("HS", HS);
    Check.span("out", out, outOff, Check.n(B, T, NH * HS));
    Check.span("att", att, attOff, Check.n(B, NH, T, T));
    Check.span("qkv", qkv, qkvOff, Check.n(B, T, 3 * NH * HS));

    int D = NH * HS;
    int C3 = 3 * D;
    float scale = (float) (1.0 / Math.sqrt(HS));

    // One iteration per (b, h, t): a query row of one head.
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int q = qkvOff + (b * T + t) * C3 + h * HS;
      int a = attOff + i * T; // ((b*NH + h)*T + t)*T
      int kBase = qkvOff + b * T * C3 + D + h * HS;

      float max = Float.NEGATIVE_INFINITY;
      for (int t2 = 0; t2 <= t; t2++) {
        int k = kBase + t2 * C3;
        float s = dot(qkv, q, qkv, k, HS) * scale;
        att[a + t2] = s;
        if (s > max) {
          max = s;
        }
      }
      // Subtracting the row maximum keeps exp() in range; it cancels in the normalisation.
      float sum = 0f;
      for (int t2 = 0; t2 <= t; t2++) {
        float e = (float) Math.exp(att[a + t2] - max);
        att[a + t2] = e;
        sum += e;
      }
      float inv = 1f / sum; // sum >= 1: the maximum contributes exp(0)
      for (int t2 = 0; t2 <= t; t2++) {
        att[a + t2] *= inv;
      }
      for (int t2 = t + 1; t2 < T; t2++) {
        att[a + t2] = 0f; // masked: keeps the saved tensor fully defined
      }

      int o = outOff + (b * T + t) * D + h * HS;
      for (int j = 0; j < HS; j++) {
        out[o + j] = 0f;
      }
      int vBase = kBase + D;
      for (int t2 = 0; t2 <= t; t2++) {
        int v = vBase + t2 * C3;
        float p = att[a + t2];
        for (int j = 0; j < HS; j++) {
          out[o + j] += p * qkv[v + j];
        }
      }
    }
  }

  /**
   * dqkv(B,T,3·NH·HS) += gradient of the attention core, given dout(B,T,NH·HS), the forward input
   * qkv and the saved probabilities att(B,NH,T,T). {@code scratch} is (B,NH,T,T) caller-provided work
   * space (contents on entry ignored, on exit unspecified); {@code att} is not modified.
   *
   * <p>With P = att, S the pre-softmax scores: dv = P^T·dout, dP = dout·v^T,
   * dS = P ∘ (dP − rowsum(P ∘ dP)) (the softmax Jacobian), dq = scale·dS·k, dk = scale·dS^T·q.
   * Two race-free loops: one per query row t (dS row into scratch, and dq[t]); then one per key row t2
   * (dk[t2] and dv[t2] gather over the queries t &gt;= t2 that saw it).
   */
  public static void backward(float[] dqkv, int dqkvOff, float[] scratch, int scratchOff,
                              float[] dout, int doutOff, float[] qkv, int qkvOff, float[] att, int attOff,
                              int B, int T, int NH, int HS) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("NH", NH);
    Check.positive("HS", HS);
    Check.span("dqkv", dqkv, dqkvOff, Check.n(B, T, 3 * NH * HS));
    Check.span("scratch", scratch, scratchOff, Check.n(B, NH, T, T));
    Check.span("dout", dout, doutOff, Check.n(B, T, NH * HS));
    Check.span("qkv", qkv, qkvOff, Check.n(B, T, 3 * NH * HS));
    Check.span("att", att, attOff, Check.n(B, NH, T, T));

    int D = NH * HS;
    int C3 = 3 * D;
    float scale = (float) (1.0 / Math.sqrt(HS));

    // Per query row (b, h, t): dS[t, :] into scratch, then dq[t].
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int a = attOff + i * T;
      int s = scratchOff + i * T;
      int d = doutOff + (b * T + t) * D + h * HS;
      int kBase = qkvOff + b * T * C3 + D + h * HS;
      int vBase = kBase + D;

      float dot = 0f; // rowsum(P ∘ dP)
      for (int t2 = 0; t2 <= t; t2++) {
        int v = vBase + t2 * C3;
        float dp = dot(dout, d, qkv, v, HS);
        scratch[s + t2] = dp;
        dot += att[a + t2] * dp;
      }
      int dq = dqkvOff + (b * T + t) * C3 + h * HS;
      for (int t2 = 0; t2 <= t; t2++) {
        float ds = att[a + t2] * (scratch[s + t2] - dot);
        scratch[s + t2] = ds;
        int k = kBase + t2 * C3;
        float f = scale * ds;
        for (int j = 0; j < HS; j++) {
          dqkv[dq + j] += f * qkv[k + j];
        }
      }
    }

    // Per key row (b, h, t2): dk[t2] and dv[t2] gather over the queries t >= t2.
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t2 = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int bh = i - t2; // (b*NH + h)*T
      int dk = dqkvOff + (b * T + t2) * C3 + D + h * HS;
      int dv = dk + D;
      for (int t = t2; t < T; t++) {
        int row = (bh + t) * T + t2;
        float fk = scale * scratch[scratchOff + row];
        float p = att[attOff + row];
        int q = qkvOff + (b * T + t) * C3 + h * HS;
        int d = doutOff + (b * T + t) * D + h * HS;
        for (int j = 0; j < HS; j++) {
          dqkv[dk + j] += fk * qkv[q + j];
          dqkv[dv + j] += p * dout[d + j];
        }
      }
    }
  }

  /**
   * Dot product of {@code a[ao, ao+n)} and {@code b[bo, bo+n)} with four independent partial sums, so the JIT can
   * overlap the multiply-adds instead of waiting on one dependent chain (a device function on the GPU).
   */
  static float dot(float[] a, int ao, float[] b, int bo, int n) {
    float s0 = 0f, s1 = 0f, s2 = 0f, s3 = 0f;
    int j = 0;
    for (; j + 3 < n; j += 4) {
      s0 += a[ao + j] * b[bo + j];
      s1 += a[ao + j + 1] * b[bo + j + 1];
      s2 += a[ao + j + 2] * b[bo + j + 2];
      s3 += a[ao + j + 3] * b[bo + j + 3];
    }
    for (; j < n; j++) {
      s0 += a[ao + j] * b[bo + j];
    }
    return (s0 + s1) + (s2 + s3);
  }
}
