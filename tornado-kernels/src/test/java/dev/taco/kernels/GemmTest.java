package dev.taco.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

class GemmTest {
  enum Form { PLAIN, TRANS_B, TRANS_A, NAIVE }

  @FunctionalInterface
  interface Mm {
    void run(float[] a, int aOff, float[] b, int bOff, float[] c, int cOff, int m, int n, int k, boolean acc);
  }

  static Mm of(Form f) {
    return switch (f) {
      case PLAIN -> Gemm::matmul;
      case TRANS_B -> Gemm::matmulTransB;
      case TRANS_A -> Gemm::matmulTransA;
      case NAIVE -> Gemm::matmulNaive;
    };
  }

  static final int[][] SHAPES = {
      {1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {128, 257, 96}, {300, 200, 100},
      {1, 300, 513}, {259, 1, 3}, {5, 24, 1}, {64, 48, 600},
  };

  static Stream<Arguments> cases() {
    List<Arguments> out = new ArrayList<>();
    long seed = System.nanoTime();
    for (Form f : Form.values()) {
      for (int[] s : SHAPES) {
        for (boolean acc : new boolean[] {false, true}) {
          out.add(Arguments.of(f, s[0], s[1], s[2], acc, seed++));
        }
      }
    }
    return out.stream();
  }

  /**
   * The products of one default training step on a TP=2 rank (bench's TrainingGemms: B·T = 1024 rows, C = 128,
   * QKV 192 and fc1 256 columns per rank, attention projection 64 and fc2 256 rows, vocabulary 256), as
   * {form, m, n, k, accumulate}: forward A·B, input gradient A·Bᵀ, weight gradient Aᵀ·B.
   */
  static final int[][] TRAINING = {
      {0, 1024, 192, 128, 0}, {0, 1024, 128, 64, 0}, {0, 1024, 256, 128, 0}, {0, 1024, 128, 256, 0},
      {1, 1024, 128, 192, 1}, {1, 1024, 64, 128, 1}, {1, 1024, 128, 256, 1}, {1, 1024, 256, 128, 0},
      {2, 128, 192, 1024, 1}, {2, 64, 128, 1024, 1}, {2, 128, 256, 1024, 1}, {2, 256, 128, 1024, 1},
  };

  static Stream<Arguments> trainingCases() {
    long seed = System.nanoTime();
    List<Arguments> out = new ArrayList<>();
    for (int[] t : TRAINING) {
      out.add(Arguments.of(Form.values()[t[0]], t[1], t[2], t[3], t[4] == 1, seed++));
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0} {1}x{2}x{3} acc={4}")
  @MethodSource("trainingCases")
  void trainingShapesMatchFloat64Reference(Form f, int m, int n, int k, boolean acc, long seed) {
    matchesFloat64Reference(f, m, n, k, acc, seed);
  }

  /** B of more than Gemm.PACK_B_MAX floats is packed and multiplied in column slabs; edges in m, n and k. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("slabForms")
  void wideBRunsInSlabs(Form f, long seed) {
    int k = 2100, n = Gemm.PACK_B_MAX / k + 2 * Gemm.NR + 7;
    assertTrue((long) k * n > Gemm.PACK_B_MAX);
    matchesFloat64Reference(f, 13, n, k, true, seed);
  }

  static Stream<Arguments> slabForms() {
    long seed = System.nanoTime();
    return Stream.of(Form.PLAIN, Form.TRANS_B, Form.TRANS_A).map(f -> Arguments.of(f, seed));
  }

  static float[] random(Random r, int len) {
    float[] x = new float[len];
    for (int i = 0; i < len; i++) x[i] = (float) r.nextGaussian();
    return x;
  }

  /** Element (i,p) of op(A) and (p,j) of op(B) in the layout of the given form. */
  static double[] reference(Form f, float[] a, int aOff, float[] b, int bOff, float[] c0, int cOff,
      int m, int n, int k, boolean acc) {
    double[] ref = new double[m * n];
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < n; j++) {
        double s = acc ? c0[cOff + i * n + j] : 0.0;
        for (int p = 0; p < k; p++) {
          double av = f == Form.TRANS_A ? a[aOff + p * m + i] : a[aOff + i * k + p];
          double bv = f == Form.TRANS_B ? b[bOff + j * k + p] : b[bOff + p * n + j];
          s += av * bv;
        }
        ref[i * n + j] = s;
      }
    }
    return ref;
  }

  static double absScaledError(Form f, float[] a, int aOff, float[] b, int bOff, float[] c0, int cOff,
      int m, int n, int k, boolean acc, double[] ref, float[] c) {
    float[] aa = new float[a.length], bb = new float[b.length], cc = new float[c0.length];
    for (int i = 0; i < a.length; i++) aa[i] = Math.abs(a[i]);
    for (int i = 0; i < b.length; i++) bb[i] = Math.abs(b[i]);
    for (int i = 0; i < c0.length; i++) cc[i] = Math.abs(c0[i]);
    double[] scale = reference(f, aa, aOff, bb, bOff, cc, cOff, m, n, k, acc);
    double num = 0, den = 0;
    for (int i = 0; i < ref.length; i++) {
      double d = c[cOff + i] - ref[i];
      num += d * d;
      den += scale[i] * scale[i];
    }
    return den == 0 ? Math.sqrt(num) : Math.sqrt(num / den);
  }

  static double relFrobenius(double[] ref, float[] c, int cOff) {
    double num = 0, den = 0;
    for (int i = 0; i < ref.length; i++) {
      double d = c[cOff + i] - ref[i];
      num += d * d;
      den += ref[i] * ref[i];
    }
    return den == 0 ? Math.sqrt(num) : Math.sqrt(num / den);
  }

  @ParameterizedTest(name = "{0} {1}x{2}x{3} acc={4}")
  @MethodSource("cases")
  void matchesFloat64Reference(Form f, int m, int n, int k, boolean acc, long seed) {
    Random r = new Random(seed);
    int aOff = 3, bOff = 5, cOff = 7;
    float[] a = random(r, aOff + m * k + 2);
    float[] b = random(r, bOff + k * n + 1);
    float[] c = random(r, cOff + m * n + 4); // nonzero initial C
    float[] c0 = c.clone();
    double[] ref = reference(f, a, aOff, b, bOff, c0, cOff, m, n, k, acc);
    of(f).run(a, aOff, b, bOff, c, cOff, m, n, k, acc);
    double err = relFrobenius(ref, c, cOff);
    // When C0 + A·B cancels (e.g. 1x1x1 with accumulate), float rounding is relative to the magnitudes
    // summed, not to the result: then accept an error below 1e-6 of ||C0| + |A|·|B||_F instead.
    double errAbs = absScaledError(f, a, aOff, b, bOff, c0, cOff, m, n, k, acc, ref, c);
    assertTrue(err < 1e-5 || errAbs < 1e-6, () -> f + " " + m + "x" + n + "x" + k + " acc=" + acc + " seed=" + seed
        + " rel err " + err + " (abs-scaled " + errAbs + ")");
    // nothing outside C touched
    for (int i = 0; i < cOff; i++) assertEquals(c0[i], c[i]);
    for (int i = cOff + m * n; i < c.length; i++) assertEquals(c0[i], c[i]);
  }

  /**
   * The class contract to the bit: each element is C's value (0 without accumulate) plus the k products in order,
   * each through one fused multiply-add, whatever the tile, the thread (the large case runs with helpers) or the
   * edge path computes it.
   */
  @ParameterizedTest(name = "{0} {1}x{2}x{3}")
  @MethodSource("fmaChainCases")
  void eachElementIsAnInOrderFmaChain(Form f, int m, int n, int k, long seed) {
    Random r = new Random(seed);
    float[] a = random(r, m * k), b = random(r, k * n);
    for (boolean acc : new boolean[] {false, true}) {
      float[] c = random(r, m * n), c0 = c.clone();
      of(f).run(a, 0, b, 0, c, 0, m, n, k, acc);
      for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
          float s = acc ? c0[i * n + j] : 0f;
          for (int p = 0; p < k; p++) {
            float av = f == Form.TRANS_A ? a[p * m + i] : a[i * k + p];
            float bv = f == Form.TRANS_B ? b[j * k + p] : b[p * n + j];
            s = Math.fma(av, bv, s);
          }
          if (Float.floatToRawIntBits(s) != Float.floatToRawIntBits(c[i * n + j])) {
            throw new AssertionError(f + " " + m + "x" + n + "x" + k + " acc=" + acc + " seed=" + seed
                + ": C[" + i + "," + j + "] = " + c[i * n + j] + ", the in-order FMA chain gives " + s);
          }
        }
      }
    }
  }

  static Stream<Arguments> fmaChainCases() {
    long seed = System.nanoTime();
    List<Arguments> out = new ArrayList<>();
    for (Form f : new Form[] {Form.PLAIN, Form.TRANS_B, Form.TRANS_A}) {
      // k = 1024 and 512: row-major A's rows 4 or 2 KiB apart (the square benchmark's stride), several tiles and edges;
      // 72 x 300 x 640: a parallel call's tiles narrowed in columns first (past 4 panels), with an edge column tile
      for (int[] s : new int[][] {{37, 70, 300}, {8, 32, 5}, {203, 150, 700}, {141, 70, 1024}, {40, 33, 512},
          {72, 300, 640}}) {
        out.add(Arguments.of(f, s[0], s[1], s[2], seed++));
      }
    }
    return out.stream();
  }

  @Test
  void largeParallelProblemMatches() {
    Random r = new Random(42);
    int m = 515, n = 389, k = 700;
    float[] a = random(r, m * k), b = random(r, k * n), c = new float[m * n];
    Gemm.matmul(a, 0, b, 0, c, 0, m, n, k, false);
    assertTrue(relFrobenius(reference(Form.PLAIN, a, 0, b, 0, c, 0, m, n, k, false), c, 0) < 1e-5);
  }

  @Test
  void generalLeadingDimensions() {
    Random r = new Random(7);
    int m = 37, n = 29, k = 41, lda = 50, ldb = 33, ldc = 31;
    float[] a = random(r, m * lda), b = random(r, k * ldb), c = random(r, m * ldc), c0 = c.clone();
    Gemm.gemm(false, false, m, n, k, a, 0, lda, b, 0, ldb, c, 0, ldc, true);
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < ldc; j++) {
        if (j >= n) {
          assertEquals(c0[i * ldc + j], c[i * ldc + j]);
          continue;
        }
        double s = c0[i * ldc + j];
        for (int p = 0; p < k; p++) s += (double) a[i * lda + p] * b[p * ldb + j];
        assertEquals(s, c[i * ldc + j], 1e-4 * (1 + Math.abs(s)));
      }
    }
  }

  /**
   * Without accumulate C's old values are never read (the first K block starts from zero): NaN and Inf in C, in the
   * interior tiles and the edge ones, leave a finite product equal to the in-order FMA chain from 0.
   */
  @ParameterizedTest(name = "{0}")
  @EnumSource(value = Form.class, names = {"PLAIN", "TRANS_B", "TRANS_A"})
  void overwritingIgnoresNonFiniteC(Form f) {
    long seed = Long.getLong("taco.seed", System.nanoTime());
    Random r = new Random(seed);
    int m = 45, n = 70, k = 300; // an edge of 5 rows and 6 columns, two K blocks
    float[] a = random(r, m * k), b = random(r, k * n), c = new float[m * n];
    for (int i = 0; i < c.length; i++) c[i] = i % 3 == 0 ? Float.NaN : i % 3 == 1 ? Float.POSITIVE_INFINITY : -0f;
    of(f).run(a, 0, b, 0, c, 0, m, n, k, false);
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < n; j++) {
        float s = 0f;
        for (int p = 0; p < k; p++) {
          float av = f == Form.TRANS_A ? a[p * m + i] : a[i * k + p];
          float bv = f == Form.TRANS_B ? b[j * k + p] : b[p * n + j];
          s = Math.fma(av, bv, s);
        }
        assertEquals(Float.floatToRawIntBits(s), Float.floatToRawIntBits(c[i * n + j]),
            f + " C[" + i + "," + j + "] seed " + seed + " (-Dtaco.seed)");
      }
    }
  }

  @Test
  void zeroKZeroesOrKeepsC() {
    float[] c = {1, 2, 3, 4};
    Gemm.matmul(new float[0], 0, new float[0], 0, c, 0, 2, 2, 0, true);
    assertArrayEquals(new float[] {1, 2, 3, 4}, c);
    Gemm.matmul(new float[0], 0, new float[0], 0, c, 0, 2, 2, 0, false);
    assertArrayEquals(new float[4], c);
  }

  /** As many callers as cores (the TP ranks) and more than cores: each gets its own product right. */
  @ParameterizedTest(name = "{0} callers")
  @MethodSource("callerCounts")
  void concurrentCallersGetCorrectResults(int threads) throws Exception {
    int m = 256, n = 320, k = 288;
    ExecutorService ex = Executors.newFixedThreadPool(threads);
    try {
      CyclicBarrier barrier = new CyclicBarrier(threads);
      List<Future<Double>> fs = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        final int seed = 100 + t;
        fs.add(ex.submit(() -> {
          Random r = new Random(seed);
          float[] a = random(r, m * k), b = random(r, k * n);
          Form f = Form.values()[seed % 3];
          double[] ref = reference(f, a, 0, b, 0, new float[m * n], 0, m, n, k, false);
          double worst = 0;
          for (int rep = 0; rep < 5; rep++) {
            float[] c = new float[m * n];
            barrier.await();
            of(f).run(a, 0, b, 0, c, 0, m, n, k, false);
            worst = Math.max(worst, relFrobenius(ref, c, 0));
          }
          return worst;
        }));
      }
      for (Future<Double> f : fs) assertTrue(f.get() < 1e-5, "rel err " + f.get());
    } finally {
      ex.shutdownNow();
    }
  }

  static Stream<Integer> callerCounts() {
    int cores = Runtime.getRuntime().availableProcessors();
    return Stream.of(cores, 2 * cores + 1);
  }

  @Test
  void badArgumentsThrow() {
    float[] a = new float[6], b = new float[12], c = new float[8];
    for (Form f : Form.values()) {
      Mm mm = of(f);
      mm.run(a, 0, b, 0, c, 0, 2, 4, 3, false); // fits exactly
      assertMessage("m", () -> mm.run(a, 0, b, 0, c, 0, -1, 4, 3, false));
      assertMessage("n", () -> mm.run(a, 0, b, 0, c, 0, 2, -4, 3, false));
      assertMessage("k", () -> mm.run(a, 0, b, 0, c, 0, 2, 4, -3, false));
      assertMessage("aOff", () -> mm.run(a, -1, b, 0, c, 0, 2, 4, 3, false));
      assertMessage("bOff", () -> mm.run(a, 0, b, -1, c, 0, 2, 4, 3, false));
      assertMessage("cOff", () -> mm.run(a, 0, b, 0, c, -1, 2, 4, 3, false));
      assertMessage("a too short", () -> mm.run(a, 1, b, 0, c, 0, 2, 4, 3, false));
      assertMessage("b too short", () -> mm.run(a, 0, b, 1, c, 0, 2, 4, 3, false));
      assertMessage("c too short", () -> mm.run(a, 0, b, 0, c, 1, 2, 4, 3, false));
      assertMessage("c too short", () -> mm.run(a, 0, b, 0, c, 0, 3, 4, 2, false));
    }
    assertThrows(NullPointerException.class, () -> Gemm.matmul(null, 0, b, 0, c, 0, 2, 4, 3, false));
    assertMessage("lda", () -> Gemm.gemm(false, false, 2, 4, 3, a, 0, 2, b, 0, 4, c, 0, 4, false));
  }

  static void assertMessage(String fragment, org.junit.jupiter.api.function.Executable call) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
    assertTrue(e.getMessage().startsWith(fragment), () -> "expected '" + fragment + "' in: " + e.getMessage());
  }
}
