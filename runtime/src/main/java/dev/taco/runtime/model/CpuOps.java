package dev.taco.runtime.model;

import dev.taco.kernels.Gemm;
import dev.taco.runtime.layers.AttentionLanes;
import dev.taco.runtime.layers.CrossEntropyLanes;
import dev.taco.runtime.layers.EncoderLanes;
import dev.taco.runtime.layers.GeluLanes;
import dev.taco.runtime.layers.GradNormLanes;
import dev.taco.runtime.layers.LayerNormLanes;
import dev.taco.runtime.layers.Matmul;
import dev.taco.runtime.layers.MatmulLanes;
import dev.taco.runtime.layers.ResidualLanes;
import dev.taco.runtime.layers.AdamWLanes;
import java.util.Arrays;

/**
 * The CPU backend of {@link Ops}: float32 arrays, the layers of {@code dev.taco.runtime.layers} (their host wrappers
 * check the arguments) and the Vector-API {@link Gemm}; its TP collectives are {@link CpuTensorParallel}'s. Every layer but the GEMMs runs on vector lanes ({@code ...Lanes}: the bits of the scalar kernels,
 * faster): the embedding, LayerNorm, the linears' biases, attention, GELU, the residual add, the cross-entropy, the
 * gradient norm and AdamW. One instance per rank thread (the attention and the gradient norm keep scratch).
 */
public final class CpuOps implements Ops<float[]> {
  private boolean[] replicated; // per-element flags of the parameter arena, built on the first squaredNorm
  private final AttentionLanes attention = new AttentionLanes();
  private final GradNormLanes gradNorm = new GradNormLanes();

  @Override
  public float[] alloc(long n) {
    if (n > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException("an arena of " + n + " float32 elements does not fit a Java array: lower "
          + "--micro-batch-size, --seq-length, --hidden-size or --num-layers");
    }
    return new float[(int) n];
  }

  /** The array itself. */
  @Override
  public float[] fromHost(float[] values) {
    return values;
  }

  @Override
  public float[] toHost(View<float[]> v, int n) {
    return Arrays.copyOfRange(v.arena(), v.off(), v.off() + n);
  }

  @Override
  public void copyToDevice(float[] values, float[] arena) {
    if (arena.length < values.length) {
      throw new IllegalArgumentException("arena of " + arena.length + " elements is shorter than " + values.length);
    }
    System.arraycopy(values, 0, arena, 0, values.length);
  }

  @Override
  public void zero(View<float[]> v, long n) {
    Arrays.fill(v.arena(), v.off(), Math.toIntExact(v.offset() + n), 0f);
  }

  @Override
  public void encoderForward(View<float[]> out, int[] tokens, View<float[]> wte, View<float[]> wpe, int B, int T,
      int C, int V) {
    EncoderLanes.forward(out.arena(), out.off(), tokens, 0, wte.arena(), wte.off(), wpe.arena(), wpe.off(), B, T, C, V);
  }

  @Override
  public void encoderBackward(View<float[]> dwte, View<float[]> dwpe, View<float[]> dout, int[] tokens, int B, int T,
      int C, int V) {
    EncoderLanes.backward(dwte.arena(), dwte.off(), dwpe.arena(), dwpe.off(), dout.arena(), dout.off(), tokens, 0, B, T,
        C, V);
  }

  @Override
  public void layerNormForward(View<float[]> out, View<float[]> mean, View<float[]> rstd, View<float[]> inp,
      View<float[]> w, View<float[]> b, int B, int T, int C) {
    LayerNormLanes.forward(out.arena(), out.off(), mean.arena(), mean.off(), rstd.arena(), rstd.off(), inp.arena(),
        inp.off(), w.arena(), w.off(), b.arena(), b.off(), B, T, C);
  }

  @Override
  public void layerNormBackward(View<float[]> dinp, View<float[]> dw, View<float[]> db, View<float[]> dout,
      View<float[]> inp, View<float[]> w, View<float[]> mean, View<float[]> rstd, int B, int T, int C) {
    LayerNormLanes.backward(dinp.arena(), dinp.off(), dw.arena(), dw.off(), db.arena(), db.off(), dout.arena(),
        dout.off(), inp.arena(), inp.off(), w.arena(), w.off(), mean.arena(), mean.off(), rstd.arena(), rstd.off(), B,
        T, C);
  }

  @Override
  public void matmulForward(View<float[]> out, View<float[]> inp, View<float[]> w, View<float[]> bias, int B, int T,
      int C, int OC) {
    Matmul.forward(out.arena(), out.off(), inp.arena(), inp.off(), w.arena(), w.off(), null, 0, B, T, C, OC);
    if (bias != null) MatmulLanes.addBias(out.arena(), out.off(), bias.arena(), bias.off(), B * T, OC);
  }

  @Override
  public void matmulBackward(View<float[]> dinp, View<float[]> dw, View<float[]> dbias, View<float[]> dout,
      View<float[]> inp, View<float[]> w, int B, int T, int C, int OC) {
    zero(dinp, (long) B * T * C); // the CPU kernels accumulate; the seam overwrites (Ops)
    Matmul.backward(dinp.arena(), dinp.off(), dw.arena(), dw.off(), null, 0, dout.arena(), dout.off(), inp.arena(),
        inp.off(), w.arena(), w.off(), B, T, C, OC);
    if (dbias != null) MatmulLanes.backwardBias(dbias.arena(), dbias.off(), dout.arena(), dout.off(), B * T, OC);
  }

  @Override
  public void matmulAttentionForward(View<float[]> out, View<float[]> att, View<float[]> qkv, View<float[]> inp,
      View<float[]> w, View<float[]> bias, int B, int T, int C, int NH, int HS) {
    matmulForward(qkv, inp, w, bias, B, T, C, 3 * NH * HS);
    attentionForward(out, att, qkv, B, T, NH, HS);
  }

  @Override
  public void matmulGeluForward(View<float[]> out, View<float[]> pre, View<float[]> inp, View<float[]> w,
      View<float[]> bias, int B, int T, int C, int OC) {
    matmulForward(pre, inp, w, bias, B, T, C, OC);
    geluForward(out, pre, B * T * OC);
  }

  @Override
  public void matmulBackwardGelu(View<float[]> dinp, View<float[]> scratch, View<float[]> dw, View<float[]> dbias,
      View<float[]> dout, View<float[]> inp, View<float[]> w, View<float[]> pre, int B, int T, int C, int OC) {
    matmulBackward(scratch, dw, dbias, dout, inp, w, B, T, C, OC);
    geluBackward(dinp, scratch, pre, B * T * C);
  }

  @Override
  public void headForward(View<float[]> logits, View<float[]> x, View<float[]> wte, int N, int C, int V) {
    Gemm.matmulTransB(x.arena(), x.off(), wte.arena(), wte.off(), logits.arena(), logits.off(), N, V, C, false);
  }

  @Override
  public void headBackward(View<float[]> dx, View<float[]> dwte, View<float[]> dlogits, View<float[]> x,
      View<float[]> wte, int N, int C, int V) {
    Gemm.matmul(dlogits.arena(), dlogits.off(), wte.arena(), wte.off(), dx.arena(), dx.off(), N, C, V, false);
    Gemm.matmulTransA(dlogits.arena(), dlogits.off(), x.arena(), x.off(), dwte.arena(), dwte.off(), V, C, N, true);
  }

  @Override
  public void attentionForward(View<float[]> out, View<float[]> att, View<float[]> qkv, int B, int T, int NH, int HS) {
    attention.forward(out.arena(), out.off(), att.arena(), att.off(), qkv.arena(), qkv.off(), B, T, NH, HS);
  }

  @Override
  public void attentionBackward(View<float[]> dqkv, View<float[]> scratch, View<float[]> dout, View<float[]> qkv,
      View<float[]> out, View<float[]> att, int B, int T, int NH, int HS) {
    zero(dqkv, 3L * B * T * NH * HS);
    attention.backward(dqkv.arena(), dqkv.off(), scratch.arena(), scratch.off(), dout.arena(), dout.off(), qkv.arena(),
        qkv.off(), att.arena(), att.off(), B, T, NH, HS);
  }

  @Override
  public void geluForward(View<float[]> out, View<float[]> inp, int n) {
    GeluLanes.forward(out.arena(), out.off(), inp.arena(), inp.off(), n);
  }

  @Override
  public void geluBackward(View<float[]> dinp, View<float[]> dout, View<float[]> inp, int n) {
    zero(dinp, n);
    GeluLanes.backward(dinp.arena(), dinp.off(), dout.arena(), dout.off(), inp.arena(), inp.off(), n);
  }

  @Override
  public void residualForward(View<float[]> out, View<float[]> a, View<float[]> b, View<float[]> bias, int rows,
      int C) {
    ResidualLanes.forwardBias(out.arena(), out.off(), a.arena(), a.off(), b.arena(), b.off(), bias.arena(),
        bias.off(), rows, C);
  }

  @Override
  public float crossEntropyForward(View<float[]> losses, View<float[]> probs, View<float[]> logits, int[] targets,
      int B, int T, int V) {
    return CrossEntropyLanes.forward(losses.arena(), losses.off(), probs.arena(), probs.off(), logits.arena(),
        logits.off(), targets, 0, B, T, V);
  }

  @Override
  public void crossEntropyBackward(View<float[]> dlogits, View<float[]> probs, int[] targets, int B, int T, int V,
      float dloss) {
    CrossEntropyLanes.backward(dlogits.arena(), dlogits.off(), probs.arena(), probs.off(), targets, 0, B, T, V, dloss);
  }

  @Override
  public float meanLoss(View<float[]> losses, int n) {
    double total = 0.0;
    for (int i = 0; i < n; i++) total += losses.arena()[losses.off() + i];
    return (float) (total / n);
  }

  @Override
  public double squaredNorm(float[] grads, ParameterTensors layout, boolean includeReplicated) {
    if (replicated == null) replicated = layout.replicatedMask();
    return gradNorm.squaredNorm(grads, 0, replicated, 0, !includeReplicated, layout.size());
  }

  @Override
  public void adamw(float[] params, float[] grads, float[] m, float[] v, byte[] decay, int n, float lr, float beta1,
      float beta2, float eps, float weightDecay, float gradScale, int step) {
    AdamWLanes.update(params, grads, m, v, decay, n, lr, beta1, beta2, eps, weightDecay, gradScale, step);
  }
}
