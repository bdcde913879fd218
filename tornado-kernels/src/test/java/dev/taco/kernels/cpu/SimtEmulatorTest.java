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

  /**
   * {@code SimtCorpus.tensorCoreTile}: operands staged by {@code cpAsync16}, loaded by {@code ldmatrixX4} and
   * {@code ldmatrixX4Trans}, multiplied by {@code mmaBf16}, against a float64 product (fresh random inputs, three
   * blocks: each reads its own tiles).
   */
  @Test
  void cpAsyncAndLdmatrixFeedTheTensorCoreProduct() {
    long seed = System.nanoTime();
    Random rnd = new Random(seed);
    int blocks = 3;
    short[] a = SimtCorpus.randomBf16(rnd, 256 * blocks), b = SimtCorpus.randomBf16(rnd, 128 * blocks);
    float[] c = new float[128 * blocks];
    java.util.Arrays.fill(c, Float.NaN);
    SimtEmulator.launch(blocks, 32, ctx -> SimtCorpus.tensorCoreTile(ctx, a, b, c));
    for (int blk = 0; blk < blocks; blk++) {
      for (int r = 0; r < 16; r++) {
        for (int col = 0; col < 8; col++) {
          double ref = SimtCorpus.tensorCoreTileReference(a, b, blk, r, col);
          assertThat((double) c[128 * blk + r * 8 + col]).as("block %d C[%d][%d], seed %d", blk, r, col, seed)
              .isCloseTo(ref, org.assertj.core.data.Offset.offset(1e-6 * Math.max(1, Math.abs(ref))));
        }
      }
    }
  }

  /**
   * {@code ldmatrixX4}'s and {@code ldmatrixX4Trans}'s fragments, against the PTX layout written out here: four 8×8
   * matrices of random 16-bit values at random 16-byte aligned rows of a shared array.
   */
  @Test
  void ldmatrixGivesEachLaneItsRowOrColumnPair() {
    long seed = System.nanoTime();
    Random rnd = new Random(seed);
    int[] tile = new int[256];
    for (int i = 0; i < tile.length; i++) tile[i] = rnd.nextInt();
    int[] rowOf = new int[32]; // lane 8i + r: the int index of row r of matrix i
    for (int l = 0; l < 32; l++) rowOf[l] = 4 * rnd.nextInt(64);
    int[][] got = new int[32][8];
    SimtEmulator.launch(1, 32, ctx -> {
      int[] s = ctx.allocateIntLocalArray(256);
      for (int i = ctx.localIdx; i < 256; i += 32) s[i] = tile[i];
      ctx.barrier();
      int[] f = new int[8];
      ctx.ldmatrixX4(f, 0, s, rowOf[ctx.laneId()]);
      ctx.ldmatrixX4Trans(f, 4, s, rowOf[ctx.laneId()]);
      got[ctx.laneId()] = f;
    });
    for (int l = 0; l < 32; l++) {
      int g = l / 4, t = l % 4;
      for (int i = 0; i < 4; i++) {
        assertThat(got[l][i]).as("lane %d matrix %d, seed %d", l, i, seed).isEqualTo(tile[rowOf[8 * i + g] + t]);
        int lo = value(tile, rowOf[8 * i + 2 * t], g), hi = value(tile, rowOf[8 * i + 2 * t + 1], g);
        assertThat(got[l][4 + i]).as("lane %d matrix %d transposed, seed %d", l, i, seed)
            .isEqualTo(lo | hi << 16);
      }
    }
  }

  /** The 16-bit value {@code col} (0..7) of the row of 16-bit pairs starting at int {@code row} of {@code s}. */
  private static int value(int[] s, int row, int col) {
    return (s[row + col / 2] >>> (16 * (col % 2))) & 0xFFFF;
  }

  @Test
  void ldmatrixRefusesWhatTheHardwareCannotDo() {
    assertThatThrownBy(() -> SimtEmulator.launch(1, 32, ctx -> {
      int[] s = ctx.allocateIntLocalArray(64);
      ctx.ldmatrixX4(new int[4], 0, s, ctx.laneId() == 5 ? 2 : 0);
    })).hasMessageContaining("lane 5's row at int 2 is not 16-byte aligned");
    int[] global = new int[64];
    assertThatThrownBy(() -> SimtEmulator.launch(1, 32, ctx -> ctx.ldmatrixX4(new int[4], 0, global, 0)))
        .hasMessageContaining("not one of the block's shared arrays");
    assertThatThrownBy(() -> SimtEmulator.launch(1, 32, ctx -> {
      int[] s0 = ctx.allocateIntLocalArray(64), s1 = ctx.allocateIntLocalArray(64);
      ctx.ldmatrixX4Trans(new int[4], 0, ctx.laneId() < 16 ? s0 : s1, 0);
    })).hasMessageContaining("name different arrays");
    assertThatThrownBy(() -> SimtEmulator.launch(1, 16, ctx -> {
      int[] s = ctx.allocateIntLocalArray(64);
      ctx.ldmatrixX4(new int[4], 0, s, 0);
    })).hasMessageContaining("ldmatrixX4 needs a whole warp");
  }

  /**
   * A {@code cpAsync16} lands only when a {@code cpAsyncWait} covers its group: before it (and for a copy never
   * committed) the shared ints still hold garbage; {@code cpAsyncWait(1)} lands all but the newest group.
   */
  @Test
  void cpAsyncLandsWhenItsGroupIsWaitedFor() {
    int[] src = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int[][] seen = new int[1][];
    SimtEmulator.launch(1, 1, ctx -> {
      int[] s = ctx.allocateIntLocalArray(12);
      int[] at = new int[6];
      ctx.cpAsync16(s, 0, src, 0);
      ctx.cpAsyncCommit();
      at[0] = s[0]; // too early
      ctx.cpAsync16(s, 4, src, 4);
      ctx.cpAsyncCommit();
      ctx.cpAsync16(s, 8, src, 8); // never committed
      ctx.cpAsyncWait(1);
      at[1] = s[0];
      at[2] = s[4];
      ctx.cpAsyncWait(0);
      at[3] = s[7];
      at[4] = s[8];
      at[5] = s[3];
      seen[0] = at;
    });
    assertThat(seen[0]).containsExactly(SimtEmulator.GARBAGE, 1, SimtEmulator.GARBAGE, 8, SimtEmulator.GARBAGE, 4);
    short[] bf = {1, 2, (short) 0xFFFF, 4, 5, 6, 7, (short) 0x8000};
    int[][] pairs = new int[1][];
    SimtEmulator.launch(1, 1, ctx -> {
      int[] s = ctx.allocateIntLocalArray(4);
      ctx.cpAsync16(s, 0, bf, 0);
      ctx.cpAsyncCommit();
      ctx.cpAsyncWait(0);
      pairs[0] = new int[] {s[0], s[1], s[2], s[3]};
    });
    assertThat(pairs[0]).as("bf16 pairs, the lower index in the low half")
        .containsExactly(0x00020001, 0x0004FFFF, 0x00060005, 0x80000007);
    assertThatThrownBy(() -> SimtEmulator.launch(1, 1, ctx -> ctx.cpAsync16(ctx.allocateIntLocalArray(8), 2, src, 0)))
        .hasMessageContaining("destination 2 or source 0 is not 16-byte aligned");
    assertThatThrownBy(() -> SimtEmulator.launch(1, 1, ctx -> ctx.cpAsync16(ctx.allocateIntLocalArray(8), 0, bf, 4)))
        .hasMessageContaining("is not 16-byte aligned");
    assertThatThrownBy(() -> SimtEmulator.launch(1, 1, ctx -> ctx.cpAsync16(new float[8], 0, new float[8], 0)))
        .hasMessageContaining("the destination is not one of the block's shared arrays");
  }
}
