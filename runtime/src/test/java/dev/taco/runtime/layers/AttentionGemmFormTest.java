package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.kernels.Gemm;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The GPU backend's attention ({@code dev.taco.runtime.model.CudaOps}: {@link Attention#splitHeads}, batched GEMMs,
 * the causal softmax kernels, {@link Attention#mergeHeads}) written out on the CPU with {@link Gemm} per (b,h) matrix,
 * against {@link Attention#forward} / {@link Attention#backward}: the same outputs, probabilities and accumulated
 * gradients within 1e-5 relative L2, on fresh random shapes and values (seed printed). This pins down which operand is
 * transposed where before the sequence runs on a GPU.
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

  @Test
  void gemmFormEqualsTheCpuAttention() {
    long seed = System.nanoTime();
    System.out.println("AttentionGemmFormTest seed " + seed);
    Random r = new Random(seed);
    for (int round = 0; round < 6; round++) {
      int b = 1 + r.nextInt(3), nh = 1 + r.nextInt(4), t = 1 + r.nextInt(40), hs = 4 << r.nextInt(4), c = nh * hs;
      int bh = b * nh, n = b * t * c;
      String at = "seed " + seed + " round " + round + " B=" + b + " NH=" + nh + " T=" + t + " HS=" + hs;
      float[] qkv = random(r, 3 * n), dout = random(r, n), dqkv0 = random(r, 3 * n);
      float[] out = new float[n], att = new float[bh * t * t], dqkv = dqkv0.clone(), scratch = new float[bh * t * t];
      Attention.forward(out, 0, att, 0, qkv, 0, b, t, nh, hs);
      Attention.backward(dqkv, 0, scratch, 0, dout, 0, qkv, 0, att, 0, b, t, nh, hs);

      float[] q = new float[n], k = new float[n], v = new float[n], y = new float[n], gAtt = new float[bh * t * t];
      Attention.splitHeads(q, 0, qkv, 0, b, t, nh, hs, 3 * c);
      Attention.splitHeads(k, 0, qkv, c, b, t, nh, hs, 3 * c);
      Attention.splitHeads(v, 0, qkv, 2 * c, b, t, nh, hs, 3 * c);
      for (int i = 0; i < bh; i++) {
        Gemm.gemm(false, true, t, t, hs, q, i * t * hs, hs, k, i * t * hs, hs, gAtt, i * t * t, t, false);
      }
      Attention.softmaxForward(gAtt, 0, gAtt, 0, b, nh, t, Attention.scale(hs));
      for (int i = 0; i < bh; i++) {
        Gemm.gemm(false, false, t, hs, t, gAtt, i * t * t, t, v, i * t * hs, hs, y, i * t * hs, hs, false);
      }
      float[] gOut = new float[n];
      Attention.mergeHeads(gOut, 0, y, 0, b, t, nh, hs, c, false);
      assertThat(relL2(gAtt, att)).as("%s: probabilities", at).isLessThanOrEqualTo(TOL);
      assertThat(relL2(gOut, out)).as("%s: output", at).isLessThanOrEqualTo(TOL);

      float[] dy = new float[n], dq = new float[n], dk = new float[n], dv = new float[n], gScratch = new float[bh * t * t];
      Attention.splitHeads(dy, 0, dout, 0, b, t, nh, hs, c);
      for (int i = 0; i < bh; i++) {
        Gemm.gemm(false, true, t, t, hs, dy, i * t * hs, hs, v, i * t * hs, hs, gScratch, i * t * t, t, false);
        Gemm.gemm(true, false, t, hs, t, gAtt, i * t * t, t, dy, i * t * hs, hs, dv, i * t * hs, hs, false);
      }
      Attention.softmaxBackward(gScratch, 0, gScratch, 0, gAtt, 0, b, nh, t, Attention.scale(hs));
      for (int i = 0; i < bh; i++) {
        Gemm.gemm(false, false, t, hs, t, gScratch, i * t * t, t, k, i * t * hs, hs, dq, i * t * hs, hs, false);
        Gemm.gemm(true, false, t, hs, t, gScratch, i * t * t, t, q, i * t * hs, hs, dk, i * t * hs, hs, false);
      }
      float[] gDqkv = dqkv0.clone();
      Attention.mergeHeads(gDqkv, 0, dq, 0, b, t, nh, hs, 3 * c, true);
      Attention.mergeHeads(gDqkv, c, dk, 0, b, t, nh, hs, 3 * c, true);
      Attention.mergeHeads(gDqkv, 2 * c, dv, 0, b, t, nh, hs, 3 * c, true);
      float[] want = new float[3 * n], got = new float[3 * n];
      for (int i = 0; i < 3 * n; i++) {
        want[i] = dqkv[i] - dqkv0[i];
        got[i] = gDqkv[i] - dqkv0[i];
      }
      assertThat(relL2(got, want)).as("%s: accumulated dqkv", at).isLessThanOrEqualTo(TOL);
    }
  }

  @Test
  void splitThenMergeIsTheIdentityAndMergeAccumulates() {
    Random r = new Random(System.nanoTime());
    int b = 2, t = 5, nh = 3, hs = 4, c = nh * hs;
    float[] x = random(r, b * t * 3 * c), part = new float[b * t * c], back = new float[b * t * 3 * c];
    for (int third = 0; third < 3; third++) {
      Attention.splitHeads(part, 0, x, third * c, b, t, nh, hs, 3 * c);
      assertThat(part[((1 * nh + 2) * t + 3) * hs + 1]).isEqualTo(x[(1 * t + 3) * 3 * c + third * c + 2 * hs + 1]);
      Attention.mergeHeads(back, third * c, part, 0, b, t, nh, hs, 3 * c, false);
    }
    assertThat(back).containsExactly(x);
    Attention.mergeHeads(back, 0, part, 0, b, t, nh, hs, 3 * c, true);
    assertThat(back[(1 * t + 3) * 3 * c + 2 * hs + 1]).isEqualTo(x[(1 * t + 3) * 3 * c + 2 * hs + 1]
        + part[((1 * nh + 2) * t + 3) * hs + 1]);
  }
}
