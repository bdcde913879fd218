package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.cpu.SimtEmulator;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link FlashAttention}'s kernels on the exact SIMT emulator (tensor-core products included) against a float64
 * reference of causal attention and its gradients, by relative L2 error. The reference takes the inputs rounded to
 * bf16, as the kernels multiply them; what remains is the kernels' own rounding of P and dS to bf16. 40 draws of
 * each shape (T = 17: 160), 2026-12-02: out at most 1.2e-3, gradients at most 2.0e-3 (T = 17: 3.0e-3; 4x larger
 * inputs, a peaked softmax where dS = P ∘ (dP − dsum) cancels: 2.6e-3). The bounds leave a factor of 2.3 or more over
 * those; the peaked case's bound fails the earlier dsum from the fp32 dO (1.65e-2 at worst in a 300-draw review). HS = 48 is the head size whose staging needs a partial second round
 * of the block's threads. Shapes cover a T
 * that is not a multiple of the tiles (rows and keys past T are clamped and masked), several key tiles, head sizes 16,
 * 32 and 64, and a large score scale (a peaked softmax, where a missing running maximum would overflow). Inputs are
 * fresh random draws; the seed is in every message. Inputs are framed by NaN and outputs by sentinels
 * ({@link Bufs}): a read or write outside a tensor shows.
 */
class FlashAttentionTest {
  static final int THREADS = FlashAttention.WARPS * 32;

  @ParameterizedTest(name = "B={0} NH={1} T={2} HS={3} input scale {4}")
  @CsvSource({"2, 2, 80, 32, 1.0, 5e-3", "1, 3, 130, 64, 1.0, 5e-3", "1, 1, 17, 16, 1.0, 8e-3",
      "1, 2, 65, 48, 1.0, 5e-3", "1, 2, 70, 32, 4.0, 6e-3"})
  void forwardAndBackwardMatchFloat64(int B, int NH, int T, int HS, double inputScale, double gradBound) {
    long seed = System.nanoTime();
    String tag = "seed " + seed;
    Random rnd = new Random(seed);
    int D = NH * HS;
    float[] qkv = Bufs.input(B * T * 3 * D, rnd, inputScale);
    float[] dout = Bufs.input(B * T * D, rnd, 1.0);
    Reference ref = reference(bf16(qkv), bf16(dout), B, T, NH, HS);
    float scale = Attention.scale(HS);

    short[] qkv16 = bf16Copy(qkv, B * T * 3 * D), dout16 = bf16Copy(dout, B * T * D);
    float[] out = poisoned(B * T * D);
    float[] lse = poisoned(B * NH * T);
    short[] outCopy = bf16Copy(poisoned(B * T * D), B * T * D);
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS,
        k -> FlashAttention.flashForward(k, out, OFF, outCopy, OFF16, lse, OFF, qkv16, OFF16, B, T, NH, HS, scale));
    System.out.printf("flash B=%d NH=%d T=%d HS=%d x%.0f: out %.2e lse %.2e%n", B, NH, T, HS, inputScale,
        relL2(out, ref.out), relL2(lse, ref.lse));
    assertThat(relL2(out, ref.out)).as("out, %s", tag).isLessThan(4e-3);
    assertThat(relL2(lse, ref.lse)).as("lse, %s", tag).isLessThan(1e-6);
    Bufs.assertPadsIntact("out", out, B * T * D);
    Bufs.assertPadsIntact("lse", lse, B * NH * T);
    assertCopy("out", outCopy, out, B * T * D);

    float[] dsum = poisoned(B * NH * T);
    short[] doutCopy = bf16Copy(poisoned(B * T * D), B * T * D);
    SimtEmulator.launch((B * NH * T + FlashAttention.WARPS - 1) / FlashAttention.WARPS, THREADS,
        k -> FlashAttention.flashBackwardDot(k, dsum, OFF, doutCopy, OFF16, dout, OFF, out, OFF, B, T, NH, HS));
    assertThat(doutCopy).as("the dot kernel's bf16 dO, %s", tag).isEqualTo(dout16);
    float[] dqkv = poisoned(B * T * 3 * D);
    short[] dqkvCopy = bf16Copy(poisoned(B * T * 3 * D), B * T * 3 * D);
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS, k -> FlashAttention.flashBackwardKeyValue(k, dqkv,
        OFF, dqkvCopy, OFF16, 1, dout16, OFF16, qkv16, OFF16, lse, OFF, dsum, OFF, B, T, NH, HS, scale));
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS, k -> FlashAttention.flashBackwardQuery(k, dqkv,
        OFF, dqkvCopy, OFF16, 1, dout16, OFF16, qkv16, OFF16, lse, OFF, dsum, OFF, B, T, NH, HS, scale));
    Bufs.assertPadsIntact("dqkv", dqkv, B * T * 3 * D);
    assertCopy("dqkv", dqkvCopy, dqkv, B * T * 3 * D);
    float[] untouched = poisoned(B * T * 3 * D); // CudaOps' form: the copy only (fp32 flag 0), the same copy
    short[] copyOnly = bf16Copy(poisoned(B * T * 3 * D), B * T * 3 * D);
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS, k -> FlashAttention.flashBackwardKeyValue(k,
        untouched, OFF, copyOnly, OFF16, 0, dout16, OFF16, qkv16, OFF16, lse, OFF, dsum, OFF, B, T, NH, HS, scale));
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS, k -> FlashAttention.flashBackwardQuery(k,
        untouched, OFF, copyOnly, OFF16, 0, dout16, OFF16, qkv16, OFF16, lse, OFF, dsum, OFF, B, T, NH, HS, scale));
    assertThat(copyOnly).as("dqkv's copy without its fp32 values, %s", tag).isEqualTo(dqkvCopy);
    assertThat(untouched).as("dqkv not written with fp32 = 0, %s", tag).isEqualTo(poisoned(B * T * 3 * D));
    for (int part = 0; part < 3; part++) {
      System.out.printf("  d%s %.2e%n", "qkv".charAt(part), relL2(part(dqkv, B, T, D, part), part(ref.dqkv, B, T, D,
          part)));
      assertThat(relL2(part(dqkv, B, T, D, part), part(ref.dqkv, B, T, D, part)))
          .as("d%s, %s", "qkv".charAt(part), tag).isLessThan(gradBound);
    }
  }

  /**
   * The bf16 copy a kernel wrote beside its fp32 output (the next GEMM's operand): every element the bits
   * {@link Bf16#encode} gives the fp32 value at the same place, the NaN-code frame intact.
   */
  static void assertCopy(String name, short[] copy, float[] values, int n) {
    for (int i = 0; i < n; i++) {
      assertThat(copy[OFF16 + i]).as("%s's copy at %d", name, i).isEqualTo(Bf16.encode(values[OFF + i]));
    }
    assertThat(copy[OFF16 - 1]).as("%s's copy, pad before", name).isEqualTo((short) 0x7FC0);
    assertThat(copy[OFF16 + n]).as("%s's copy, pad after", name).isEqualTo((short) 0x7FC0);
  }

  /** Where a bf16 copy's elements start: a multiple of 8 (the kernels' 16-byte loads), after NaN pads. */
  static final int OFF16 = 8;

  /**
   * The {@code n} values at {@link Bufs#OFF} of {@code x} rounded to bf16 codes, at {@link #OFF16} of a copy framed by
   * NaN codes (the kernels' bf16 inputs, as {@code CudaOps} rounds them).
   */
  static short[] bf16Copy(float[] x, int n) {
    short[] r = new short[OFF16 + n + 8];
    Arrays.fill(r, (short) 0x7FC0);
    for (int i = 0; i < n; i++) {
      r[OFF16 + i] = Bf16.encode(x[OFF + i]);
    }
    return r;
  }

  /** The values rounded to bf16 (what the kernels multiply), pads kept. */
  static float[] bf16(float[] x) {
    float[] r = x.clone();
    for (int i = 0; i < r.length; i++) {
      r[i] = dev.taco.kernels.Bf16.decode(dev.taco.kernels.Bf16.encode(x[i]));
    }
    return r;
  }

  /** NaN-filled output span (an element the kernel does not write stays NaN and fails the error bound). */
  static float[] poisoned(int n) {
    float[] a = Bufs.output(n);
    Arrays.fill(a, OFF, OFF + n, Float.NaN);
    return a;
  }

  /** ‖x − ref‖ / ‖ref‖ over the span at {@link Bufs#OFF}; NaN anywhere gives NaN, which fails every bound. */
  static double relL2(float[] x, double[] ref) {
    double num = 0, den = 0;
    for (int i = 0; i < ref.length; i++) {
      double d = x[OFF + i] - ref[i];
      num += d * d;
      den += ref[i] * ref[i];
    }
    return Math.sqrt(num / den);
  }

  /** One of q, k, v (part 0, 1, 2) of a (B,T,3D) tensor, as a span at {@link Bufs#OFF} (or plain, for doubles). */
  static float[] part(float[] x, int B, int T, int D, int part) {
    float[] o = new float[OFF + B * T * D];
    for (int r = 0; r < B * T; r++) {
      System.arraycopy(x, OFF + r * 3 * D + part * D, o, OFF + r * D, D);
    }
    return o;
  }

  static double[] part(double[] x, int B, int T, int D, int part) {
    double[] o = new double[B * T * D];
    for (int r = 0; r < B * T; r++) {
      System.arraycopy(x, r * 3 * D + part * D, o, r * D, D);
    }
    return o;
  }

  record Reference(double[] out, double[] lse, double[] dqkv) {}

  /**
   * Causal attention and its gradients in float64 (Vaswani et al. eq. 1; the softmax backward
   * dS = P ∘ (dP − rowsum(P ∘ dP)) of {@link Attention#backward}).
   */
  static Reference reference(float[] qkv, float[] dout, int B, int T, int NH, int HS) {
    int D = NH * HS, C3 = 3 * D;
    double scale = 1.0 / Math.sqrt(HS);
    double[] out = new double[B * T * D], lse = new double[B * NH * T], dqkv = new double[B * T * C3];
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < NH; h++) {
        double[][] p = new double[T][T];
        for (int t = 0; t < T; t++) {
          double max = Double.NEGATIVE_INFINITY;
          for (int u = 0; u <= t; u++) {
            double dot = 0;
            for (int j = 0; j < HS; j++) {
              dot += (double) q(qkv, b, t, h, j, T, D, HS, 0) * q(qkv, b, u, h, j, T, D, HS, 1);
            }
            p[t][u] = dot * scale;
            max = Math.max(max, p[t][u]);
          }
          double sum = 0;
          for (int u = 0; u <= t; u++) {
            p[t][u] = Math.exp(p[t][u] - max);
            sum += p[t][u];
          }
          lse[(b * NH + h) * T + t] = max + Math.log(sum);
          for (int u = 0; u <= t; u++) {
            p[t][u] /= sum;
            for (int j = 0; j < HS; j++) {
              out[(b * T + t) * D + h * HS + j] += p[t][u] * q(qkv, b, u, h, j, T, D, HS, 2);
            }
          }
        }
        for (int t = 0; t < T; t++) {
          double[] dp = new double[t + 1];
          double rowDot = 0;
          for (int u = 0; u <= t; u++) {
            for (int j = 0; j < HS; j++) {
              dp[u] += (double) dout[OFF + (b * T + t) * D + h * HS + j] * q(qkv, b, u, h, j, T, D, HS, 2);
            }
            rowDot += p[t][u] * dp[u];
          }
          for (int u = 0; u <= t; u++) {
            double ds = p[t][u] * (dp[u] - rowDot) * scale;
            for (int j = 0; j < HS; j++) {
              double dO = dout[OFF + (b * T + t) * D + h * HS + j];
              dqkv[(b * T + t) * C3 + h * HS + j] += ds * q(qkv, b, u, h, j, T, D, HS, 1);
              dqkv[(b * T + u) * C3 + D + h * HS + j] += ds * q(qkv, b, t, h, j, T, D, HS, 0);
              dqkv[(b * T + u) * C3 + 2 * D + h * HS + j] += p[t][u] * dO;
            }
          }
        }
      }
    }
    return new Reference(out, lse, dqkv);
  }

  /** Element j of head h of part (0 q, 1 k, 2 v) of token t of sequence b. */
  static float q(float[] qkv, int b, int t, int h, int j, int T, int D, int HS, int part) {
    return qkv[OFF + (b * T + t) * 3 * D + part * D + h * HS + j];
  }
}
