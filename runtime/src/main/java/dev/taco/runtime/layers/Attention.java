package dev.taco.runtime.layers;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;
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
 * (Radford et al., 2018). The GPU's bf16 mode runs {@link FlashAttention} instead, which keeps no {@code att}.
 */
public final class Attention {
  private Attention() {}

  /** The score scale 1/sqrt(HS) of {@link #softmaxForward} and {@link #softmaxBackward}, as the float both use. */
  public static float scale(int HS) {
    return (float) (1.0 / Math.sqrt(HS));
  }

  /**
   * out(B,T,NH·HS) and att(B,NH,T,T) from qkv(B,T,3·NH·HS). Overwrites its outputs.
   *
   * <p>Three kernels: {@link #attentionScores} (q·k for the causal half, into {@code att}), {@link #softmaxForward}
   * in place (scale, mask, softmax) and {@link #attentionValues} (att·v). On the GPU the first and the last are
   * batched GEMMs.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void forward(float[] out, int outOff, float[] att, int attOff, float[] qkv, int qkvOff,
      int B, int T, int NH, int HS) {
    checkForward(out, outOff, att, attOff, qkv, qkvOff, B, T, NH, HS);
    attentionScores(att, attOff, qkv, qkvOff, B, T, NH, HS);
    softmaxForward(att, attOff, att, attOff, B, NH, T, scale(HS));
    attentionValues(out, outOff, att, attOff, qkv, qkvOff, B, T, NH, HS);
  }

  /** The checks of {@link #forward} (and of {@link AttentionLanes#forward}). */
  static void checkForward(float[] out, int outOff, float[] att, int attOff, float[] qkv, int qkvOff,
      int B, int T, int NH, int HS) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("NH", NH);
    Check.positive("HS", HS);
    Check.span("out", out, outOff, Check.n(B, T, NH * HS));
    Check.span("att", att, attOff, Check.n(B, NH, T, T));
    Check.span("qkv", qkv, qkvOff, Check.n(B, T, 3 * NH * HS));
  }

  /**
   * Kernel: preatt[b,h,t,t2] = q[b,t,h]·k[b,t2,h] for t2 &lt;= t (unscaled; entries t2 &gt; t are not written). One
   * iteration per query row (b,h,t). No checks.
   */
  @Kernel
  public static void attentionScores(float[] preatt, int preattOff, float[] qkv, int qkvOff,
      int B, int T, int NH, int HS) {
    int D = NH * HS;
    int C3 = 3 * D;
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int q = qkvOff + (b * T + t) * C3 + h * HS;
      int a = preattOff + i * T; // ((b*NH + h)*T + t)*T
      int kBase = qkvOff + b * T * C3 + D + h * HS;
      for (int t2 = 0; t2 <= t; t2++) {
        preatt[a + t2] = dot(qkv, q, qkv, kBase + t2 * C3, HS);
      }
    }
  }

  /**
   * Kernel: the fused causal scale–mask–softmax. probs(B,NH,T,T) from preattention scores preatt(B,NH,T,T): row
   * (b,h,t) is softmax over t2 &lt;= t of {@code scale · preatt[b,h,t,t2]}, and 0 for t2 &gt; t (the mask: the
   * upper triangle of preatt is never read, so it may hold anything). fp32 throughout, one iteration per row. The row
   * maximum is subtracted before exp(), which keeps it in range and cancels in the normalisation. {@code probs} may
   * alias {@code preatt} at the same offset (each element is read before it is written). No checks.
   *
   * <p>On the GPU it follows a batched GEMM that writes preatt = Q·K^T; on the CPU, {@link #attentionScores}. Reference:
   * the masked softmax of Vaswani et al. (eq. 1) as in llm.c's {@code attention_forward} and Megatron-LM's
   * {@code ScaledUpperTriangMaskedSoftmax}.
   */
  @Kernel
  public static void softmaxForward(float[] probs, int probsOff, float[] preatt, int preattOff,
      int B, int NH, int T, float scale) {
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int p = preattOff + i * T;
      int o = probsOff + i * T;
      float max = Float.NEGATIVE_INFINITY;
      for (int t2 = 0; t2 <= t; t2++) {
        float s = preatt[p + t2] * scale;
        if (s > max) {
          max = s;
        }
      }
      float sum = 0f;
      for (int t2 = 0; t2 <= t; t2++) {
        float e = (float) Math.exp(preatt[p + t2] * scale - max);
        probs[o + t2] = e;
        sum += e;
      }
      float inv = 1f / sum; // sum >= 1: the maximum contributes exp(0)
      for (int t2 = 0; t2 <= t; t2++) {
        probs[o + t2] *= inv;
      }
      for (int t2 = t + 1; t2 < T; t2++) {
        probs[o + t2] = 0f; // masked: keeps the saved tensor fully defined
      }
    }
  }

  /** Kernel: out[b,t,h] = sum over t2 &lt;= t of att[b,h,t,t2] · v[b,t2,h]; one iteration per query row. No checks. */
  @Kernel
  public static void attentionValues(float[] out, int outOff, float[] att, int attOff, float[] qkv, int qkvOff,
      int B, int T, int NH, int HS) {
    int D = NH * HS;
    int C3 = 3 * D;
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int a = attOff + i * T;
      int o = outOff + (b * T + t) * D + h * HS;
      for (int j = 0; j < HS; j++) {
        out[o + j] = 0f;
      }
      int vBase = qkvOff + b * T * C3 + 2 * D + h * HS;
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
   * space (contents on entry ignored; on exit it holds dpreatt, the gradient of the unscaled scores);
   * {@code att} is not modified.
   *
   * <p>With P = att, S the pre-softmax scores: dv = P^T·dout, dP = dout·v^T,
   * dS = P ∘ (dP − rowsum(P ∘ dP)) (the softmax Jacobian), dq = scale·dS·k, dk = scale·dS^T·q.
   * Four kernels, each race-free: {@link #attentionBackwardProbs} (dP per query row, into scratch),
   * {@link #softmaxBackward} in place (scale·dS), {@link #attentionBackwardQuery} (dq per query row), then
   * {@link #attentionBackwardKeyValue} (dk[t2] and dv[t2] per key row, gathered over the queries t &gt;= t2 that saw
   * it). On the GPU all but the softmax are batched GEMMs.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void backward(float[] dqkv, int dqkvOff, float[] scratch, int scratchOff,
      float[] dout, int doutOff, float[] qkv, int qkvOff, float[] att, int attOff,
      int B, int T, int NH, int HS) {
    checkBackward(dqkv, dqkvOff, scratch, scratchOff, dout, doutOff, qkv, qkvOff, att, attOff, B, T, NH, HS);
    attentionBackwardProbs(scratch, scratchOff, dout, doutOff, qkv, qkvOff, B, T, NH, HS);
    softmaxBackward(scratch, scratchOff, scratch, scratchOff, att, attOff, B, NH, T, scale(HS));
    attentionBackwardQuery(dqkv, dqkvOff, scratch, scratchOff, qkv, qkvOff, B, T, NH, HS);
    attentionBackwardKeyValue(dqkv, dqkvOff, scratch, scratchOff, dout, doutOff, qkv, qkvOff, att, attOff,
        B, T, NH, HS);
  }

  /** The checks of {@link #backward} (and of {@link AttentionLanes#backward}). */
  static void checkBackward(float[] dqkv, int dqkvOff, float[] scratch, int scratchOff, float[] dout, int doutOff,
      float[] qkv, int qkvOff, float[] att, int attOff, int B, int T, int NH, int HS) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("NH", NH);
    Check.positive("HS", HS);
    Check.span("dqkv", dqkv, dqkvOff, Check.n(B, T, 3 * NH * HS));
    Check.span("scratch", scratch, scratchOff, Check.n(B, NH, T, T));
    Check.span("dout", dout, doutOff, Check.n(B, T, NH * HS));
    Check.span("qkv", qkv, qkvOff, Check.n(B, T, 3 * NH * HS));
    Check.span("att", att, attOff, Check.n(B, NH, T, T));
  }

  /**
   * Kernel: dprobs[b,h,t,t2] = dout[b,t,h]·v[b,t2,h] for t2 &lt;= t (entries t2 &gt; t are not written); one iteration
   * per query row. No checks.
   */
  @Kernel
  public static void attentionBackwardProbs(float[] dprobs, int dprobsOff, float[] dout, int doutOff,
      float[] qkv, int qkvOff, int B, int T, int NH, int HS) {
    int D = NH * HS;
    int C3 = 3 * D;
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int s = dprobsOff + i * T;
      int d = doutOff + (b * T + t) * D + h * HS;
      int vBase = qkvOff + b * T * C3 + 2 * D + h * HS;
      for (int t2 = 0; t2 <= t; t2++) {
        dprobs[s + t2] = dot(dout, d, qkv, vBase + t2 * C3, HS);
      }
    }
  }

  /**
   * SIMT kernel, the GPU's form of {@link #softmaxForward} (llm.c's {@code softmax_forward_kernel}): one warp per row
   * i = (b,h,t) of the (B·NH·T, T) score matrix, lanes striding over the t+1 unmasked columns, the maximum and the sum
   * by warp reductions; masked columns set to 0 up to the end of the row's causal block, column
   * {@code min(T, (t / causalBlock + 1) · causalBlock)} ({@code causalBlock = T}: the whole row; the GPU backend's
   * block-causal GEMMs never read beyond it). {@code probs} may alias {@code preatt} at the same offset. Blocks of
   * whole warps; warp w of the grid takes row w. No checks.
   */
  @Kernel
  public static void softmaxForwardWarp(KernelContext ctx, float[] probs, int probsOff, float[] preatt, int preattOff,
      int B, int NH, int T, float scale, int causalBlock) {
    int i = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (i >= B * NH * T) {
      return; // whole warps leave together
    }
    int lane = ctx.laneId();
    int t = i % T;
    int p = preattOff + i * T;
    int o = probsOff + i * T;
    float max = Float.NEGATIVE_INFINITY;
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      max = Math.max(max, preatt[p + t2] * scale);
    }
    max = ctx.warpReduceMax(max);
    float sum = 0f;
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      float e = (float) Math.exp(preatt[p + t2] * scale - max);
      probs[o + t2] = e;
      sum += e;
    }
    float inv = 1f / ctx.warpReduceSum(sum);
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      probs[o + t2] *= inv;
    }
    int end = causalBlockEnd(t, T, causalBlock);
    for (int t2 = t + 1 + lane; t2 < end; t2 += KernelContext.WARP_SIZE) {
      probs[o + t2] = 0f;
    }
  }

  /**
   * SIMT kernel, {@link #softmaxForwardWarp} on bf16 score and probability matrices (the GPU backend's bf16 mode,
   * whose score GEMMs write bf16): the same warp per row, fp32 arithmetic on the decoded scores, each probability
   * rounded to bf16 once ({@link Bf16#encode}). In place ({@code probs} may alias {@code preatt}): the first pass
   * finds the maximum, the second sums the exponentials, the third writes them scaled. No checks.
   */
  @Kernel
  public static void softmaxForwardWarpBf16(KernelContext ctx, short[] probs, int probsOff, short[] preatt,
      int preattOff, int B, int NH, int T, float scale, int causalBlock) {
    int i = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (i >= B * NH * T) {
      return; // whole warps leave together
    }
    int lane = ctx.laneId();
    int t = i % T;
    int p = preattOff + i * T;
    int o = probsOff + i * T;
    float max = Float.NEGATIVE_INFINITY;
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      max = Math.max(max, Bf16.decode(preatt[p + t2]) * scale);
    }
    max = ctx.warpReduceMax(max);
    float sum = 0f;
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      sum += (float) Math.exp(Bf16.decode(preatt[p + t2]) * scale - max);
    }
    float inv = 1f / ctx.warpReduceSum(sum);
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      probs[o + t2] = Bf16.encode((float) Math.exp(Bf16.decode(preatt[p + t2]) * scale - max) * inv);
    }
    int end = causalBlockEnd(t, T, causalBlock);
    for (int t2 = t + 1 + lane; t2 < end; t2 += KernelContext.WARP_SIZE) {
      probs[o + t2] = 0;
    }
  }

  /**
   * Kernel: the backward pass of {@link #softmaxForward}. dpreatt(B,NH,T,T) from dprobs(B,NH,T,T) and the saved
   * probs: for t2 &lt;= t, {@code dpreatt = scale · probs · (dprobs − sum over t2' <= t of probs·dprobs)} (the softmax
   * Jacobian, then the chain rule through the scale); 0 for t2 &gt; t, so that a GEMM over the full matrix sees the
   * mask. The upper triangle of dprobs is never read. One iteration per row; {@code dpreatt} may alias
   * {@code dprobs} at the same offset. No checks.
   */
  @Kernel
  public static void softmaxBackward(float[] dpreatt, int dpreattOff, float[] dprobs, int dprobsOff,
      float[] probs, int probsOff, int B, int NH, int T, float scale) {
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int a = probsOff + i * T;
      int g = dprobsOff + i * T;
      int o = dpreattOff + i * T;
      float dot = 0f; // rowsum(P ∘ dP)
      for (int t2 = 0; t2 <= t; t2++) {
        dot += probs[a + t2] * dprobs[g + t2];
      }
      for (int t2 = 0; t2 <= t; t2++) {
        float ds = probs[a + t2] * (dprobs[g + t2] - dot);
        dpreatt[o + t2] = scale * ds;
      }
      for (int t2 = t + 1; t2 < T; t2++) {
        dpreatt[o + t2] = 0f;
      }
    }
  }

  /**
   * SIMT kernel, the GPU's form of {@link #softmaxBackward}: one warp per row, the row sum of P∘dP by a warp
   * reduction; masked columns set to 0 up to the end of the causal block, as {@link #softmaxForwardWarp}.
   * {@code dpreatt} may alias {@code dprobs} at the same offset. No checks.
   */
  @Kernel
  public static void softmaxBackwardWarp(KernelContext ctx, float[] dpreatt, int dpreattOff, float[] dprobs,
      int dprobsOff, float[] probs, int probsOff, int B, int NH, int T,
      float scale, int causalBlock) {
    int i = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (i >= B * NH * T) {
      return;
    }
    int lane = ctx.laneId();
    int t = i % T;
    int a = probsOff + i * T;
    int g = dprobsOff + i * T;
    int o = dpreattOff + i * T;
    float dot = 0f;
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      dot += probs[a + t2] * dprobs[g + t2];
    }
    dot = ctx.warpReduceSum(dot);
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      dpreatt[o + t2] = scale * (probs[a + t2] * (dprobs[g + t2] - dot));
    }
    int end = causalBlockEnd(t, T, causalBlock);
    for (int t2 = t + 1 + lane; t2 < end; t2 += KernelContext.WARP_SIZE) {
      dpreatt[o + t2] = 0f;
    }
  }

  /**
   * SIMT kernel, {@link #softmaxBackwardWarp} on bf16 matrices: fp32 arithmetic on the decoded values, the score
   * gradient rounded to bf16 once. {@code dpreatt} may alias {@code dprobs} at the same offset. No checks.
   */
  @Kernel
  public static void softmaxBackwardWarpBf16(KernelContext ctx, short[] dpreatt, int dpreattOff, short[] dprobs,
      int dprobsOff, short[] probs, int probsOff, int B, int NH, int T,
      float scale, int causalBlock) {
    int i = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (i >= B * NH * T) {
      return;
    }
    int lane = ctx.laneId();
    int t = i % T;
    int a = probsOff + i * T;
    int g = dprobsOff + i * T;
    int o = dpreattOff + i * T;
    float dot = 0f;
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      dot += Bf16.decode(probs[a + t2]) * Bf16.decode(dprobs[g + t2]);
    }
    dot = ctx.warpReduceSum(dot);
    for (int t2 = lane; t2 <= t; t2 += KernelContext.WARP_SIZE) {
      dpreatt[o + t2] = Bf16.encode(scale * (Bf16.decode(probs[a + t2]) * (Bf16.decode(dprobs[g + t2]) - dot)));
    }
    int end = causalBlockEnd(t, T, causalBlock);
    for (int t2 = t + 1 + lane; t2 < end; t2 += KernelContext.WARP_SIZE) {
      dpreatt[o + t2] = 0;
    }
  }

  /**
   * Kernel: dq[b,t,h] += sum over t2 &lt;= t of dpreatt[b,h,t,t2] · k[b,t2,h]; one iteration per query row. No
   * checks.
   */
  @Kernel
  public static void attentionBackwardQuery(float[] dqkv, int dqkvOff, float[] dpreatt, int dpreattOff,
      float[] qkv, int qkvOff, int B, int T, int NH, int HS) {
    int D = NH * HS;
    int C3 = 3 * D;
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int s = dpreattOff + i * T;
      int kBase = qkvOff + b * T * C3 + D + h * HS;
      int dq = dqkvOff + (b * T + t) * C3 + h * HS;
      for (int t2 = 0; t2 <= t; t2++) {
        int k = kBase + t2 * C3;
        float f = dpreatt[s + t2];
        for (int j = 0; j < HS; j++) {
          dqkv[dq + j] += f * qkv[k + j];
        }
      }
    }
  }

  /**
   * Kernel: dk[b,t2,h] += sum over t &gt;= t2 of dpreatt[b,h,t,t2] · q[b,t,h] and dv[b,t2,h] += sum over t &gt;= t2
   * of att[b,h,t,t2] · dout[b,t,h]; one iteration per key row (b,h,t2), which gathers over the queries that saw it,
   * so each row has one writer. No checks.
   */
  @Kernel
  public static void attentionBackwardKeyValue(float[] dqkv, int dqkvOff, float[] dpreatt, int dpreattOff,
      float[] dout, int doutOff, float[] qkv, int qkvOff,
      float[] att, int attOff, int B, int T, int NH, int HS) {
    int D = NH * HS;
    int C3 = 3 * D;
    for (@Parallel int i = 0; i < B * NH * T; i++) {
      int t2 = i % T;
      int h = (i / T) % NH;
      int b = i / (NH * T);
      int bh = i - t2; // (b*NH + h)*T
      int dk = dqkvOff + (b * T + t2) * C3 + D + h * HS;
      int dv = dk + D;
      for (int t = t2; t < T; t++) {
        int row = (bh + t) * T + t2;
        float fk = dpreatt[dpreattOff + row];
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

  /**
   * One past the last column of row t's causal block, {@code min(T, (t / causalBlock + 1) · causalBlock)}: where the
   * warp softmax kernels stop writing masked zeros (the GPU backend's block-causal GEMMs read no further).
   */
  static int causalBlockEnd(int t, int T, int causalBlock) {
    return Math.min(T, (t / causalBlock + 1) * causalBlock);
  }
}
