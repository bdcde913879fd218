package dev.taco.runtime.layers;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Gemm;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;
import dev.taco.kernels.Vec16;

/**
 * A linear layer: {@code out = inp · weight + bias}, the three GEMMs of a transformer block's
 * QKV, attention-output, fc1 and fc2 projections (and the LM head).
 *
 * <p>Shapes: {@code inp} is (B,T,C), {@code weight} is (C,OC) row-major — input channels by output
 * channels, so that the forward pass is a plain A·B and a column-parallel split over ranks takes a
 * column block of it — {@code bias} is (OC) or null, {@code out} is (B,T,OC).
 * The three products are host calls into {@link Gemm} (cuBLAS on the GPU); the bias add and the bias gradient are
 * kernels ({@link #matmulForwardBias}, {@link #matmulBackwardBias}).
 * Reference: the chain rule for Y = XW + b: dX = dY·W^T, dW = X^T·dY, db = sum over rows of dY.
 */
public final class Matmul {
  private Matmul() {}

  /** Output channels per block in the bias-gradient column sum: one 64-byte cache line. */
  private static final int CB = 16;

  /** out(B,T,OC) = inp(B,T,C) · weight(C,OC) + bias(OC); {@code bias} may be null. Overwrites {@code out}. */
  public static void forward(float[] out, int outOff, float[] inp, int inpOff,
      float[] weight, int weightOff, float[] bias, int biasOff,
      int B, int T, int C, int OC) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("C", C);
    Check.positive("OC", OC);
    Check.span("out", out, outOff, Check.n(B, T, OC));
    Check.span("inp", inp, inpOff, Check.n(B, T, C));
    Check.span("weight", weight, weightOff, Check.n(C, OC));
    if (bias != null) {
      Check.span("bias", bias, biasOff, OC);
    }

    Gemm.matmul(inp, inpOff, weight, weightOff, out, outOff, B * T, OC, C, false);
    if (bias != null) {
      matmulForwardBias(out, outOff, bias, biasOff, B * T, OC);
    }
  }

  /**
   * out(N,OC) += bias(OC): the bias of {@link #forward}, and on its own the bias of a row-parallel linear, which is
   * added once after the all-reduce of the partial products (Megatron-LM; {@code dev.taco.runtime.model.Gpt}).
   *
   * @param N rows, e.g. B·T
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void addBias(float[] out, int outOff, float[] bias, int biasOff, int N, int OC) {
    checkBias("out", out, outOff, "bias", bias, biasOff, N, OC);
    matmulForwardBias(out, outOff, bias, biasOff, N, OC);
  }

  /**
   * The checks of {@link #addBias} and of the bias gradient ({@link MatmulLanes}): {@code rows} (N,OC) and
   * {@code vector} (OC), named as given.
   */
  static void checkBias(String rowsName, float[] rows, int rowsOff, String vectorName, float[] vector, int vectorOff,
      int N, int OC) {
    Check.positive("N", N);
    Check.positive("OC", OC);
    Check.span(rowsName, rows, rowsOff, Check.n(N, OC));
    Check.span(vectorName, vector, vectorOff, OC);
  }

  /**
   * Kernel (the GPU backend's bf16 mode): {@code out[i] = in[i]} rounded to bf16 bits ({@link Bf16#encode}: nearest
   * even, NaN kept, overflow to ±Inf), one operand of a bf16-in, fp32-accumulate GEMM. No checks.
   */
  @Kernel
  public static void roundToBf16(short[] out, int outOff, float[] in, int inOff, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      out[outOff + i] = Bf16.encode(in[inOff + i]);
    }
  }

  /**
   * Kernel, {@link #roundToBf16} eight elements at a time: two 16-byte loads, four packed conversions
   * ({@link Bf16#encode2}: one {@code cvt.rn.bf16x2.f32} each on the GPU, the same bits as {@link Bf16#encode}) and
   * one 16-byte store. {@code inOff % 4 == 0}, {@code outOff % 8 == 0}, {@code 8·groups} elements. No checks.
   */
  @Kernel
  public static void roundToBf16x8(short[] out, int outOff, float[] in, int inOff, int groups) {
    for (@Parallel int g = 0; g < groups; g++) {
      float[] lo = new float[4];
      float[] hi = new float[4];
      Vec16.loadFloat4(in, inOff + 8 * g, lo);
      Vec16.loadFloat4(in, inOff + 8 * g + 4, hi);
      Vec16.storeShortPairs8(out, outOff + 8 * g, Bf16.encode2(lo[0], lo[1]), Bf16.encode2(lo[2], lo[3]),
          Bf16.encode2(hi[0], hi[1]), Bf16.encode2(hi[2], hi[3]));
    }
  }

  /** Kernel of {@link #addBias}: out(N,OC) += bias(OC), one iteration per element. No checks. */
  @Kernel
  public static void matmulForwardBias(float[] out, int outOff, float[] bias, int biasOff, int N, int OC) {
    for (@Parallel int i = 0; i < N * OC; i++) {
      out[outOff + i] += bias[biasOff + i % OC];
    }
  }

  /**
   * dinp(B,T,C) += dout · weight^T, dweight(C,OC) += inp^T · dout, dbias(OC) += column sums of dout.
   * {@code dbias} may be null (a layer without bias).
   */
  public static void backward(float[] dinp, int dinpOff, float[] dweight, int dweightOff, float[] dbias, int dbiasOff,
      float[] dout, int doutOff, float[] inp, int inpOff, float[] weight, int weightOff,
      int B, int T, int C, int OC) {
    Check.positive("B", B);
    Check.positive("T", T);
    Check.positive("C", C);
    Check.positive("OC", OC);
    Check.span("dinp", dinp, dinpOff, Check.n(B, T, C));
    Check.span("dweight", dweight, dweightOff, Check.n(C, OC));
    if (dbias != null) {
      Check.span("dbias", dbias, dbiasOff, OC);
    }
    Check.span("dout", dout, doutOff, Check.n(B, T, OC));
    Check.span("inp", inp, inpOff, Check.n(B, T, C));
    Check.span("weight", weight, weightOff, Check.n(C, OC));

    // dinp[BT,C] += dout[BT,OC] · weight^T, weight stored [C,OC] = [n,k].
    Gemm.matmulTransB(dout, doutOff, weight, weightOff, dinp, dinpOff, B * T, C, OC, true);
    // dweight[C,OC] += inp^T · dout[BT,OC], inp stored [BT,C] = [k,m].
    Gemm.matmulTransA(inp, inpOff, dout, doutOff, dweight, dweightOff, C, OC, B * T, true);
    if (dbias != null) {
      matmulBackwardBias(dbias, dbiasOff, dout, doutOff, B * T, OC);
    }
  }

  /**
   * Kernel: dbias(OC) += column sums of dout(N,OC), each over all N rows in order; one iteration per block of 16
   * output channels, so each sum has one writer. No checks.
   */
  @Kernel
  public static void matmulBackwardBias(float[] dbias, int dbiasOff, float[] dout, int doutOff, int N, int OC) {
    int blocks = (OC + CB - 1) / CB;
    for (@Parallel int blk = 0; blk < blocks; blk++) {
      int j0 = blk * CB;
      int j1 = Math.min(j0 + CB, OC);
      for (int i = 0; i < N; i++) {
        int d = doutOff + i * OC;
        for (int j = j0; j < j1; j++) {
          dbias[dbiasOff + j] += dout[d + j];
        }
      }
    }
  }
}
