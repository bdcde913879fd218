package dev.taco.runtime.layers;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.Parallel;

/**
 * Layer normalisation over the channel dimension, as in the pre-LN blocks of GPT-2.
 *
 * <p>{@code out = (inp - mean) * rstd * weight + bias}, with {@code mean} and {@code rstd = 1/sqrt(var + eps)}
 * taken over the C channels of each position (biased variance, eps = 1e-5 as in GPT-2 / PyTorch).
 * Shapes: {@code inp} and {@code out} are (B,T,C); {@code weight}, {@code bias} are (C); {@code mean},
 * {@code rstd} are (B,T) and are saved by the forward pass for the backward pass.
 * Reference: Ba, Kiros, Hinton, "Layer Normalization", arXiv:1607.06450, eq. 4.
 */
public final class LayerNorm {
  private LayerNorm() {}

  /** The variance floor; GPT-2 uses 1e-5. */
  public static final float EPS = 1e-5f;

  /** Channels per block in the column reductions of {@link #backward}: one 64-byte cache line. */
  private static final int CB = 16;

  /** out(B,T,C), mean(B,T), rstd(B,T) from inp(B,T,C), weight(C), bias(C). Overwrites its outputs. */
  public static void forward(float[] out, int outOff, float[] mean, int meanOff, float[] rstd, int rstdOff,
      float[] inp, int inpOff, float[] weight, int weightOff, float[] bias, int biasOff,
      int B, int T, int C) {
    checkForward(out, outOff, mean, meanOff, rstd, rstdOff, inp, inpOff, weight, weightOff, bias, biasOff, B, T, C);
    layernormForward(out, outOff, mean, meanOff, rstd, rstdOff, inp, inpOff, weight, weightOff, bias, biasOff,
        B, T, C);
  }

  /** The checks of {@link #forward} (and of {@link LayerNormLanes#forward}). */
  static void checkForward(float[] out, int outOff, float[] mean, int meanOff, float[] rstd, int rstdOff,
      float[] inp, int inpOff, float[] weight, int weightOff, float[] bias, int biasOff,
      int B, int T, int C) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("C", C);
    Check.span("out", out, outOff, Check.n(B, T, C));
    Check.span("mean", mean, meanOff, Check.n(B, T));
    Check.span("rstd", rstd, rstdOff, Check.n(B, T));
    Check.span("inp", inp, inpOff, Check.n(B, T, C));
    Check.span("weight", weight, weightOff, C);
    Check.span("bias", bias, biasOff, C);
  }

  /** Kernel of {@link #forward}: one iteration per position (b,t), two passes over its C channels. No checks. */
  @Kernel
  public static void layernormForward(float[] out, int outOff, float[] mean, int meanOff, float[] rstd, int rstdOff,
      float[] inp, int inpOff, float[] weight, int weightOff, float[] bias,
      int biasOff, int B, int T, int C) {
    for (@Parallel int bt = 0; bt < B * T; bt++) {
      int x = inpOff + bt * C;
      float s = 0f;
      for (int c = 0; c < C; c++) {
        s += inp[x + c];
      }
      float m = s / C;
      // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels
      // catastrophically in float when |mean| is large against the spread.
      float v = 0f;
      for (int c = 0; c < C; c++) {
        float d = inp[x + c] - m;
        v += d * d;
      }
      float r = (float) (1.0 / Math.sqrt(v / C + EPS));
      int o = outOff + bt * C;
      for (int c = 0; c < C; c++) {
        out[o + c] = (inp[x + c] - m) * r * weight[weightOff + c] + bias[biasOff + c];
      }
      mean[meanOff + bt] = m;
      rstd[rstdOff + bt] = r;
    }
  }

  /**
   * dinp(B,T,C) += dL/dinp, dweight(C) += sum over positions of dout * norm, dbias(C) += sum of dout,
   * where norm = (inp - mean) * rstd.
   *
   * <p>With g = weight * dout: dinp = rstd * (g - mean_c(g) - norm * mean_c(g * norm)); the two
   * means are the gradients through mean and rstd (derivation: the Ba et al. reference, or llm.c's
   * doc/layernorm). The per-row part and the per-channel sums are two loops, each race-free: rows are
   * independent, and the channel sums are split into blocks of 16 channels that each walk all rows.
   */
  public static void backward(float[] dinp, int dinpOff, float[] dweight, int dweightOff, float[] dbias, int dbiasOff,
      float[] dout, int doutOff, float[] inp, int inpOff, float[] weight, int weightOff,
      float[] mean, int meanOff, float[] rstd, int rstdOff,
      int B, int T, int C) {
    checkBackward(dinp, dinpOff, dweight, dweightOff, dbias, dbiasOff, dout, doutOff, inp, inpOff, weight, weightOff,
        mean, meanOff, rstd, rstdOff, B, T, C);
    layernormBackwardRows(dinp, dinpOff, dout, doutOff, inp, inpOff, weight, weightOff, mean, meanOff, rstd, rstdOff,
        B, T, C);
    layernormBackwardParams(dweight, dweightOff, dbias, dbiasOff, dout, doutOff, inp, inpOff, mean, meanOff,
        rstd, rstdOff, B, T, C);
  }

  /** The checks of {@link #backward} (and of {@link LayerNormLanes#backward}). */
  static void checkBackward(float[] dinp, int dinpOff, float[] dweight, int dweightOff, float[] dbias, int dbiasOff,
      float[] dout, int doutOff, float[] inp, int inpOff, float[] weight, int weightOff,
      float[] mean, int meanOff, float[] rstd, int rstdOff, int B, int T, int C) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("C", C);
    Check.span("dinp", dinp, dinpOff, Check.n(B, T, C));
    Check.span("dweight", dweight, dweightOff, C);
    Check.span("dbias", dbias, dbiasOff, C);
    Check.span("dout", dout, doutOff, Check.n(B, T, C));
    Check.span("inp", inp, inpOff, Check.n(B, T, C));
    Check.span("weight", weight, weightOff, C);
    Check.span("mean", mean, meanOff, Check.n(B, T));
    Check.span("rstd", rstd, rstdOff, Check.n(B, T));
  }

  /** Kernel: the dinp part of {@link #backward}, one iteration per position (b,t). No checks. */
  @Kernel
  public static void layernormBackwardRows(float[] dinp, int dinpOff, float[] dout, int doutOff, float[] inp,
      int inpOff, float[] weight, int weightOff, float[] mean, int meanOff,
      float[] rstd, int rstdOff, int B, int T, int C) {
    for (@Parallel int bt = 0; bt < B * T; bt++) {
      int x = inpOff + bt * C;
      int d = doutOff + bt * C;
      float m = mean[meanOff + bt];
      float r = rstd[rstdOff + bt];
      float gMean = 0f;
      float gNormMean = 0f;
      for (int c = 0; c < C; c++) {
        float g = weight[weightOff + c] * dout[d + c];
        gMean += g;
        gNormMean += g * (inp[x + c] - m) * r;
      }
      gMean /= C;
      gNormMean /= C;
      int di = dinpOff + bt * C;
      for (int c = 0; c < C; c++) {
        float g = weight[weightOff + c] * dout[d + c];
        float norm = (inp[x + c] - m) * r;
        dinp[di + c] += r * (g - gMean - norm * gNormMean);
      }
    }
  }

  /**
   * SIMT kernel, the GPU's form of {@link #layernormForward}: one warp per position (b,t), its 32 lanes striding over
   * the C channels (coalesced), the two sums by {@link KernelContext#warpReduceSum}. The same two-pass formula; the
   * sums are added in another order, so results differ from the CPU's by float rounding. Blocks of whole warps;
   * warp w of the grid takes position w. With {@code copies} = 1, out rounded to bf16 ({@link Bf16#encode}) into
   * {@code copy} as well (the GPU's bf16 mode: the operand of the linear layer that follows; 0: copy is not touched).
   * No checks.
   */
  @Kernel
  public static void layernormForwardWarp(KernelContext ctx, float[] out, int outOff, short[] copy, int copyOff,
      int copies, float[] mean, int meanOff, float[] rstd, int rstdOff,
      float[] inp, int inpOff, float[] weight, int weightOff, float[] bias,
      int biasOff, int B, int T, int C) {
    int bt = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (bt >= B * T) {
      return; // whole warps leave together: no shuffle is left half-called
    }
    int lane = ctx.laneId();
    int x = inpOff + bt * C;
    float s = 0f;
    for (int c = lane; c < C; c += KernelContext.WARP_SIZE) {
      s += inp[x + c];
    }
    float m = ctx.warpReduceSum(s) / C;
    float v = 0f;
    for (int c = lane; c < C; c += KernelContext.WARP_SIZE) {
      float d = inp[x + c] - m;
      v += d * d;
    }
    float r = (float) (1.0 / Math.sqrt(ctx.warpReduceSum(v) / C + EPS));
    int o = bt * C;
    for (int c = lane; c < C; c += KernelContext.WARP_SIZE) {
      float y = (inp[x + c] - m) * r * weight[weightOff + c] + bias[biasOff + c];
      out[outOff + o + c] = y;
      if (copies != 0) {
        copy[copyOff + o + c] = Bf16.encode(y);
      }
    }
    if (lane == 0) {
      mean[meanOff + bt] = m;
      rstd[rstdOff + bt] = r;
    }
  }

  /**
   * SIMT kernel, the GPU's form of {@link #layernormBackwardRows}: one warp per position, lanes over channels, the two
   * channel means by warp reductions. With {@code copies} = 1, the accumulated dinp rounded to bf16 into {@code copy}
   * as well (the operand of the backward of the linear layer before; 0: copy is not touched). No checks.
   */
  @Kernel
  public static void layernormBackwardRowsWarp(KernelContext ctx, float[] dinp, int dinpOff, short[] copy,
      int copyOff, int copies, float[] dout, int doutOff, float[] inp,
      int inpOff, float[] weight, int weightOff, float[] mean, int meanOff,
      float[] rstd, int rstdOff, int B, int T, int C) {
    int bt = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (bt >= B * T) {
      return;
    }
    int lane = ctx.laneId();
    int x = inpOff + bt * C;
    int d = doutOff + bt * C;
    float m = mean[meanOff + bt];
    float r = rstd[rstdOff + bt];
    float gMean = 0f;
    float gNormMean = 0f;
    for (int c = lane; c < C; c += KernelContext.WARP_SIZE) {
      float g = weight[weightOff + c] * dout[d + c];
      gMean += g;
      gNormMean += g * (inp[x + c] - m) * r;
    }
    gMean = ctx.warpReduceSum(gMean) / C;
    gNormMean = ctx.warpReduceSum(gNormMean) / C;
    int di = bt * C;
    for (int c = lane; c < C; c += KernelContext.WARP_SIZE) {
      float g = weight[weightOff + c] * dout[d + c];
      float norm = (inp[x + c] - m) * r;
      float y = dinp[dinpOff + di + c] + r * (g - gMean - norm * gNormMean);
      dinp[dinpOff + di + c] = y;
      if (copies != 0) {
        copy[copyOff + di + c] = Bf16.encode(y);
      }
    }
  }

  /**
   * Kernel: the dweight and dbias parts of {@link #backward} as {@code parts} partial sums over consecutive blocks of
   * positions (the GPU backend's form; it then sums the {@code parts} rows of each with a GEMM against ones): one
   * iteration per (part, channel), reading dout and inp once, coalesced along the channels. Part {@code p} sums rows
   * {@code [p·⌈rows/parts⌉, (p+1)·⌈rows/parts⌉)} in order into {@code partials[p·C + c]} (dweight) and
   * {@code partials[parts·C + p·C + c]} (dbias); so the full sums differ from {@link #layernormBackwardParams}'s only
   * in the order of their additions. {@code rows} = B·T, {@code partials} holds {@code 2·parts·C}. No checks.
   */
  @Kernel
  public static void layernormParamPartials(float[] partials, int partialsOff, float[] dout, int doutOff, float[] inp,
      int inpOff, float[] mean, int meanOff, float[] rstd, int rstdOff,
      int rows, int C, int parts) {
    for (@Parallel int i = 0; i < parts * C; i++) {
      int p = i / C;
      int c = i - p * C;
      int per = (rows + parts - 1) / parts;
      int r1 = Math.min(rows, p * per + per);
      float dw = 0f;
      float db = 0f;
      for (int r = p * per; r < r1; r++) {
        float d = dout[doutOff + r * C + c];
        dw += d * (inp[inpOff + r * C + c] - mean[meanOff + r]) * rstd[rstdOff + r];
        db += d;
      }
      partials[partialsOff + i] = dw;
      partials[partialsOff + parts * C + i] = db;
    }
  }

  /**
   * Kernel: the dweight and dbias parts of {@link #backward}, sums over all B·T positions in order; one iteration per
   * block of 16 channels, so each sum has one writer. No checks.
   */
  @Kernel
  public static void layernormBackwardParams(float[] dweight, int dweightOff, float[] dbias, int dbiasOff,
      float[] dout, int doutOff, float[] inp, int inpOff, float[] mean,
      int meanOff, float[] rstd, int rstdOff, int B, int T, int C) {
    int blocks = (C + CB - 1) / CB;
    for (@Parallel int blk = 0; blk < blocks; blk++) {
      int c0 = blk * CB;
      int c1 = Math.min(c0 + CB, C);
      for (int bt = 0; bt < B * T; bt++) {
        int x = inpOff + bt * C;
        int d = doutOff + bt * C;
        float m = mean[meanOff + bt];
        float r = rstd[rstdOff + bt];
        for (int c = c0; c < c1; c++) {
          dweight[dweightOff + c] += dout[d + c] * (inp[x + c] - m) * r;
          dbias[dbiasOff + c] += dout[d + c];
        }
      }
    }
  }
}
