package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.cpu.SimtEmulator;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The GPU backend's own kernel forms, run on the {@link SimtEmulator} (or as plain loops), against the CPU kernels
 * they stand in for, on fresh random shapes and values (seed printed): the warp-per-row LayerNorm forward and backward
 * and cross-entropy within 1e-5 relative L2 (their sums are added in another order), the per-element dwte gather bit
 * for bit (the same additions in the same order). The softmax warp kernels are covered by
 * {@link AttentionGemmFormTest}. Shapes include rows that do not fill the last block and widths that are not a
 * multiple of 32.
 */
class GpuKernelFormsTest {
  static final double TOL = 1e-5;
  static final int WARPS = 3; // warps per emulated block: row counts rarely divide it

  static int blocks(int rows) {
    return (rows + WARPS - 1) / WARPS;
  }

  static float[] random(Random r, int n, double mean, double sd) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) (mean + sd * r.nextGaussian());
    return a;
  }

  @Test
  void warpLayerNormMatchesTheCpuKernels() {
    long seed = System.nanoTime();
    Random r = new Random(seed);
    for (int round = 0; round < 4; round++) {
      int b = 1 + r.nextInt(3), t = 1 + r.nextInt(9), c = 2 + r.nextInt(100); // C = 1 has dinp = 0
      String at = "seed " + seed + " B=" + b + " T=" + t + " C=" + c;
      int n = b * t * c;
      float[] inp = random(r, n, 3.0, 2.0), w = random(r, c, 1, 0.5), bias = random(r, c, 0, 1);
      float[] out = new float[n], mean = new float[b * t], rstd = new float[b * t];
      float[] gOut = new float[n], gMean = new float[b * t], gRstd = new float[b * t];
      LayerNorm.layernormForward(out, 0, mean, 0, rstd, 0, inp, 0, w, 0, bias, 0, b, t, c);
      short[] outCopy = new short[n];
      SimtEmulator.launch(blocks(b * t), 32 * WARPS, k -> LayerNorm.layernormForwardWarp(k, gOut, 0, outCopy, 0, 1,
          gMean, 0, gRstd, 0, inp, 0, w, 0, bias, 0, b, t, c));
      assertThat(AttentionGemmFormTest.relL2(gOut, out)).as("%s: out", at).isLessThanOrEqualTo(TOL);
      assertBf16Copy(outCopy, gOut, at + ": out");
      float[] fp32Only = new float[n];
      short[] untouched = new short[n];
      SimtEmulator.launch(blocks(b * t), 32 * WARPS, k -> LayerNorm.layernormForwardWarp(k, fp32Only, 0, untouched, 0,
          0, gMean, 0, gRstd, 0, inp, 0, w, 0, bias, 0, b, t, c));
      assertThat(fp32Only).as("%s: out without a copy", at).isEqualTo(gOut);
      assertThat(untouched).as("%s: copies = 0 writes no copy", at).containsOnly((short) 0);
      assertThat(AttentionGemmFormTest.relL2(gMean, mean)).as("%s: mean", at).isLessThanOrEqualTo(TOL);
      assertThat(AttentionGemmFormTest.relL2(gRstd, rstd)).as("%s: rstd", at).isLessThanOrEqualTo(TOL);

      float[] dout = random(r, n, 0, 1), dinp0 = random(r, n, 0, 1);
      float[] dinp = dinp0.clone(), gDinp = dinp0.clone();
      LayerNorm.layernormBackwardRows(dinp, 0, dout, 0, inp, 0, w, 0, mean, 0, rstd, 0, b, t, c);
      short[] dinpCopy = new short[n];
      SimtEmulator.launch(blocks(b * t), 32 * WARPS, k -> LayerNorm.layernormBackwardRowsWarp(k, gDinp, 0, dinpCopy, 0,
          1, dout, 0, inp, 0, w, 0, mean, 0, rstd, 0, b, t, c));
      assertBf16Copy(dinpCopy, gDinp, at + ": dinp");
      float[] want = new float[n], got = new float[n];
      for (int i = 0; i < n; i++) {
        want[i] = dinp[i] - dinp0[i];
        got[i] = gDinp[i] - dinp0[i];
      }
      assertThat(AttentionGemmFormTest.relL2(got, want)).as("%s: accumulated dinp", at).isLessThanOrEqualTo(TOL);
    }
  }

  /** Every element of {@code copy} is the bf16 code of the fp32 value beside it (the GPU's bf16-mode operand). */
  static void assertBf16Copy(short[] copy, float[] values, String what) {
    for (int i = 0; i < values.length; i++) {
      assertThat(copy[i]).as("%s's bf16 copy at %d", what, i).isEqualTo(Bf16.encode(values[i]));
    }
  }

  @Test
  void warpCrossEntropyMatchesTheCpuKernel() {
    long seed = System.nanoTime();
    Random r = new Random(seed);
    for (int round = 0; round < 4; round++) {
      int b = 1 + r.nextInt(3), t = 1 + r.nextInt(9), v = 2 + r.nextInt(300); // V = 1: every loss is 0
      String at = "seed " + seed + " B=" + b + " T=" + t + " V=" + v;
      float[] logits = random(r, b * t * v, 0, 4);
      int[] tgt = r.ints(b * t, 0, v).toArray();
      float[] losses = new float[b * t], probs = new float[b * t * v];
      float[] gLosses = new float[b * t], gProbs = new float[b * t * v];
      CrossEntropy.crossentropyForward(losses, 0, probs, 0, logits, 0, tgt, 0, b, t, v);
      SimtEmulator.launch(blocks(b * t), 32 * WARPS,
          k -> CrossEntropy.crossentropyForwardWarp(k, gLosses, 0, gProbs, 0, logits, 0, tgt, 0, b, t, v));
      assertThat(AttentionGemmFormTest.relL2(gProbs, probs)).as("%s: probs", at).isLessThanOrEqualTo(TOL);
      assertThat(AttentionGemmFormTest.relL2(gLosses, losses)).as("%s: losses", at).isLessThanOrEqualTo(TOL);
    }
  }

  @Test
  void bf16OperandsAreRoundedToNearestEvenWithinHalfAnUlp() {
    long seed = System.nanoTime();
    Random r = new Random(seed);
    int n = 4096;
    float[] x = new float[n + 3];
    for (int i = 0; i < x.length; i++) x[i] = (float) (r.nextGaussian() * Math.pow(10, r.nextInt(60) - 30));
    x[5] = Float.NaN;
    x[6] = Float.NEGATIVE_INFINITY;
    x[7] = Float.MIN_VALUE;
    x[8] = Float.intBitsToFloat(0x3F808000); // a tie: 1 + 2^-8, rounds to the even 1.0
    short[] out = new short[n + 1];
    Matmul.roundToBf16(out, 1, x, 3, n);
    assertThat(out[0]).isZero();
    for (int i = 0; i < n; i++) {
      float v = x[3 + i], got = dev.taco.kernels.Bf16.decode(out[1 + i]);
      if (Float.isNaN(v)) {
        assertThat(Float.isNaN(got)).as("seed %d: NaN stays NaN", seed).isTrue();
      } else if (Float.isInfinite(v) || v == 0 || Math.abs(v) < Float.MIN_NORMAL) {
        assertThat((double) got).as("seed %d: element %d", seed, i).isCloseTo(v, org.assertj.core.data.Offset.offset(
            (double) Float.MIN_NORMAL));
      } else {
        assertThat(Math.abs(((double) got - v) / v)).as("seed %d: element %d (%s -> %s)", seed, i, v, got)
            .isLessThanOrEqualTo(Math.pow(2, -8));
      }
    }
    assertThat(dev.taco.kernels.Bf16.decode(out[1 + 5])).isEqualTo(1.0f);
    short[] vec = new short[n];
    Matmul.roundToBf16x8(vec, 0, x, 0, n / 8); // the vector form
    short[] scalar = new short[n];
    Matmul.roundToBf16(scalar, 0, x, 0, n);
    assertThat(vec).as("seed %d: eight at a time, the same bits", seed).containsExactly(scalar);
  }

  @Test
  void bf16SoftmaxKernelsMatchTheFp32OnesOnTheSameInputsWithinOneRounding() {
    long seed = System.nanoTime();
    Random r = new Random(seed);
    for (int round = 0; round < 3; round++) {
      int b = 1 + r.nextInt(2), nh = 1 + r.nextInt(3), t = 2 + r.nextInt(70); // T = 1: the gradient is exactly 0
      int n = b * nh * t * t;
      float scale = 0.125f + r.nextFloat();
      String at = "seed " + seed + " B=" + b + " NH=" + nh + " T=" + t;
      short[] s16 = new short[n], d16 = new short[n];
      float[] s32 = new float[n], d32 = new float[n];
      for (int i = 0; i < n; i++) {
        s16[i] = dev.taco.kernels.Bf16.encode((float) (3 * r.nextGaussian()));
        s32[i] = dev.taco.kernels.Bf16.decode(s16[i]);
        d16[i] = dev.taco.kernels.Bf16.encode((float) r.nextGaussian());
        d32[i] = dev.taco.kernels.Bf16.decode(d16[i]);
      }
      Attention.softmaxForward(s32, 0, s32, 0, b, nh, t, scale);
      SimtEmulator.launch(blocks(b * nh * t), 32 * WARPS,
          k -> Attention.softmaxForwardWarpBf16(k, s16, 0, s16, 0, b, nh, t, scale, t));
      float[] p16 = new float[n];
      for (int i = 0; i < n; i++) p16[i] = dev.taco.kernels.Bf16.decode(s16[i]);
      assertThat(AttentionGemmFormTest.relL2(p16, s32)).as("%s: bf16 probabilities", at).isLessThanOrEqualTo(4e-3);
      short[] pIn = s16.clone();
      Attention.softmaxBackward(d32, 0, d32, 0, p16, 0, b, nh, t, scale);
      SimtEmulator.launch(blocks(b * nh * t), 32 * WARPS,
          k -> Attention.softmaxBackwardWarpBf16(k, d16, 0, d16, 0, pIn, 0, b, nh, t, scale, t));
      float[] g16 = new float[n];
      for (int i = 0; i < n; i++) g16[i] = dev.taco.kernels.Bf16.decode(d16[i]);
      assertThat(AttentionGemmFormTest.relL2(g16, d32)).as("%s: bf16 score gradients", at).isLessThanOrEqualTo(4e-3);
      for (int row = 0; row < b * nh * t; row++) {
        for (int col = row % t + 1; col < t; col++) {
          assertThat(p16[row * t + col]).as("%s: masked probability", at).isZero();
          assertThat(g16[row * t + col]).as("%s: masked gradient", at).isZero();
        }
      }
    }
  }

  @Test
  void columnGatherOfDwteIsBitIdenticalToTheRowGather() {
    long seed = System.nanoTime();
    Random r = new Random(seed);
    int b = 2, t = 37, c = 19, v = 11;
    float[] dout = random(r, b * t * c, 0, 1), dwte0 = random(r, v * c, 0, 1);
    int[] ids = r.ints(b * t, 0, v).toArray();
    float[] rows = dwte0.clone(), cols = dwte0.clone();
    Encoder.encoderBackwardWte(rows, 0, dout, 0, ids, 0, b, t, c, v);
    Encoder.encoderBackwardWteColumns(cols, 0, dout, 0, ids, 0, b, t, c, v);
    assertThat(cols).as("seed %d", seed).containsExactly(rows);
    assertThat(cols).as("seed %d: the gradient moved", seed).isNotEqualTo(dwte0);
  }
}
