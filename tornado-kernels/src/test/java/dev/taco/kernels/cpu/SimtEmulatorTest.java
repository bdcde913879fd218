package dev.taco.kernels.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.Hadamard;
import dev.taco.kernels.compiler.corpus.SimtCorpus;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The SIMT emulator on the corpus kernels, against sequential Java and float64 references. */
class SimtEmulatorTest {
  private static final int B = SimtCorpus.BLOCK;

  @Test
  void blockReductionMatchesTreeOrderExactlyAndFloat64Closely() {
    int n = 1000;
    int blocks = (n + B - 1) / B;
    float[] x = new float[n];
    Random rnd = new Random(1);
    for (int i = 0; i < n; i++) {
      x[i] = (float) rnd.nextGaussian();
    }
    float[] out = new float[blocks];
    SimtEmulator.launch(blocks, B, ctx -> SimtCorpus.blockSum(ctx, x, out, n));
    for (int b = 0; b < blocks; b++) {
      float[] s = new float[B];
      double ref = 0;
      for (int t = 0; t < B; t++) {
        int i = b * B + t;
        s[t] = i < n ? x[i] : 0f;
        ref += s[t];
      }
      for (int h = B / 2; h > 0; h >>= 1) {
        for (int t = 0; t < h; t++) {
          s[t] += s[t + h];
        }
      }
      assertThat(out[b]).as("block %d, tree order", b).isEqualTo(s[0]);
      assertThat((double) out[b]).as("block %d vs float64", b).isCloseTo(ref, org.assertj.core.data.Offset.offset(1e-4));
    }
  }

  @Test
  void sharedArrayAndBarrier() {
    int blocks = 3;
    int[] x = new int[blocks * B];
    for (int i = 0; i < x.length; i++) {
      x[i] = i * 7 - 100;
    }
    int[] out = new int[x.length];
    SimtEmulator.launch(blocks, B, ctx -> SimtCorpus.blockReverse(ctx, x, out));
    for (int i = 0; i < x.length; i++) {
      int b = i / B;
      int t = i % B;
      assertThat(out[i]).isEqualTo(x[b * B + B - 1 - t] * 3 + (t & 31));
    }
  }

  @Test
  void warpShuffleHadamardMatchesFwht() {
    int groups = 5;
    int g256 = 32 * SimtCorpus.V;
    float[] x = new float[groups * g256];
    Random rnd = new Random(2);
    for (int i = 0; i < x.length; i++) {
      x[i] = (float) rnd.nextGaussian() * (i % 17 == 0 ? 100f : 1f);
    }
    float[] y = new float[x.length];
    float[] amax = new float[groups];
    // 64 threads per block: 2 warps, 3 blocks = 6 warps, the last one idle (g >= groups)
    SimtEmulator.launch(3, 64, ctx -> SimtCorpus.warpHadamard(ctx, x, y, amax, groups));
    float[] ref = x.clone();
    for (int g = 0; g < groups; g++) {
      Hadamard.fwht(ref, g * g256, g256);
      float m = 0f;
      for (int i = 0; i < g256; i++) {
        int k = g * g256 + i;
        double expected = ref[k] * Math.sqrt(g256); // fwht is orthonormal; the kernel does not normalise
        assertThat((double) y[k]).as("group %d value %d", g, i).isCloseTo(expected,
            org.assertj.core.data.Offset.offset(1e-3 * (1 + Math.abs(expected))));
        m = Math.max(m, Math.abs(y[k]));
      }
      assertThat(amax[g]).as("warpReduceMax of group %d", g).isEqualTo(m);
    }
  }

  @Test
  void fusedCompressShapeDecodesWithinFp8Error() {
    int groups = 4;
    int vals = 8;
    int g256 = 32 * vals;
    short[] x = new short[groups * g256];
    Random rnd = new Random(3);
    for (int i = 0; i < x.length; i++) {
      x[i] = Bf16.encode((float) rnd.nextGaussian() * (1 << (i / g256 * 5)));
    }
    byte[] q = new byte[groups * g256];
    float[] scales = new float[groups];
    SimtEmulator.launch(groups, 32, ctx -> SimtCorpus.compressWarp(ctx, x, q, scales, groups, vals));
    for (int g = 0; g < groups; g++) {
      float[] ref = new float[g256];
      for (int i = 0; i < g256; i++) {
        ref[i] = Bf16.decode(x[g * g256 + i]);
      }
      Hadamard.fwht(ref, 0, g256);
      double amax = 0;
      for (float v : ref) {
        amax = Math.max(amax, Math.abs(v) * 16.0);
      }
      assertThat((double) scales[g] * 448.0).isCloseTo(amax, org.assertj.core.data.Offset.offset(1e-4 * amax));
      for (int i = 0; i < g256; i++) {
        byte code = q[g * g256 + i];
        double decoded = Fp8.decodeE4M3(code) * (double) scales[g];
        double expected = ref[i] * 16.0;
        assertThat(decoded).as("group %d value %d", g, i)
            .isCloseTo(expected, org.assertj.core.data.Offset.offset(amax / 448.0 / 16 + Math.abs(expected) / 16));
      }
    }
  }

  @Test
  void failingThreadFailsTheLaunchWithoutHangingTheOthers() {
    assertThatThrownBy(() -> SimtEmulator.launch(2, 64, ctx -> {
      if (ctx.localIdx == 5) {
        throw new ArithmeticException("boom in thread 5");
      }
      ctx.barrier();
    })).isInstanceOf(ArithmeticException.class).hasMessageContaining("boom");
  }

  @Test
  void parallelExecutorCoversTheRangeOnce() {
    int n = 10_001;
    int[] hits = new int[n];
    ParallelExecutor.forRange(n, 7, (lo, hi) -> {
      for (int i = lo; i < hi; i++) {
        hits[i]++;
      }
    });
    assertThat(hits).containsOnly(1);
  }
}
