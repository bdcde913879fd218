package dev.taco.runtime.model;

/**
 * The operations a GPT training step is made of (docs/design.md §6, llm.c's kernel list): the model ({@link Gpt}) is written
 * once against this seam and {@link TensorParallel} (its collectives), and a backend implements it for one memory space ({@link CpuOps}: float arrays and the CPU
 * layer kernels; a GPU backend: device arenas, cuBLAS and the Java GPU kernels). Arguments follow the layers'
 * conventions: outputs first, then inputs, then sizes; forward passes overwrite their outputs, backward passes ADD
 * into their gradients. Shapes are those of {@code dev.taco.runtime.layers}; {@code B} sequences of {@code T} tokens,
 * {@code C} channels.
 *
 * @param <A> the arena type (one block of this backend's memory)
 */
public interface Ops<A> {

  /** A zeroed arena of {@code n} float32 elements. */
  A alloc(long n);

  /** An arena holding {@code values} (the CPU backend may return the array itself). */
  A fromHost(float[] values);

  /** Copies {@code n} elements from {@code v} to a new host array (a GPU backend waits for its stream). */
  float[] toHost(View<A> v, int n);

  /**
   * Copies {@code values} to the start of {@code arena} (a checkpoint's weights and moments).
   *
   * @throws IllegalArgumentException if the arena is shorter than the array
   */
  void copyToDevice(float[] values, A arena);

  /** Zeroes {@code n} elements from {@code v}. */
  void zero(View<A> v, long n);

  /** out(B,T,C) = wte[tokens] + wpe[t] ({@code layers.Encoder}). */
  void encoderForward(View<A> out, int[] tokens, View<A> wte, View<A> wpe, int B, int T, int C, int V);

  /** dwte, dwpe += the gathers of dout ({@code layers.Encoder}). */
  void encoderBackward(View<A> dwte, View<A> dwpe, View<A> dout, int[] tokens, int B, int T, int C, int V);

  /** out(B,T,C), mean, rstd(B,T) = LayerNorm(inp) ({@code layers.LayerNorm}). */
  void layerNormForward(View<A> out, View<A> mean, View<A> rstd, View<A> inp, View<A> w, View<A> b, int B, int T,
      int C);

  /** dinp, dw, db += LayerNorm's gradients. */
  void layerNormBackward(View<A> dinp, View<A> dw, View<A> db, View<A> dout, View<A> inp, View<A> w, View<A> mean,
      View<A> rstd, int B, int T, int C);

  /** out(B,T,OC) = inp(B,T,C) · w(C,OC) + bias(OC); {@code bias} may be null ({@code layers.Matmul}). */
  void matmulForward(View<A> out, View<A> inp, View<A> w, View<A> bias, int B, int T, int C, int OC);

  /**
   * dinp = dout · w^T (overwritten: the first writer of an activation gradient needs no zeroing first), dw += inp^T ·
   * dout, dbias += column sums of dout (accumulated: parameter gradients); {@code dbias} may be null.
   */
  void matmulBackward(View<A> dinp, View<A> dw, View<A> dbias, View<A> dout, View<A> inp, View<A> w, int B, int T,
      int C, int OC);

  /**
   * The MLP's first linear layer and its GELU: pre(B,T,OC) = inp(B,T,C) · w(C,OC) + bias(OC), out = GELU(pre) (both
   * kept: the backward needs pre); {@link #matmulForward} then {@link #geluForward}, which a backend may fuse (the
   * GPU's bf16 mode stores pre and out in bf16 only).
   */
  void matmulGeluForward(View<A> out, View<A> pre, View<A> inp, View<A> w, View<A> bias, int B, int T, int C, int OC);

  /**
   * The backward of a linear layer whose input was {@code GELU(pre)}, through that GELU: dinp = (dout · w^T) ⊙
   * GELU'(pre) (overwritten), dw, dbias as {@link #matmulBackward}; {@code scratch} (B,T,C) may receive dout · w^T
   * ({@link #matmulBackward} into it, then {@link #geluBackward}; the GPU's bf16 mode computes it in bf16 and stores
   * dinp in bf16 only).
   */
  void matmulBackwardGelu(View<A> dinp, View<A> scratch, View<A> dw, View<A> dbias, View<A> dout, View<A> inp,
      View<A> w, View<A> pre, int B, int T, int C, int OC);

  /** The tied LM head: logits(N,V) = x(N,C) · wte(V,C)^T. */
  void headForward(View<A> logits, View<A> x, View<A> wte, int N, int C, int V);

  /** dx(N,C) = dlogits · wte (overwritten), dwte(V,C) += dlogits^T · x. */
  void headBackward(View<A> dx, View<A> dwte, View<A> dlogits, View<A> x, View<A> wte, int N, int C, int V);

  /**
   * Elements of the state {@link #attentionForward} keeps for the backward ({@code att}) and of the backward's
   * {@code scratch}, each: the probabilities (B,NH,T,T) by default; a backend whose attention recomputes them (flash
   * attention) keeps less.
   */
  default long attentionStateSize(int B, int NH, int T, int HS) {
    return (long) B * NH * T * T;
  }

  /**
   * out(B,T,NH·HS) = causal self-attention of qkv(B,T,3·NH·HS) ({@code layers.Attention}); {@code att}
   * ({@link #attentionStateSize} elements) receives what the backward needs: the probabilities (B,NH,T,T), or a flash
   * backend's row log-sum-exps (B,NH,T).
   */
  void attentionForward(View<A> out, View<A> att, View<A> qkv, int B, int T, int NH, int HS);

  /**
   * The attention's QKV projection and the attention: qkv(B,T,3·NH·HS) = inp(B,T,C) · w(C,3·NH·HS) + bias (kept: the
   * backward needs it), then out, att as {@link #attentionForward}; {@link #matmulForward} then
   * {@link #attentionForward}, which a backend may fuse (the GPU's bf16 mode with flash attention stores qkv in bf16
   * only, as the attention reads it).
   */
  void matmulAttentionForward(View<A> out, View<A> att, View<A> qkv, View<A> inp, View<A> w, View<A> bias, int B,
      int T, int C, int NH, int HS);

  /**
   * dqkv = attention's gradients (overwritten, as {@link #matmulBackward}'s dinp), from dout, the forward's qkv, its
   * output {@code out} and its state {@code att}; {@code scratch} ({@link #attentionStateSize} elements) is work space.
   */
  void attentionBackward(View<A> dqkv, View<A> scratch, View<A> dout, View<A> qkv, View<A> out, View<A> att, int B,
      int T, int NH, int HS);

  /** out(N) = GELU(inp) ({@code layers.Gelu}). */
  void geluForward(View<A> out, View<A> inp, int n);

  /** dinp = GELU'(inp) · dout (overwritten, as {@link #matmulBackward}'s dinp). */
  void geluBackward(View<A> dinp, View<A> dout, View<A> inp, int n);

  /**
   * out(rows, C) = a + (b + bias(C)): the residual add of a row-parallel layer's output, whose bias is added once after
   * its all-reduce ({@code layers.Residual#forwardBias}; b unchanged).
   */
  void residualForward(View<A> out, View<A> a, View<A> b, View<A> bias, int rows, int C);

  /** probs(B,T,V) = softmax(logits), losses(B,T) = −log probs[target]; returns the mean loss (a host scalar). */
  float crossEntropyForward(View<A> losses, View<A> probs, View<A> logits, int[] targets, int B, int T, int V);

  /** dlogits(B,T,V) += dloss · (probs − onehot(targets)) / (B·T). */
  void crossEntropyBackward(View<A> dlogits, View<A> probs, int[] targets, int B, int T, int V, float dloss);

  /** The mean of the {@code n} losses at {@code losses}, added in order in float64 (a host scalar; waits for them). */
  float meanLoss(View<A> losses, int n);

  /**
   * Runs {@code work}: one training step's device work (zero-grad, forward, backward), which reads nothing back to
   * the host and whose host arrays keep their identity from call to call. A GPU backend may capture it once as a CUDA
   * graph for {@code key} and replay the graph afterwards, copying the host arrays it uploaded again before each
   * replay (so a step costs one launch instead of hundreds); the CPU just runs it.
   */
  default void replay(Object key, Runnable work) {
    work.run();
  }

  /**
   * Sum of squares of this rank's gradients (a host scalar, in double), skipping the replicated tensors unless
   * {@code includeReplicated}; summed in float64 by {@link dev.taco.runtime.layers.GradNorm}'s strided partial sums (a
   * fixed order for a given number of partials: the CPU's 4096, more on a GPU).
   */
  double squaredNorm(A grads, ParameterTensors layout, boolean includeReplicated);

  /**
   * One AdamW step over {@code n} parameters in place (llm.c's {@code gpt2_update}; {@code layers.AdamW}).
   *
   * @param decay per-element weight-decay switch (0 or 1), host
   */
  void adamw(A params, A grads, A m, A v, byte[] decay, int n, float lr, float beta1, float beta2, float eps,
      float weightDecay, float gradScale, int step);
}
