package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.kernels.Gemm;
import dev.taco.kernels.cpu.SimtEmulator;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The GPU backend's attention ({@code dev.taco.runtime.model.CudaOps}: per-head GEMMs reading q, k, v in place from
 * the (B,T,3C) qkv tensor with leading dimension 3C, and writing the output and the gradients in place with leading
 * dimensions C and 3C; the SIMT softmax kernels {@link Attention#softmaxForwardWarp} and
 * {@link Attention#softmaxBackwardWarp} in between) written out on the CPU with {@link Gemm} per (b,h) matrix and the
 * {@link SimtEmulator}, against {@link Attention#forward} / {@link Attention#backward}: the same outputs,
 * probabilities and accumulated gradients within 1e-5 relative L2, on fresh random shapes and values (seed printed).
 * This pins down which operand is transposed where, and at which offset and leading dimension, before the sequence runs
 * on a GPU.
 */
class AttentionGemmFormTest {
  static final double TOL = 1e-5;

  static double relL2(float[] got, float[] want) {
    double d = 0, w = 0;
    for (int i = 0; i < want.length; i++) {
      assertThat(Float.isNaN(got[i])).as("element %d is NaN", i).isFalse();
      d += ((double) got[i] - want[i]) * ((double) got[i] - want[i]);
      w += (double) want[i] * want[i];
    }
    return Math.sqrt(d / w);
  }

  static float[] random(Random r, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
    return a;
  }

  /** Warps per block in the emulated launches (CudaOps uses 8; 2 keeps the emulator quick). */
  static final int WARPS = 2;

  static int blocks(int rows) {
    return (rows + WARPS - 1) / WARPS;
  }

  @Test
  void gemmFormEqualsTheCpuAttention() {
    long seed = System.nanoTime();
    System.out.println("AttentionGemmFormTest seed " + seed);
    Random r = new Random(seed);
    for (int round = 0; round < 4; round++) {
      int b = 1 + r.nextInt(3), nh = 1 + r.nextInt(3), t = 1 + r.nextInt(40), hs = 4 << r.nextInt(3), c = nh * hs;
      int bh = b * nh, n = b * t * c, tt = t * t;
      float scale = Attention.scale(hs);
      String at = "seed " + seed + " round " + round + " B=" + b + " NH=" + nh + " T=" + t + " HS=" + hs;
      float[] qkv = random(r, 3 * n), dout = random(r, n), dqkv0 = random(r, 3 * n);
      float[] out = new float[n], att = new float[bh * tt], dqkv = dqkv0.clone(), scratch = new float[bh * tt];
      Attention.forward(out, 0, att, 0, qkv, 0, b, t, nh, hs);
      Attention.backward(dqkv, 0, scratch, 0, dout, 0, qkv, 0, att, 0, b, t, nh, hs);

      // forward: S = Q·Kᵀ per head, softmax rows, O = P·V straight into (B,T,C)
      float[] gAtt = new float[bh * tt], gOut = new float[n];
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt;
          Gemm.gemm(false, true, t, t, hs, qkv, q, 3 * c, qkv, q + c, 3 * c, gAtt, a, t, false);
        }
      }
      SimtEmulator.launch(blocks(bh * t), 32 * WARPS,
          k -> Attention.softmaxForwardWarp(k, gAtt, 0, gAtt, 0, b, nh, t, scale));
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt;
          Gemm.gemm(false, false, t, hs, t, gAtt, a, t, qkv, q + 2 * c, 3 * c, gOut, bi * t * c + h * hs, c, false);
        }
      }
      assertThat(relL2(gAtt, att)).as("%s: probabilities", at).isLessThanOrEqualTo(TOL);
      assertThat(relL2(gOut, out)).as("%s: output", at).isLessThanOrEqualTo(TOL);

      // backward: dP = dY·Vᵀ, dV += Pᵀ·dY, dS = softmax backward, dQ += dS·K, dK += dSᵀ·Q, all in place in dqkv
      float[] gScratch = new float[bh * tt], gDqkv = dqkv0.clone();
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt, y = bi * t * c + h * hs;
          Gemm.gemm(false, true, t, t, hs, dout, y, c, qkv, q + 2 * c, 3 * c, gScratch, a, t, false);
          Gemm.gemm(true, false, t, hs, t, gAtt, a, t, dout, y, c, gDqkv, q + 2 * c, 3 * c, true);
        }
      }
      SimtEmulator.launch(blocks(bh * t), 32 * WARPS,
          k -> Attention.softmaxBackwardWarp(k, gScratch, 0, gScratch, 0, gAtt, 0, b, nh, t, scale));
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt;
          Gemm.gemm(false, false, t, hs, t, gScratch, a, t, qkv, q + c, 3 * c, gDqkv, q, 3 * c, true);
          Gemm.gemm(true, false, t, hs, t, gScratch, a, t, qkv, q, 3 * c, gDqkv, q + c, 3 * c, true);
        }
      }
      float[] want = new float[3 * n], got = new float[3 * n];
      for (int i = 0; i < 3 * n; i++) {
        want[i] = dqkv[i] - dqkv0[i];
        got[i] = gDqkv[i] - dqkv0[i];
      }
      assertThat(relL2(got, want)).as("%s: accumulated dqkv", at).isLessThanOrEqualTo(TOL);
    }
  }
}
