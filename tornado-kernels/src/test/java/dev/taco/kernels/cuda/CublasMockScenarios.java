package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.Gemm;
import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.CublasLt.Epilogue;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * {@link Cublas} and {@link CublasLt} against the mocks of {@link CublasMockTest} ({@code mock_cuda.c} for the driver,
 * {@code mock_cublas.c} for both libraries), in the child JVM that test starts: results of the row-major calls
 * against {@link Gemm} on the same host arrays (exact for small integers, bounded for random bf16), the arguments the
 * mock received (the transpose identity: operands swapped, sizes (n, m, k), leading dimensions kept), the workspace
 * after stream switches, the status strings of refused calls, and the checks made before anything is enqueued.
 * {@link #main} prints {@code PASS name} or {@code FAIL name: error} per scenario.
 */
final class CublasMockScenarios {
  private CublasMockScenarios() {}

  static final long WS = Cublas.WORKSPACE_BYTES;

  static Map<String, MockScenarios.Scenario> scenarios() {
    Map<String, MockScenarios.Scenario> m = new LinkedHashMap<>();
    m.put("available-with-reason", CublasMockScenarios::available);
    m.put("create-sets-math-mode-and-workspace", CublasMockScenarios::create);
    m.put("fp32-every-transpose-offset-and-ld", c -> rowMajor(c, DataType.F32, DataType.F32));
    m.put("bf16-in-fp32-out-every-transpose", c -> rowMajor(c, DataType.BF16, DataType.F32));
    m.put("bf16-in-bf16-out-every-transpose", c -> rowMajor(c, DataType.BF16, DataType.BF16));
    m.put("bf16-random-within-bound", CublasMockScenarios::bf16Random);
    m.put("matmul-family-dense", CublasMockScenarios::matmulFamily);
    m.put("strided-batched-every-transpose", CublasMockScenarios::stridedBatched);
    m.put("zero-sizes", CublasMockScenarios::zeroSizes);
    m.put("stream-switch-resets-workspace", CublasMockScenarios::streamSwitch);
    m.put("fast-fp32-math-only-when-asked", CublasMockScenarios::fastMath);
    m.put("bad-leading-dimension-from-cublas", CublasMockScenarios::badLeadingDimension);
    m.put("injected-statuses", CublasMockScenarios::injected);
    m.put("argument-checks-before-enqueue", CublasMockScenarios::argumentChecks);
    m.put("closed-handle", CublasMockScenarios::closed);
    m.put("lt-bias-every-transpose", c -> lt(c, Epilogue.BIAS));
    m.put("lt-gelu-bias-every-transpose", c -> lt(c, Epilogue.GELU_BIAS));
    m.put("lt-heuristic-once-per-shape-and-alignment", CublasMockScenarios::ltCache);
    m.put("lt-no-algorithm", CublasMockScenarios::ltNoAlgorithm);
    m.put("lt-status-strings", CublasMockScenarios::ltStatus);
    return m;
  }

  public static void main(String[] args) {
    MockScenarios.runAndExit(scenarios(), CublasMockScenarios::clearLog);
  }

  // ------------------------------------------------------------------ the mock

  private static NativeLibrary mock() {
    return NativeLibrary.getInstance(System.getProperty("taco.libcublas"));
  }

  static String log() {
    return mock().getFunction("mock_cublas_log").invokeString(new Object[0], false);
  }

  static void clearLog() {
    mock().getFunction("mock_cublas_log_clear").invokeVoid(new Object[0]);
  }

  /** The next call of {@code entryPoint} returns {@code status}. */
  static void fail(String entryPoint, int status) {
    mock().getFunction("mock_cublas_fail").invokeVoid(new Object[] {entryPoint, status});
  }

  /** The mock driver's id of a stream (its {@code s<id>} in the log). */
  static int id(CudaStream s) {
    return NativeLibrary.getInstance(System.getProperty("taco.libcuda")).getFunction("mock_id")
        .invokeInt(new Object[] {new Pointer(s.handle())});
  }

  static List<String> lines(String prefix) {
    return log().lines().filter(l -> l.startsWith(prefix)).toList();
  }

  // ------------------------------------------------------------------ host data

  /** Small integers in [-4, 4]: every product and sum here is exact in fp32 and in bf16. */
  static float[] ints(Random r, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) v[i] = r.nextInt(9) - 4;
    return v;
  }

  static float[] roundBf16(float[] v) {
    float[] o = new float[v.length];
    for (int i = 0; i < v.length; i++) o[i] = Bf16.decode(Bf16.encode(v[i]));
    return o;
  }

  static DeviceBuffer upload(CudaContext ctx, float[] v, DataType t) {
    DeviceBuffer d = ctx.alloc(Math.max(1, v.length) * (long) t.bytes);
    if (t == DataType.F32) {
      d.copyFrom(v);
    } else {
      short[] s = new short[v.length];
      for (int i = 0; i < v.length; i++) s[i] = Bf16.encode(v[i]);
      d.copyFrom(s);
    }
    return d;
  }

  static float[] download(DeviceBuffer d, int n, DataType t) {
    float[] v = new float[n];
    if (t == DataType.F32) {
      d.copyToHost(v, 0, n, 0);
    } else {
      short[] s = new short[n];
      d.copyToHost(s, 0, n, 0);
      for (int i = 0; i < n; i++) v[i] = Bf16.decode(s[i]);
    }
    return v;
  }

  static String expectedGemmLine(String what, CudaStream s, boolean transA, boolean transB, int m, int n, int k,
      int lda, int ldb, int ldc, DataType in, DataType out, int compute, float beta) {
    String t = in == DataType.F32 ? "f32" : "bf16";
    return what + " s" + id(s) + " transa=" + (transB ? "T" : "N") + " transb=" + (transA ? "T" : "N") + " m=" + n
        + " n=" + m + " k=" + k + " lda=" + ldb + " ldb=" + lda + " ldc=" + ldc + " A=" + t + " B=" + t + " C="
        + (out == DataType.F32 ? "f32" : "bf16") + " compute=" + compute + " algo=-1 alpha=1 beta=" + (beta == 0 ? "0"
            : "1")
        + " ws=" + WS;
  }

  // ------------------------------------------------------------------ scenarios: cuBLAS

  static void available(CudaContext ctx) {
    String lib = System.getProperty("taco.libcublas");
    assertThat(Cublas.available()).as(Cublas.unavailableReason()).isTrue();
    assertThat(Cublas.unavailableReason()).isEqualTo("cuBLAS 13.0.0 available (" + lib + ")");
    assertThat(Cublas.version()).isEqualTo("13.0.0");
    assertThat(CublasLt.available()).as(CublasLt.unavailableReason()).isTrue();
    assertThat(CublasLt.unavailableReason()).isEqualTo("cuBLASLt 13.0.0 available (" + lib + ")");
  }

  static void create(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws)) {
      assertThat(log()).isEqualTo("create\nmath-mode 16\nset-workspace " + WS + "\n");
      assertThat(blas.fp32Math()).isEqualTo(Cublas.Fp32Math.STRICT);
      assertThat(blas.context()).isSameAs(ctx);
    }
    assertThat(log()).endsWith("destroy\n");
  }

  /**
   * Every (transA, transB, accumulate) with element offsets, padded leading dimensions and sentinel padding, against
   * {@link Gemm#gemm} on the same arrays: exact, padding untouched; and the arguments cuBLAS received.
   */
  static void rowMajor(CudaContext ctx, DataType in, DataType out) {
    Random r = new Random(1);
    int m = 5, n = 7, k = 3;
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream()) {
      for (boolean ta : new boolean[] {false, true}) {
        for (boolean tb : new boolean[] {false, true}) {
          for (boolean acc : new boolean[] {false, true}) {
            int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
            int aOff = 3, bOff = 5, cOff = 7;
            float[] a = ints(r, aOff + (ta ? k : m) * lda + 2);
            float[] b = ints(r, bOff + (tb ? n : k) * ldb + 2);
            float[] c = ints(r, cOff + m * ldc + 2);
            float[] want = c.clone();
            Gemm.gemm(ta, tb, m, n, k, a, aOff, lda, b, bOff, ldb, want, cOff, ldc, acc);
            try (DeviceBuffer da = upload(ctx, a, in); DeviceBuffer db = upload(ctx, b, in);
                DeviceBuffer dc = upload(ctx, c, out)) {
              clearLog();
              blas.gemm(s, ta, tb, m, n, k, in, out, da, aOff, lda, db, bOff, ldb, dc, cOff, ldc, acc);
              String what = "transA=" + ta + " transB=" + tb + " accumulate=" + acc;
              assertThat(download(dc, c.length, out)).as(what).containsExactly(want);
              assertThat(lines("gemm ")).as(what).singleElement().asString().isEqualTo(expectedGemmLine("gemm", s, ta,
                  tb, m, n, k, lda, ldb, ldc, in, out, 68, acc ? 1 : 0) + " batch=1 strides=0,0,0");
            }
          }
        }
      }
    }
  }

  /** Random bf16 inputs, bf16 output: within half a bf16 ulp of the fp32 result plus fp32 summation-order noise. */
  static void bf16Random(CudaContext ctx) {
    long seed = 20261201L;
    Random r = new Random(seed);
    int m = 9, n = 11, k = 33;
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream()) {
      for (boolean ta : new boolean[] {false, true}) {
        for (boolean tb : new boolean[] {false, true}) {
          float[] a = new float[m * k], b = new float[k * n];
          for (int i = 0; i < a.length; i++) a[i] = Bf16.decode(Bf16.encode((float) r.nextGaussian()));
          for (int i = 0; i < b.length; i++) b[i] = Bf16.decode(Bf16.encode((float) r.nextGaussian()));
          int lda = ta ? m : k, ldb = tb ? k : n;
          float[] want = new float[m * n];
          Gemm.gemm(ta, tb, m, n, k, a, 0, lda, b, 0, ldb, want, 0, n, false);
          float[] absA = abs(a), absB = abs(b), mag = new float[m * n];
          Gemm.gemm(ta, tb, m, n, k, absA, 0, lda, absB, 0, ldb, mag, 0, n, false);
          try (DeviceBuffer da = upload(ctx, a, DataType.BF16); DeviceBuffer db = upload(ctx, b, DataType.BF16);
              DeviceBuffer dc = ctx.alloc(2L * m * n)) {
            blas.gemm(s, ta, tb, m, n, k, DataType.BF16, DataType.BF16, da, 0, lda, db, 0, ldb, dc, 0, n, false);
            float[] got = download(dc, m * n, DataType.BF16);
            for (int i = 0; i < got.length; i++) {
              double bound = Math.scalb(1.0, -8) * Math.abs(want[i]) + 1e-5 * mag[i];
              assertThat((double) Math.abs(got[i] - want[i])).as("seed %d transA=%s transB=%s element %d", seed, ta, tb,
                  i).isLessThanOrEqualTo(bound);
            }
          }
        }
      }
    }
  }

  static float[] abs(float[] v) {
    float[] o = new float[v.length];
    for (int i = 0; i < v.length; i++) o[i] = Math.abs(v[i]);
    return o;
  }

  static void matmulFamily(CudaContext ctx) {
    Random r = new Random(2);
    int m = 4, n = 6, k = 5;
    float[] a = ints(r, 2 + m * k), b = ints(r, 1 + k * n), c = ints(r, 3 + m * n);
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream();
        DeviceBuffer da = upload(ctx, a, DataType.F32); DeviceBuffer db = upload(ctx, b, DataType.F32)) {
      float[] w1 = c.clone(), w2 = c.clone(), w3 = c.clone();
      Gemm.matmul(a, 2, b, 1, w1, 3, m, n, k, true);
      Gemm.matmulTransA(a, 2, b, 1, w2, 3, m, n, k, true);
      Gemm.matmulTransB(a, 2, b, 1, w3, 3, m, n, k, true);
      try (DeviceBuffer dc = upload(ctx, c, DataType.F32)) {
        blas.matmul(s, DataType.F32, DataType.F32, da, 2, db, 1, dc, 3, m, n, k, true);
        assertThat(download(dc, c.length, DataType.F32)).as("matmul").containsExactly(w1);
      }
      try (DeviceBuffer dc = upload(ctx, c, DataType.F32)) {
        blas.matmulTransA(s, DataType.F32, DataType.F32, da, 2, db, 1, dc, 3, m, n, k, true);
        assertThat(download(dc, c.length, DataType.F32)).as("matmulTransA").containsExactly(w2);
      }
      // B as [n, k] needs n*k = 30 elements from offset 1: b has 31
      try (DeviceBuffer dc = upload(ctx, c, DataType.F32)) {
        blas.matmulTransB(s, DataType.F32, DataType.F32, da, 2, db, 1, dc, 3, m, n, k, true);
        assertThat(download(dc, c.length, DataType.F32)).as("matmulTransB").containsExactly(w3);
      }
    }
  }

  /** Batched products with gaps between the matrices, against {@link Gemm#gemm} per batch. */
  static void stridedBatched(CudaContext ctx) {
    Random r = new Random(3);
    int m = 6, n = 4, k = 5, batch = 3;
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream()) {
      for (DataType in : new DataType[] {DataType.F32, DataType.BF16}) {
        for (boolean ta : new boolean[] {false, true}) {
          for (boolean tb : new boolean[] {false, true}) {
            int lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 1;
            int sa = (ta ? k : m) * lda + 3, sb = (tb ? n : k) * ldb + 1, sc = m * ldc + 2;
            int aOff = 2, bOff = 1, cOff = 4;
            float[] a = ints(r, aOff + batch * sa), b = ints(r, bOff + batch * sb), c = ints(r, cOff + batch * sc);
            float[] want = c.clone();
            for (int q = 0; q < batch; q++) {
              Gemm.gemm(ta, tb, m, n, k, a, aOff + q * sa, lda, b, bOff + q * sb, ldb, want, cOff + q * sc, ldc, true);
            }
            try (DeviceBuffer da = upload(ctx, a, in); DeviceBuffer db = upload(ctx, b, in);
                DeviceBuffer dc = upload(ctx, c, DataType.F32)) {
              clearLog();
              blas.gemmStridedBatched(s, ta, tb, m, n, k, in, DataType.F32, 1f, da, aOff, lda, sa, db, bOff, ldb, sb,
                  1f, dc, cOff, ldc, sc, batch);
              String what = in + " transA=" + ta + " transB=" + tb;
              assertThat(download(dc, c.length, DataType.F32)).as(what).containsExactly(want);
              assertThat(lines("gemm-batched ")).as(what).singleElement().asString().isEqualTo(expectedGemmLine(
                  "gemm-batched", s, ta, tb, m, n, k, lda, ldb, ldc, in, DataType.F32, 68, 1) + " batch=" + batch
                  + " strides=" + sb + "," + sa + "," + sc);
            }
          }
        }
      }
    }
  }

  static void zeroSizes(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream();
        DeviceBuffer dc = upload(ctx, new float[] {1, 2, 3, 4, 5, 6}, DataType.F32);
        DeviceBuffer dx = ctx.alloc(64)) {
      clearLog();
      blas.matmul(s, DataType.F32, DataType.F32, dx, 0, dx, 0, dc, 0, 0, 3, 2, false);
      blas.matmul(s, DataType.F32, DataType.F32, dx, 0, dx, 0, dc, 0, 2, 0, 2, false);
      blas.gemmStridedBatched(s, false, false, 2, 3, 2, DataType.F32, DataType.F32, 1f, dx, 0, 2, 0, dx, 0, 3, 0, 0f,
          dc, 0, 3, 6, 0);
      assertThat(lines("gemm")).as("nothing enqueued for an empty C").isEmpty();
      blas.matmul(s, DataType.F32, DataType.F32, dx, 0, dx, 0, dc, 0, 2, 3, 0, true);
      assertThat(download(dc, 6, DataType.F32)).as("k = 0, accumulate: C kept").containsExactly(1, 2, 3, 4, 5, 6);
      blas.matmul(s, DataType.F32, DataType.F32, dx, 0, dx, 0, dc, 0, 2, 3, 0, false);
      assertThat(download(dc, 6, DataType.F32)).as("k = 0: C zeroed").containsExactly(0, 0, 0, 0, 0, 0);
      assertThat(lines("gemm ")).hasSize(2).allSatisfy(l -> assertThat(l).contains(" k=0 lda=3 ldb=1 ldc=3 "));
    }
  }

  static void streamSwitch(CudaContext ctx) {
    float[] a = {1, 2, 3, 4};
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s1 = ctx.createStream();
        CudaStream s2 = ctx.createStream(); DeviceBuffer da = upload(ctx, a, DataType.F32);
        DeviceBuffer dc = ctx.alloc(16)) {
      clearLog();
      blas.matmul(s1, DataType.F32, DataType.F32, da, 0, da, 0, dc, 0, 2, 2, 2, false);
      blas.matmul(s1, DataType.F32, DataType.F32, da, 0, da, 0, dc, 0, 2, 2, 2, false);
      blas.matmul(s2, DataType.F32, DataType.F32, da, 0, da, 0, dc, 0, 2, 2, 2, false);
      List<String> calls = log().lines().map(l -> l.replaceAll(" transa=.*ws=", " ws=").replaceAll(" batch=.*", ""))
          .toList();
      assertThat(calls).containsExactly("set-stream s" + id(s1), "set-workspace " + WS, "gemm s" + id(s1) + " ws=" + WS,
          "gemm s" + id(s1) + " ws=" + WS, "set-stream s" + id(s2), "set-workspace " + WS,
          "gemm s" + id(s2) + " ws=" + WS);
      assertThat(download(dc, 4, DataType.F32)).containsExactly(7, 10, 15, 22);
    }
  }

  static void fastMath(CudaContext ctx) {
    float[] a = {1, 2, 3, 4};
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas strict = Cublas.create(ctx, ws);
        Cublas fast = Cublas.create(ctx, ws, Cublas.Fp32Math.TF32);
        Cublas bf16 = Cublas.create(ctx, ws, Cublas.Fp32Math.BF16); CudaStream s = ctx.createStream();
        DeviceBuffer da = upload(ctx, a, DataType.F32); DeviceBuffer dh = upload(ctx, a, DataType.BF16);
        DeviceBuffer dc = ctx.alloc(16)) {
      assertThat(fast.fp32Math()).isEqualTo(Cublas.Fp32Math.TF32);
      clearLog();
      strict.matmul(s, DataType.F32, DataType.F32, da, 0, da, 0, dc, 0, 2, 2, 2, false);
      fast.matmul(s, DataType.F32, DataType.F32, da, 0, da, 0, dc, 0, 2, 2, 2, false);
      fast.matmul(s, DataType.BF16, DataType.F32, dh, 0, dh, 0, dc, 0, 2, 2, 2, false);
      bf16.matmul(s, DataType.F32, DataType.F32, da, 0, da, 0, dc, 0, 2, 2, 2, false);
      bf16.matmul(s, DataType.BF16, DataType.F32, dh, 0, dh, 0, dc, 0, 2, 2, 2, false);
      assertThat(lines("gemm ")).extracting(l -> l.replaceAll(".* compute=(\\d+) .*", "$1"))
          .containsExactly("68", "77", "68", "75", "68");
    }
  }

  /** cuBLAS's own refusal (the mock's: lda below the rows) comes back as a CublasException with the library's strings. */
  static void badLeadingDimension(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream();
        DeviceBuffer d = ctx.alloc(1024)) {
      long p = d.pointer();
      assertThatThrownBy(() -> blas.gemmExColumnMajor(s, Cublas.OP_N, Cublas.OP_N, 8, 4, 2, 1f, p, DataType.F32, 4,
          p, DataType.F32, 2, 0f, p, DataType.F32, 8))
          .isInstanceOfSatisfying(CublasException.class, e -> {
            assertThat(e.call()).isEqualTo("cublasGemmEx");
            assertThat(e.status()).isEqualTo(7);
            assertThat(e.statusName()).isEqualTo("CUBLAS_STATUS_INVALID_VALUE");
            assertThat(e.statusString()).isEqualTo("an unsupported value or parameter was passed to the function");
            assertThat(e.getMessage()).isEqualTo("cublasGemmEx failed: CUBLAS_STATUS_INVALID_VALUE (7): an unsupported "
                + "value or parameter was passed to the function [transa=N transb=N m=8 n=4 k=2 lda=4 ldb=2 ldc=8 "
                + "A/B=F32 C=F32 compute=CUBLAS_COMPUTE_32F]");
          });
    }
  }

  static void injected(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(WS)) {
      fail("cublasCreate_v2", 1);
      assertThatThrownBy(() -> Cublas.create(ctx, ws)).isInstanceOfSatisfying(CublasException.class,
          e -> assertThat(e.getMessage())
              .isEqualTo("cublasCreate_v2 failed: CUBLAS_STATUS_NOT_INITIALIZED (1): the library "
                  + "was not initialized [device 0]"));
      try (Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream(); DeviceBuffer d = ctx.alloc(1024)) {
        fail("cublasGemmStridedBatchedEx", 13);
        assertThatThrownBy(
            () -> blas.gemmStridedBatched(s, false, true, 2, 3, 4, DataType.BF16, DataType.BF16, 1f, d, 0,
                4, 8, d, 0, 4, 12, 0f, d, 0, 3, 6, 2))
            .isInstanceOfSatisfying(CublasException.class, e -> {
              assertThat(e.call()).isEqualTo("cublasGemmStridedBatchedEx");
              assertThat(e.statusName()).isEqualTo("CUBLAS_STATUS_EXECUTION_FAILED");
              assertThat(e.getMessage()).endsWith("(13): the function failed to launch on the GPU [transa=T transb=N "
                  + "m=3 n=2 k=4 lda=4 ldb=4 ldc=3 A/B=BF16 C=BF16 compute=CUBLAS_COMPUTE_32F strideA=12 strideB=8 "
                  + "strideC=6 batchCount=2]");
            });
        // the handle still works after a refused call
        blas.gemmStridedBatched(s, false, true, 2, 3, 4, DataType.BF16, DataType.BF16, 1f, d, 0, 4, 8, d, 0, 4, 12, 0f,
            d, 256, 3, 6, 2);
      }
    }
  }

  /** Java-side checks: IllegalArgumentException naming the argument, nothing reaches cuBLAS. */
  static void argumentChecks(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(WS); Cublas blas = Cublas.create(ctx, ws); CudaStream s = ctx.createStream();
        DeviceBuffer d = ctx.alloc(4 * 64)) {
      clearLog();
      DataType f = DataType.F32, h = DataType.BF16;
      assertThatThrownBy(() -> blas.gemm(s, false, false, 4, 4, 4, f, f, d, 0, 3, d, 0, 4, d, 0, 4, false))
          .isInstanceOf(IllegalArgumentException.class).hasMessage("lda must be >= 4 (columns of a), got 3");
      assertThatThrownBy(() -> blas.gemm(s, true, false, 4, 4, 4, f, f, d, 0, 4, d, 0, 4, d, 0, 3, false))
          .hasMessage("ldc must be >= 4 (columns of c), got 3");
      assertThatThrownBy(() -> blas.gemm(s, false, true, 4, 4, 4, f, f, d, 0, 4, d, 0, 3, d, 0, 4, false))
          .hasMessage("ldb must be >= 4 (columns of b), got 3");
      assertThatThrownBy(() -> blas.matmul(s, f, f, d, 49, d, 0, d, 0, 4, 4, 4, false))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("a too short: 4x4 F32 with lda=4 at element 49 "
              + "needs 260 bytes, buffer has 256");
      assertThatThrownBy(() -> blas.matmul(s, f, h, d, 0, d, 0, d, 0, 4, 4, 4, false))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fp32 inputs need an fp32 output");
      assertThatThrownBy(() -> blas.matmul(s, f, f, d, -1, d, 0, d, 0, 4, 4, 4, false))
          .hasMessage("aOff must be >= 0, got -1");
      assertThatThrownBy(() -> blas.matmul(s, f, f, d, 0, d, 0, d, 0, -1, 4, 4, false))
          .hasMessage("m must be >= 0, got -1");
      assertThatThrownBy(() -> blas.gemmStridedBatched(s, false, false, 2, 2, 2, f, f, 1f, d, 0, 2, 4, d, 0, 2, 4, 0f,
          d, 0, 2, 4, 17)).hasMessage("a too short: 17 x 2x2 F32 with lda=2 stride=4 at element 0 needs 272 bytes, "
              + "buffer has 256");
      assertThatThrownBy(() -> blas.gemmStridedBatched(s, false, false, 2, 2, 2, f, f, 1f, d, 0, 2, -4, d, 0, 2, 4, 0f,
          d, 0, 2, 4, 2)).hasMessage("strideA must be >= 0, got -4");
      assertThatThrownBy(() -> blas.matmul(s, f, f, null, 0, d, 0, d, 0, 4, 4, 4, false))
          .isInstanceOf(NullPointerException.class).hasMessage("a");
      assertThat(lines("gemm")).isEmpty();
    }
  }

  static void closed(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(WS); CudaStream s = ctx.createStream(); DeviceBuffer d = ctx.alloc(64)) {
      Cublas blas = Cublas.create(ctx, ws);
      blas.close();
      blas.close();
      assertThat(lines("destroy")).hasSize(1);
      assertThatThrownBy(() -> blas.matmul(s, DataType.F32, DataType.F32, d, 0, d, 0, d, 0, 2, 2, 2, false))
          .isInstanceOf(IllegalStateException.class);
      CublasLt lt = CublasLt.create(ctx, ws);
      lt.close();
      lt.close();
      assertThat(lines("lt-destroy")).hasSize(1);
    }
  }

  // ------------------------------------------------------------------ scenarios: cuBLASLt

  static double geluTanh(double x) {
    return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
  }

  /** Every transpose pair and both output types, integers, against Gemm plus the bias per column (and tanh GELU). */
  static void lt(CudaContext ctx, Epilogue epilogue) {
    Random r = new Random(4);
    int m = 5, n = 6, k = 7;
    try (DeviceBuffer ws = ctx.alloc(WS); CublasLt lt = CublasLt.create(ctx, ws); CudaStream s = ctx.createStream()) {
      for (DataType out : new DataType[] {DataType.BF16, DataType.F32}) {
        for (boolean ta : new boolean[] {false, true}) {
          for (boolean tb : new boolean[] {false, true}) {
            float[] a = ints(r, 1 + m * k), b = ints(r, 2 + k * n), bias = ints(r, 3 + n), c = ints(r, 4 + m * n + 1);
            float[] want = c.clone();
            Gemm.gemm(ta, tb, m, n, k, a, 1, ta ? m : k, b, 2, tb ? k : n, want, 4, n, false);
            for (int i = 0; i < m; i++) {
              for (int j = 0; j < n; j++) {
                float v = want[4 + i * n + j] + bias[3 + j];
                want[4 + i * n + j] = epilogue == Epilogue.GELU_BIAS ? (float) geluTanh(v) : v;
              }
            }
            if (out == DataType.BF16) want = roundBf16(want);
            try (DeviceBuffer da = upload(ctx, a, DataType.BF16); DeviceBuffer db = upload(ctx, b, DataType.BF16);
                DeviceBuffer dbias = upload(ctx, bias, out); DeviceBuffer dc = upload(ctx, c, out)) {
              clearLog();
              lt.matmul(s, epilogue, ta, tb, m, n, k, da, 1, db, 2, dbias, 3, out, dc, 4);
              float[] got = download(dc, c.length, out);
              String what = out + " transA=" + ta + " transB=" + tb;
              for (int i = 0; i < got.length; i++) {
                // GELU: the mock's float tanhf against Math.tanh (1 - tanh underflows to 0 in float for x < -9), and a
                // bf16 rounding of the two may differ by one ulp
                double tol = epilogue == Epilogue.BIAS ? 0 : out == DataType.F32 ? 2e-6 * Math.max(1, Math.abs(want[i]))
                    : Math.scalb(Math.abs(want[i]), -7) + 1e-6;
                assertThat((double) got[i]).as("%s element %d", what, i).isCloseTo(want[i],
                    org.assertj.core.data.Offset.offset(tol));
              }
              assertThat(lines("lt-matmul ")).as(what).singleElement().asString().isEqualTo("lt-matmul s" + id(s)
                  + " m=" + n + " n=" + m + " k=" + k + " transa=" + (tb ? "T" : "N") + " transb=" + (ta ? "T" : "N")
                  + " epilogue=" + epilogue.value + " D=" + (out == DataType.F32 ? "f32" : "bf16")
                  + " alpha=1 beta=0 ws=" + WS);
            }
          }
        }
      }
      assertThat(lt.cachedPlans()).isEqualTo(8);
    }
  }

  static void ltCache(CudaContext ctx) {
    Random r = new Random(5);
    int m = 4, n = 8, k = 16;
    try (DeviceBuffer ws = ctx.alloc(WS); CublasLt lt = CublasLt.create(ctx, ws); CudaStream s = ctx.createStream();
        DeviceBuffer da = upload(ctx, ints(r, 1 + m * k), DataType.BF16);
        DeviceBuffer db = upload(ctx, ints(r, k * n), DataType.BF16);
        DeviceBuffer dbias = upload(ctx, ints(r, n), DataType.BF16); DeviceBuffer dc = ctx.alloc(2L * m * n)) {
      clearLog();
      lt.matmul(s, Epilogue.GELU_BIAS, false, true, m, n, k, da, 0, db, 0, dbias, 0, DataType.BF16, dc, 0);
      lt.matmul(s, Epilogue.GELU_BIAS, false, true, m, n, k, da, 0, db, 0, dbias, 0, DataType.BF16, dc, 0);
      assertThat(lines("lt-heuristic ")).singleElement().asString().isEqualTo("lt-heuristic m=8 n=4 k=16 transa=T "
          + "transb=N epilogue=36 D=bf16 max-ws=" + WS + " align=256/256/256/256 bias-align=256");
      lt.matmul(s, Epilogue.BIAS, false, true, m, n, k, da, 0, db, 0, dbias, 0, DataType.BF16, dc, 0);
      lt.matmul(s, Epilogue.GELU_BIAS, false, true, m, n, k, da, 1, db, 0, dbias, 0, DataType.BF16, dc, 0);
      List<String> h = lines("lt-heuristic ");
      assertThat(h).hasSize(3);
      assertThat(h.get(1)).contains(" epilogue=4 ");
      assertThat(h.get(2)).as("A at element 1 is 2-byte aligned; A of our row-major call is cuBLAS's B")
          .contains(" align=256/2/256/256 ");
      assertThat(lines("lt-matmul ")).hasSize(4);
      assertThat(lt.cachedPlans()).isEqualTo(3);
    }
  }

  static void ltNoAlgorithm(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(512 << 10); CublasLt lt = CublasLt.create(ctx, ws);
        CudaStream s = ctx.createStream(); DeviceBuffer d = ctx.alloc(4096)) {
      assertThatThrownBy(
          () -> lt.matmul(s, Epilogue.BIAS, false, false, 4, 4, 4, d, 0, d, 0, d, 0, DataType.BF16, d, 64))
          .isInstanceOfSatisfying(CublasException.class, e -> {
            assertThat(e.call()).isEqualTo("cublasLtMatmulAlgoGetHeuristic");
            assertThat(e.statusName()).isEqualTo("CUBLAS_STATUS_NOT_SUPPORTED");
            assertThat(e.getMessage()).contains("the requested functionality is not supported [no algorithm for BIAS "
                + "row-major m=4 n=4 k=4").contains("within 524288 workspace bytes");
          });
      assertThat(lt.cachedPlans()).isZero();
    }
  }

  static void ltStatus(CudaContext ctx) {
    try (DeviceBuffer ws = ctx.alloc(WS); CublasLt lt = CublasLt.create(ctx, ws); CudaStream s = ctx.createStream();
        DeviceBuffer d = ctx.alloc(4096)) {
      fail("cublasLtMatmul", 13);
      assertThatThrownBy(() -> lt.matmul(s, Epilogue.GELU_BIAS, true, false, 4, 4, 4, d, 0, d, 0, d, 0, DataType.F32, d,
          64)).isInstanceOfSatisfying(CublasException.class, e -> {
            assertThat(e.call()).isEqualTo("cublasLtMatmul");
            assertThat(e.status()).isEqualTo(13);
            assertThat(e.getMessage()).startsWith("cublasLtMatmul failed: CUBLAS_STATUS_EXECUTION_FAILED (13): the "
                + "function failed to launch on the GPU [GELU_BIAS row-major m=4 n=4 k=4 transA=true transB=false");
          });
      fail("cublasLtCreate", 3);
      assertThatThrownBy(() -> CublasLt.create(ctx, ws)).isInstanceOf(CublasException.class)
          .hasMessage(
              "cublasLtCreate failed: CUBLAS_STATUS_ALLOC_FAILED (3): the resource allocation failed [device 0]");
      assertThatThrownBy(() -> lt.matmul(s, Epilogue.BIAS, false, false, 4, 4, 0, d, 0, d, 0, d, 0, DataType.F32, d, 0))
          .isInstanceOf(IllegalArgumentException.class).hasMessage("sizes must be >= 1: m=4 n=4 k=0");
      assertThatThrownBy(() -> lt.matmul(s, Epilogue.BIAS, false, false, 4, 4, 4, d, 0, d, 0, d, 1021, DataType.F32, d,
          0)).isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("bias too short");
    }
  }
}
