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
    for (int round = 0; round < 6; round++) {
      int b = 1 + r.nextInt(3), nh = 1 + r.nextInt(3), t = 1 + r.nextInt(40), hs = 4 << r.nextInt(3), c = nh * hs;
      if (round % 2 == 1) t = 4 * (1 + r.nextInt(10)); // room for 2 or 4 causal blocks
      int blk = round % 2 == 0 ? t : t / (round % 4 == 1 ? 2 : 4); // the causal block (CudaOps.causalBlock)
      int bh = b * nh, n = b * t * c, tt = t * t;
      float scale = Attention.scale(hs);
      String at = "seed " + seed + " round " + round + " B=" + b + " NH=" + nh + " T=" + t + " HS=" + hs + " block "
          + blk;
      float[] qkv = random(r, 3 * n), dout = random(r, n), dqkv0 = random(r, 3 * n);
      float[] out = new float[n], att = new float[bh * tt], dqkv = dqkv0.clone(), scratch = new float[bh * tt];
      Attention.forward(out, 0, att, 0, qkv, 0, b, t, nh, hs);
      Attention.backward(dqkv, 0, scratch, 0, dout, 0, qkv, 0, att, 0, b, t, nh, hs);

      // forward, per query block [r0, r0+blk): S = Q·Kᵀ over the keys up to the block's end, softmax rows, O = P·V
      // straight into (B,T,C); the matrices start as NaN, so that a read outside the blocks the GEMMs write shows
      float[] gAtt = new float[bh * tt], gOut = new float[n];
      java.util.Arrays.fill(gAtt, Float.NaN);
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt;
          for (int r0 = 0; r0 < t; r0 += blk) {
            Gemm.gemm(false, true, blk, r0 + blk, hs, qkv, q + r0 * 3 * c, 3 * c, qkv, q + c, 3 * c, gAtt, a + r0 * t,
                t, false);
          }
        }
      }
      final int block = blk, T = t;
      SimtEmulator.launch(blocks(bh * t), 32 * WARPS,
          k -> Attention.softmaxForwardWarp(k, gAtt, 0, gAtt, 0, b, nh, T, scale, block));
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt;
          for (int r0 = 0; r0 < t; r0 += blk) {
            Gemm.gemm(false, false, blk, hs, r0 + blk, gAtt, a + r0 * t, t, qkv, q + 2 * c, 3 * c, gOut,
                bi * t * c + h * hs + r0 * c, c, false);
          }
        }
      }
      assertThat(relL2(gOut, out)).as("%s: output", at).isLessThanOrEqualTo(TOL);
      assertThat(relL2(lowerBlocks(gAtt, bh, t, blk), lowerBlocks(att, bh, t, blk))).as("%s: probabilities", at)
          .isLessThanOrEqualTo(TOL);

      // backward: dP = dY·Vᵀ per query block; dV = Pᵀ·dY per key block [k0, k0+blk) over the queries from k0 on;
      // dS = softmax backward; dQ = dS·K per query block, dK = dSᵀ·Q per key block; all overwriting their part of dqkv
      float[] gScratch = new float[bh * tt], gDqkv = dqkv0.clone();
      java.util.Arrays.fill(gScratch, Float.NaN);
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt, y = bi * t * c + h * hs;
          for (int r0 = 0; r0 < t; r0 += blk) {
            Gemm.gemm(false, true, blk, r0 + blk, hs, dout, y + r0 * c, c, qkv, q + 2 * c, 3 * c, gScratch,
                a + r0 * t, t, false);
          }
          for (int k0 = 0; k0 < t; k0 += blk) {
            Gemm.gemm(true, false, blk, hs, t - k0, gAtt, a + k0 * t + k0, t, dout, y + k0 * c, c, gDqkv,
                q + 2 * c + k0 * 3 * c, 3 * c, false);
          }
        }
      }
      SimtEmulator.launch(blocks(bh * t), 32 * WARPS,
          k -> Attention.softmaxBackwardWarp(k, gScratch, 0, gScratch, 0, gAtt, 0, b, nh, T, scale, block));
      for (int bi = 0; bi < b; bi++) {
        for (int h = 0; h < nh; h++) {
          int q = bi * t * 3 * c + h * hs, a = (bi * nh + h) * tt;
          for (int r0 = 0; r0 < t; r0 += blk) {
            Gemm.gemm(false, false, blk, hs, r0 + blk, gScratch, a + r0 * t, t, qkv, q + c, 3 * c, gDqkv,
                q + r0 * 3 * c, 3 * c, false);
          }
          for (int k0 = 0; k0 < t; k0 += blk) {
            Gemm.gemm(true, false, blk, hs, t - k0, gScratch, a + k0 * t + k0, t, qkv, q + k0 * 3 * c, 3 * c, gDqkv,
                q + c + k0 * 3 * c, 3 * c, false);
          }
        }
      }
      float[] want = new float[3 * n];
      for (int i = 0; i < 3 * n; i++) want[i] = dqkv[i] - dqkv0[i]; // the CPU accumulates; the GPU form overwrites
      assertThat(relL2(gDqkv, want)).as("%s: dqkv", at).isLessThanOrEqualTo(TOL);
    }
  }

  /** The entries of the (bh, t, t) matrices inside the lower block-triangle (the blocks the GEMMs write), in order. */
  static float[] lowerBlocks(float[] m, int bh, int t, int blk) {
    float[] out = new float[m.length];
    int n = 0;
    for (int i = 0; i < bh * t; i++) {
      for (int j = 0; j < (i % t / blk + 1) * blk; j++) {
        out[n++] = m[i * t + j];
      }
    }
    return java.util.Arrays.copyOf(out, n);
  }
}
