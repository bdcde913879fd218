package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;

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
      SimtEmulator.launch(blocks(b * t), 32 * WARPS,
          k -> LayerNorm.layernormForwardWarp(k, gOut, 0, gMean, 0, gRstd, 0, inp, 0, w, 0, bias, 0, b, t, c));
      assertThat(AttentionGemmFormTest.relL2(gOut, out)).as("%s: out", at).isLessThanOrEqualTo(TOL);
      assertThat(AttentionGemmFormTest.relL2(gMean, mean)).as("%s: mean", at).isLessThanOrEqualTo(TOL);
      assertThat(AttentionGemmFormTest.relL2(gRstd, rstd)).as("%s: rstd", at).isLessThanOrEqualTo(TOL);

      float[] dout = random(r, n, 0, 1), dinp0 = random(r, n, 0, 1);
      float[] dinp = dinp0.clone(), gDinp = dinp0.clone();
      LayerNorm.layernormBackwardRows(dinp, 0, dout, 0, inp, 0, w, 0, mean, 0, rstd, 0, b, t, c);
      SimtEmulator.launch(blocks(b * t), 32 * WARPS,
          k -> LayerNorm.layernormBackwardRowsWarp(k, gDinp, 0, dout, 0, inp, 0, w, 0, mean, 0, rstd, 0, b, t, c));
      float[] want = new float[n], got = new float[n];
      for (int i = 0; i < n; i++) {
        want[i] = dinp[i] - dinp0[i];
        got[i] = gDinp[i] - dinp0[i];
      }
      assertThat(AttentionGemmFormTest.relL2(got, want)).as("%s: accumulated dinp", at).isLessThanOrEqualTo(TOL);
    }
  }

  @Test
  void warpCrossEntropyMatchesTheCpuKernel() {
    long seed = System.nanoTime();
    Random r = new Random(seed);
    for (int round = 0; round < 4; round++) {
      int b = 1 + r.nextInt(3), t = 1 + r.nextInt(9), v = 1 + r.nextInt(300);
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
