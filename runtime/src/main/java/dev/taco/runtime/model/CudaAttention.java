package dev.taco.runtime.model;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;

import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import dev.taco.runtime.layers.Attention;
import dev.taco.runtime.layers.FlashAttention;
import dev.taco.runtime.model.Bf16Copies.Operand;
import dev.taco.runtime.model.Bf16Copies.Slot;

/**
 * Causal self-attention of the GPU backend ({@link CudaOps}), in one of two forms. In bf16 mode on a GPU with bf16
 * tensor cores, {@link FlashAttention}: tensor-core kernels in Java that never write the (B,NH,T,T) matrices, keeping
 * only the rows' log-sum-exps. Otherwise llm.c's cuBLAS attention without its head permutes: per-head strided-batched
 * GEMMs reading q, k, v in place from the qkv tensor, around the causal softmax kernels, over the lower block-triangle
 * of the score matrices only ({@link #causalBlock}).
 */
final class CudaAttention {
  private final DeviceStream device;
  private final Bf16Copies copies;
  private final Cublas blas;
  private final boolean bf16;
  private boolean flash = true;
  private int causalBlockMinimum = 512;

  CudaAttention(DeviceStream device, Bf16Copies copies, Cublas blas, boolean bf16) {
    this.device = device;
    this.copies = copies;
    this.blas = blas;
    this.bf16 = bf16;
  }

  /**
   * Whether attention runs as {@link FlashAttention} for head size HS: in bf16 mode, for the head sizes its kernels are
   * compiled for, on a GPU with bf16 tensor cores ({@link CudaOps#flashAttention(CudaOps.Precision, int, int)}), unless
   * switched off ({@link #flash(boolean)}).
   */
  boolean flash(int HS) {
    return flash && CudaOps.flashAttention(bf16 ? CudaOps.Precision.BF16 : CudaOps.Precision.FP32, HS,
        device.context().computeCapabilityMajor());
  }

  void flash(boolean on) {
    flash = on;
  }

  /** See {@link CudaOps#causalBlock}. */
  int causalBlock(int T) {
    return T % 4 == 0 && T / 4 >= causalBlockMinimum ? T / 4 : T;
  }

  void causalBlockMinimum(int rows) {
    if (rows < 1) throw new IllegalArgumentException("causal block minimum must be >= 1, got " + rows);
    causalBlockMinimum = rows;
  }

  /** B·NH·T log-sum-exps with flash attention, else the (B,NH,T,T) probabilities. */
  long stateSize(int B, int NH, int T, int HS) {
    return flash(HS) ? (long) B * NH * T : (long) B * NH * T * T;
  }

  /**
   * With flash attention (bf16 mode): {@link FlashAttention#flashForward} on the bf16 copy of qkv (kept, which the
   * backward reuses), {@code att} receiving the B·NH·T row log-sum-exps, out and its bf16 copy written together.
   * Otherwise the scores Q·Kᵀ of every (b,h) as strided-batched GEMMs reading q and k in place from qkv (B,T,3C)
   * (leading dimension 3C) into {@code att} (B,NH,T,T); the causal softmax in place
   * ({@link Attention#softmaxForwardWarp}); then P·V straight into out (B,T,C) (leading dimension C). See
   * {@link #headGemms} for the batching. In bf16 mode the GEMMs read a bf16 copy of qkv and the score and probability
   * matrices are bf16, in the first half of {@code att}'s bytes ({@link Attention#softmaxForwardWarpBf16}): half the
   * bytes of the (B,NH,T,T) matrices, which bound this layer.
   */
  void forward(View<DeviceBuffer> out, View<DeviceBuffer> att, View<DeviceBuffer> qkv, int B, int T, int NH, int HS) {
    int c = NH * HS, blk = causalBlock(T);
    long n = (long) B * T * c;
    if (flash(HS)) { // out and the rows' log-sum-exps, no (B,NH,T,T) matrices; qkv's bf16 copy kept
      Operand q = copies.kept(qkv, 3 * n);
      flashGrid(B, NH, T).task("flashForward", FlashAttention::flashForward, KERNEL_CONTEXT,
          DeviceStream.slice("out", out, n), 0, copies.forwardCopy(out, n), 0,
          DeviceStream.slice("att", att, (long) B * NH * T), 0, at(q), 0, B, T, NH, HS, Attention.scale(HS));
      copies.wroteCopy(out, n);
      return;
    }
    DeviceStream.slice("out", out, n);
    Operand q = copies.kept(qkv, 3 * n), s = scores("att", att, (long) B * NH * T * T);
    Operand o = new Operand(out.arena(), out.offset(), DataType.F32);
    Heads h = new Heads(B, NH, T, c, HS);
    for (int r0 = 0; r0 < T; r0 += blk) { // S[r0.., 0..keys) = Q[r0..] · K[0..keys)ᵀ, the query block's keys only
      int keys = r0 + blk;
      headGemms(h, s.type(), false, true, blk, keys, HS, q, (long) r0 * 3 * c, 3 * c, h.qkv, q, c, 3 * c, h.qkv, s,
          (long) r0 * T, T, h.att);
    }
    DeviceBuffer ps = at(s);
    if (s.type() == DataType.F32) {
      device.warps((long) B * NH * T).task("softmaxForwardWarp", Attention::softmaxForwardWarp, KERNEL_CONTEXT, ps, 0,
          ps, 0, B, NH, T, Attention.scale(HS), blk);
    } else {
      device.warps((long) B * NH * T).task("softmaxForwardWarpBf16", Attention::softmaxForwardWarpBf16, KERNEL_CONTEXT,
          ps, 0, ps, 0, B, NH, T, Attention.scale(HS), blk);
    }
    for (int r0 = 0; r0 < T; r0 += blk) { // O[r0..] = P[r0.., 0..keys) · V[0..keys)
      int keys = r0 + blk;
      headGemms(h, DataType.F32, false, false, blk, HS, keys, s, (long) r0 * T, T, h.att, q, 2 * c, 3 * c, h.qkv,
          o, (long) r0 * c, c, h.rows);
    }
  }

  /**
   * The backward of {@link #forward}. With flash attention: dsum = rowsum(dO ∘ O) into {@code scratch}
   * ({@link FlashAttention#flashBackwardDot}, fp32, writing dout's bf16 copy into the gradient slot), then
   * {@link FlashAttention#flashBackwardKeyValue} and {@link FlashAttention#flashBackwardQuery} on the bf16 copies of qkv
   * and dout, writing dqkv's bf16 copy only. Otherwise as llm.c's {@code attention_backward}, in place: with dY the
   * heads of {@code dout} (leading dimension C), dP = dY·Vᵀ into {@code scratch}, dV += Pᵀ·dY; dS = softmax backward in
   * place (scale included); dQ += dS·K, dK += dSᵀ·Q; dQ, dK, dV added straight into {@code dqkv} (leading dimension 3C).
   * In bf16 mode dY and qkv are read as bf16 copies and P, dP, dS are bf16, as in the forward.
   */
  void backward(View<DeviceBuffer> dqkv, View<DeviceBuffer> scratch, View<DeviceBuffer> dout, View<DeviceBuffer> qkv,
      View<DeviceBuffer> out, View<DeviceBuffer> att, int B, int T, int NH, int HS) {
    int c = NH * HS, blk = causalBlock(T);
    long n = (long) B * T * c, bhtt = (long) B * NH * T * T;
    if (flash(HS)) { // dsum = rowsum(dO ∘ O) into scratch; then dK, dV per key rows and dQ per query rows
      long bht = (long) B * NH * T;
      DeviceBuffer g = DeviceStream.slice("dqkv", dqkv, 3 * n), l = DeviceStream.slice("att", att, bht);
      DeviceBuffer sum = DeviceStream.slice("scratch", scratch, bht);
      DeviceBuffer y = copies.slot(Slot.GRADIENT, n); // dout's bf16 copy, written by the dot kernel
      copies.noFreshGradient();
      device.warps(bht).task("flashBackwardDot", FlashAttention::flashBackwardDot, KERNEL_CONTEXT, sum, 0, y, 0,
          DeviceStream.slice("dout", dout, n), 0, DeviceStream.slice("out", out, n), 0, B, T, NH, HS);
      DeviceBuffer q = at(copies.reused(qkv, 3 * n, Slot.ACTIVATION)); // the bf16 copies the kernels read
      DeviceBuffer copy = copies.slot(Slot.DQKV, 3 * n);
      float scale = Attention.scale(HS);
      flashGrid(B, NH, T).task("flashBackwardKeyValue", FlashAttention::flashBackwardKeyValue, KERNEL_CONTEXT, g, 0,
          copy, 0, 0, y, 0, q, 0, l, 0, sum, 0, B, T, NH, HS, scale);
      flashGrid(B, NH, T).task("flashBackwardQuery", FlashAttention::flashBackwardQuery, KERNEL_CONTEXT, g, 0, copy, 0,
          0, y, 0, q, 0, l, 0, sum, 0, B, T, NH, HS, scale);
      copies.bf16Only(dqkv, 3 * n); // the kernels write dqkv's copy only (fp32 flag 0)
      copies.wroteGradientCopy(dqkv, 3 * n, copy);
      return;
    }
    DeviceStream.slice("dqkv", dqkv, 3 * n);
    Operand q = copies.reused(qkv, 3 * n, Slot.ACTIVATION), y = copies.operand(dout, n, Slot.GRADIENT);
    Operand p = scores("att", att, bhtt), d = scores("scratch", scratch, bhtt);
    Operand g = new Operand(dqkv.arena(), dqkv.offset(), DataType.F32);
    Heads h = new Heads(B, NH, T, c, HS);
    for (int r0 = 0; r0 < T; r0 += blk) { // dP[r0.., 0..keys) = dY[r0..] · V[0..keys)ᵀ
      int keys = r0 + blk;
      headGemms(h, d.type(), false, true, blk, keys, HS, y, (long) r0 * c, c, h.rows, q, 2 * c, 3 * c, h.qkv, d,
          (long) r0 * T, T, h.att);
    }
    for (int k0 = 0; k0 < T; k0 += blk) { // dV[k0..] = P[k0.., k0..]ᵀ · dY[k0..]: the queries that see these keys
      int queries = T - k0;
      headGemms(h, DataType.F32, true, false, blk, HS, queries, p, (long) k0 * T + k0, T, h.att, y, (long) k0 * c, c,
          h.rows, g, 2 * c + (long) k0 * 3 * c, 3 * c, h.qkv);
    }
    DeviceBuffer pd = at(d), pp = at(p);
    if (d.type() == DataType.F32) {
      device.warps((long) B * NH * T).task("softmaxBackwardWarp", Attention::softmaxBackwardWarp, KERNEL_CONTEXT, pd, 0,
          pd, 0, pp, 0, B, NH, T, Attention.scale(HS), blk);
    } else {
      device.warps((long) B * NH * T).task("softmaxBackwardWarpBf16", Attention::softmaxBackwardWarpBf16,
          KERNEL_CONTEXT, pd, 0, pd, 0, pp, 0, B, NH, T, Attention.scale(HS), blk);
    }
    for (int r0 = 0; r0 < T; r0 += blk) { // dQ[r0..] = dS[r0.., 0..keys) · K[0..keys)
      int keys = r0 + blk;
      headGemms(h, DataType.F32, false, false, blk, HS, keys, d, (long) r0 * T, T, h.att, q, c, 3 * c, h.qkv, g,
          (long) r0 * 3 * c, 3 * c, h.qkv);
    }
    for (int k0 = 0; k0 < T; k0 += blk) { // dK[k0..] = dS[k0.., k0..]ᵀ · Q[k0..]
      int queries = T - k0;
      headGemms(h, DataType.F32, true, false, blk, HS, queries, d, (long) k0 * T + k0, T, h.att, q, (long) k0 * 3 * c,
          3 * c, h.qkv, g, c + (long) k0 * 3 * c, 3 * c, h.qkv);
    }
  }

  /** The launches of a {@link FlashAttention} kernel on its grid ({@link FlashAttention#blocks}). */
  private dev.taco.kernels.cuda.KernelTasks<Void> flashGrid(int B, int NH, int T) {
    return device.on(Dim3.of(FlashAttention.blocks(B, NH, T)), Dim3.of(FlashAttention.WARPS * 32));
  }

  /** The buffer from an operand's first element on (a kernel's array argument). */
  private static DeviceBuffer at(Operand o) {
    long from = o.off() * o.type().bytes;
    return o.buf().slice(from, o.buf().bytes() - from);
  }

  /**
   * A (B,NH,T,T) score-shaped tensor of {@code n} elements as a GEMM operand: itself (fp32), or in bf16 mode its bytes
   * read as bf16 (the first half of the region holds the matrix).
   */
  private Operand scores(String name, View<DeviceBuffer> v, long n) {
    DeviceStream.slice(name, v, n);
    return bf16 ? new Operand(v.arena(), 2 * v.offset(), DataType.BF16)
        : new Operand(v.arena(), v.offset(), DataType.F32);
  }

  /**
   * The (b,h) strides, in elements, of attention's three kinds of operand: a head of qkv or dqkv (B,T,3C), a head of
   * out or dout (B,T,C), a (T,T) block of att or scratch (B,NH,T,T); {@code [0]} steps b, {@code [1]} steps h.
   */
  private record Heads(int B, int NH, long[] qkv, long[] rows, long[] att) {
    Heads(int B, int NH, int T, int c, int HS) {
      this(B, NH, new long[] {3L * T * c, HS}, new long[] {(long) T * c, HS}, new long[] {(long) NH * T * T,
          (long) T * T});
    }
  }

  /**
   * One product {@code C = op(A)·op(B)} (C overwritten) for every (b,h), as strided-batched GEMMs: batched over the longer
   * of B and NH (a constant stride either way), one call per index of the shorter, so a step makes min(B, NH) calls
   * per product rather than B·NH. A and B share a type; {@code outType} is C's. Offsets ({@code aAt} ...) are of (b,h)
   * = (0,0), in elements from each operand's own offset; {@code sA}, {@code sB}, {@code sC} are the strides from
   * {@link Heads}.
   */
  private void headGemms(Heads h, DataType outType, boolean transA, boolean transB, int m, int n, int k, Operand a,
      long aAt, int lda, long[] sA, Operand b, long bAt, int ldb, long[] sB, Operand c, long cAt, int ldc, long[] sC) {
    if (a.type() != b.type() || c.type() != outType)
      throw new IllegalStateException("attention operand types disagree");
    int batchDim = h.NH() >= h.B() ? 1 : 0, loopDim = 1 - batchDim;
    int calls = batchDim == 1 ? h.B() : h.NH(), batch = batchDim == 1 ? h.NH() : h.B();
    for (int i = 0; i < calls; i++) {
      blas.gemmStridedBatched(device.stream(), transA, transB, m, n, k, a.type(), outType, 1f, a.buf(), a.off() + aAt
          + i * sA[loopDim], lda, sA[batchDim], b.buf(), b.off() + bAt + i * sB[loopDim], ldb, sB[batchDim], 0f,
          c.buf(), c.off() + cAt + i * sC[loopDim], ldc, sC[batchDim], batch);
    }
  }
}
