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
      assertThat((double) out[b]).as("block %d vs float64", b).isCloseTo(ref,
          org.assertj.core.data.Offset.offset(1e-4));
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

  /**
   * What a GPU leaves undefined fails here instead of passing by luck: a return before a barrier others wait at (either
   * order, at once rather than after the 60 s timeout), a read of shared memory no thread wrote (NaN / {@link
   * SimtEmulator#GARBAGE}, not 0), and a block that reads what a lower-numbered block wrote (blocks run shuffled).
   */
  @Test
  void whatTheGpuLeavesUndefinedIsNotZeroOrInOrder() {
    long t0 = System.nanoTime();
    assertThatThrownBy(() -> SimtEmulator.launch(1, 64, ctx -> {
      if (ctx.localIdx >= 60) return; // the usual bounds check, before a barrier
      ctx.barrier();
    })).isInstanceOf(IllegalStateException.class).hasMessageContaining("of block 0")
        .hasMessageContaining("every thread must reach every barrier");
    assertThat((System.nanoTime() - t0) / 1e9).as("seconds to fail").isLessThan(30);

    float[] f = new float[4];
    int[] k = new int[4];
    SimtEmulator.launch(1, 4, ctx -> {
      float[] sf = ctx.allocateFloatLocalArray(4);
      int[] sk = ctx.allocateIntLocalArray(4);
      f[ctx.localIdx] = sf[ctx.localIdx];
      k[ctx.localIdx] = sk[ctx.localIdx];
    });
    for (float v : f) assertThat(v).isNaN();
    assertThat(k).containsOnly(SimtEmulator.GARBAGE);

    int blocks = 64;
    float[] partial = new float[blocks];
    SimtEmulator.launch(blocks, 1, ctx -> { // a running total across blocks: a race on the GPU
      int g = ctx.groupIdx;
      partial[g] = (g == 0 ? 0f : partial[g - 1]) + 1f;
    });
    boolean inOrder = true;
    for (int g = 0; g < blocks; g++) inOrder &= partial[g] == g + 1;
    assertThat(inOrder).as("blocks ran in order of groupIdx").isFalse();
  }

  /**
   * {@code mmaBf16} against a float64 product: each lane packs its A and B fragments from row-major 16x16 and 16x8 bf16
   * matrices by the layout {@link dev.taco.kernels.KernelContext#mmaBf16} documents, multiplies onto its part of C and
   * writes D back by the same layout; two warps of a block each with their own matrices. Fresh random inputs (seed in
   * the message).
   */
  @Test
  void mmaBf16ComputesTheFragmentLayoutsProduct() {
    long seed = System.nanoTime();
    Random rnd = new Random(seed);
    int warps = 2;
    float[] a = new float[warps * 256], b = new float[warps * 128], c = new float[warps * 128],
        d = new float[warps * 128];
    for (int i = 0; i < a.length; i++) a[i] = Bf16.decode(Bf16.encode((float) rnd.nextGaussian()));
    for (int i = 0; i < b.length; i++) b[i] = Bf16.decode(Bf16.encode((float) rnd.nextGaussian()));
    for (int i = 0; i < c.length; i++) c[i] = (float) rnd.nextGaussian();
    java.util.Arrays.fill(d, Float.NaN);
    SimtEmulator.launch(1, 32 * warps, ctx -> {
      int w = ctx.localIdx / 32, g = ctx.laneId() >> 2, t = ctx.laneId() & 3;
      int ao = w * 256, bo = w * 128, co = w * 128;
      float[] acc = {c[co + g * 8 + 2 * t], c[co + g * 8 + 2 * t + 1], c[co + (g + 8) * 8 + 2 * t],
          c[co + (g + 8) * 8 + 2 * t + 1]};
      ctx.mmaBf16(acc, 0, Bf16.encode2(a[ao + g * 16 + 2 * t], a[ao + g * 16 + 2 * t + 1]),
          Bf16.encode2(a[ao + (g + 8) * 16 + 2 * t], a[ao + (g + 8) * 16 + 2 * t + 1]),
          Bf16.encode2(a[ao + g * 16 + 2 * t + 8], a[ao + g * 16 + 2 * t + 9]),
          Bf16.encode2(a[ao + (g + 8) * 16 + 2 * t + 8], a[ao + (g + 8) * 16 + 2 * t + 9]),
          Bf16.encode2(b[bo + (2 * t) * 8 + g], b[bo + (2 * t + 1) * 8 + g]),
          Bf16.encode2(b[bo + (2 * t + 8) * 8 + g], b[bo + (2 * t + 9) * 8 + g]));
      d[co + g * 8 + 2 * t] = acc[0];
      d[co + g * 8 + 2 * t + 1] = acc[1];
      d[co + (g + 8) * 8 + 2 * t] = acc[2];
      d[co + (g + 8) * 8 + 2 * t + 1] = acc[3];
    });
    for (int w = 0; w < warps; w++) {
      for (int r = 0; r < 16; r++) {
        for (int col = 0; col < 8; col++) {
          double ref = c[w * 128 + r * 8 + col];
          for (int k = 0; k < 16; k++) ref += (double) a[w * 256 + r * 16 + k] * b[w * 128 + k * 8 + col];
          assertThat((double) d[w * 128 + r * 8 + col]).as("warp %d D[%d][%d], seed %d", w, r, col, seed)
              .isCloseTo(ref, org.assertj.core.data.Offset.offset(1e-6 * Math.max(1, Math.abs(ref))));
        }
      }
    }
  }

  @Test
  void mmaBf16NeedsAWholeWarp() {
    assertThatThrownBy(() -> SimtEmulator.launch(1, 16, ctx -> ctx.mmaBf16(new float[4], 0, 0, 0, 0, 0, 0, 0)))
        .hasMessageContaining("mmaBf16 needs a whole warp");
  }
}
