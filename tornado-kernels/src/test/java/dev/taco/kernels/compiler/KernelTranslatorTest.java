package dev.taco.kernels.compiler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.taco.kernels.compiler.corpus.SemanticsCorpus;
import dev.taco.kernels.compiler.corpus.SimtCorpus;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** What the translator emits for supported kernels, and the file:line: reason of rejected ones. */
class KernelTranslatorTest {
  static final Path UNSUPPORTED = Path.of("src/test/resources/unsupported");
  static KernelTranslator corpus;

  @BeforeAll
  static void parse() {
    corpus = new KernelTranslator(Corpus.sources());
  }

  private static String translate(Class<?> c, String m, Map<String, Object> constants) {
    return corpus.translate(List.of(KernelRequest.of(c, m, constants)));
  }

  @Test
  void parallelLoopBecomesAGridStrideLoopWithJavaArithmetic() {
    String cu = translate(SemanticsCorpus.class, "intArith", Map.of());
    assertThat(cu)
        .contains("// Java: dev.taco.kernels.compiler.corpus.SemanticsCorpus.intArith (src/test/java/")
        .contains("extern \"C\" __global__ void intArith(int* a, int* b, int* add, int* sub, int* mul, int* div, "
            + "int* rem, int* neg, int n) {")
        .contains("for (long long j_i_it = (long long)(0) + (long long)blockIdx.x * blockDim.x + threadIdx.x; "
            + "j_i_it < (long long)(n); j_i_it += (long long)gridDim.x * blockDim.x) {")
        .contains("int i = (int)j_i_it;")
        .contains("mul[i] = j_mul(a[i], b[i]);")
        .contains("div[i] = (b[i] == 0 ? 0 : j_div(a[i], b[i]));");
  }

  @Test
  void shiftsCastsAndBytesKeepJavaSemantics() {
    String shifts = translate(SemanticsCorpus.class, "shifts", Map.of());
    assertThat(shifts).contains("ushr[i] = j_ushr(a[i], s[i]);").contains("lshl[i] = j_shl(w, s[i]);")
        .contains("long long w = j_mul((long long)(a[i]), -7046029254386353131LL);");
    String casts = translate(SemanticsCorpus.class, "casts", Map.of());
    assertThat(casts).contains("fi[i] = j_toint(f[i]);").contains("fb[i] = (signed char)j_toint(f[i]);")
        .contains("dl[i] = j_tolong(d[i]);");
    String bytes = translate(SemanticsCorpus.class, "bytes", Map.of());
    assertThat(bytes).contains("void bytes(signed char* a, int* s, signed char* b, int* u, int n)")
        .contains("x = (signed char)(j_add((int)(x), 100));")
        .contains("x = (signed char)(j_ushr((int)(x), 1));");
  }

  @Test
  void floatMultiplicationIsNeverContracted() {
    assertThat(translate(SemanticsCorpus.class, "mathExact", Map.of()))
        .contains("abs[i] = (__fmul_rn(fabsf(a[i]), 3.0f) + b[i]);")
        .contains("fma[i] = __fmaf_rn(a[i], b[i], 1.5f);")
        .contains("floor_[i] = ")
        .contains("round[i] = j_round(a[i]);");
  }

  @Test
  void fp8EncodeIsTheGuardedHardwareConversionAndDecodeIsTranslatedFromJava() {
    String cu = translate(SemanticsCorpus.class, "fp8", Map.of());
    assertThat(cu).contains("e4[i] = j_fp8_e4m3(x[i]);").contains("e5[i] = j_fp8_e5m2(")
        .contains("cvt.rn.satfinite.e4m3x2.f32").contains("cvt.rn.satfinite.e5m2x2.f32")
        .contains("static __device__ __forceinline__ float Fp8_decodeE4M3(signed char c);")
        .doesNotContain("Fp8_encodeE4M3(float v)").doesNotContain("__nv_cvt_float_to_fp8");
  }

  @Test
  void bf16PairEncodeIsTheGuardedHardwareConversion() {
    // Bf16.encode2 was once translated from Java (integer rounding, about 12 instructions a pair) because the intrinsic
    // table was consulted for java.lang, Vec16, Fp8 and FastMath only: the flash attention kernels paid for it
    String cu = translate(SemanticsCorpus.class, "bf16", Map.of());
    assertThat(cu).contains("pair[i] = j_bf16x2(x[i], x[j_rem(j_add(i, 1), n)]);")
        .contains("cvt.rn.bf16x2.f32").doesNotContain("Bf16_encode2(");
  }

  /** A specialisation value of another type, or one that does not fit, is refused naming the parameter. */
  @Test
  void specialisationValuesMustFitTheParametersType() throws Exception {
    for (Object bad : new Object[] {true, 5_000_000_000L, 4.5, "8"}) {
      assertThatThrownBy(() -> translate(SimtCorpus.class, "compressWarp", Map.of("vals", bad)))
          .as(String.valueOf(bad)).isInstanceOf(KernelCompileException.class)
          .hasMessageContaining("@Constant vals is int; the specialisation gives " + bad);
    }
    // no value is clamped or overflowed on the way to its type: 1e30 is no long, 1e300 and 16777217L are no float
    Path f = Files.createTempDirectory("kt").resolve("L.java");
    Files.writeString(f, "import dev.taco.kernels.*;\nclass L {\n  static void k(long[] x, @Constant long big,"
        + " @Constant float s) {\n    for (@Parallel int i = 0; i < 4; i++) x[i] = big + (long) s;\n  }\n}\n");
    KernelTranslator t = new KernelTranslator(List.of(f));
    for (Map<String, Object> bad : List.<Map<String, Object>>of(Map.of("big", 1e30, "s", 1f),
        Map.of("big", 1L, "s", 1e300), Map.of("big", 1L, "s", 16777217L))) {
      assertThatThrownBy(() -> t.translate(List.of(new KernelRequest("L", "k", bad)))).as(bad.toString())
          .isInstanceOf(KernelCompileException.class).hasMessageContaining("the specialisation gives");
    }
    assertThat(t.translate(List.of(new KernelRequest("L", "k", Map.of("big", 4e18, "s", 0.1)))))
        .contains("constexpr long long big = 4000000000000000000").contains("constexpr float s = ");
    // a name that is no parameter (a typo) is refused, naming the parameters
    assertThatThrownBy(() -> translate(SimtCorpus.class, "compressWarp", Map.of("vals", 8, "val", 4)))
        .isInstanceOf(KernelCompileException.class)
        .hasMessageContaining(
            "the specialisation gives 'val', which is not a parameter of compressWarp (ctx, x, q, scales,"
                + " groups, vals)");
    // a whole number of another type is the parameter's type: 8L sizes the local array as 8 does
    assertThat(translate(SimtCorpus.class, "compressWarp", Map.of("vals", 8L)))
        .isEqualTo(translate(SimtCorpus.class, "compressWarp", Map.of("vals", 8)));
  }

  @Test
  void simtKernelsMapToThreadIdsSharedMemoryAndShuffles() {
    String sum = translate(SimtCorpus.class, "blockSum", Map.of());
    assertThat(sum).contains("extern \"C\" __global__ void blockSum(float* x, float* out, int n) {")
        .contains("__shared__ __align__(16) float s[128];").contains("__syncthreads();")
        .contains("int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);");
    String warp = translate(SimtCorpus.class, "compressWarp", Map.of("vals", 8));
    assertThat(warp).contains("void compressWarp(short* x, signed char* q, float* scales, int groups) {")
        .contains("constexpr int vals = 8;").contains("float v[8] = {};")
        .contains("#pragma unroll\n      for (int j = i; j < j_add(i, h); j = j_add(j, 1)) {")
        .contains("__shfl_xor_sync(0xffffffffu, v[j], m)").contains("amax = j_warp_reduce_max(amax);")
        .contains("j_load_bf16x8(x, base, v);").contains("j_store_bytes8(q, base, w);");
    String tile = translate(SimtCorpus.class, "tensorCoreTile", Map.of());
    assertThat(tile).contains("__shared__ __align__(16) int sa[128];")
        .containsPattern("j_cp_async16\\(sa \\+ .*, a \\+ .*\\);").contains("j_cp_async_commit();")
        .contains("j_cp_async_wait(0);").containsPattern("j_ldmatrix_x4\\(fa, 0, sa, .*, false\\);")
        .containsPattern("j_ldmatrix_x4\\(fb, 0, sb, .*, true\\);")
        .contains("j_mma_bf16(acc, 0, fa[0], fa[1], fa[2], fa[3], fb[0], fb[1]);");
  }

  @Test
  void javacErrorsAreReportedWithFileAndLine() throws Exception {
    Path bad = Files.createTempDirectory("kt").resolve("Broken.java");
    Files.writeString(bad, "class Broken {\n  static void k(int[] x) {\n    x[0] = undefinedName;\n  }\n}\n");
    assertThatThrownBy(() -> new KernelTranslator(List.of(bad))).isInstanceOf(KernelCompileException.class)
        .hasMessageStartingWith(bad + ":3: ");
  }

  /** Translates the kernel {@code k} of a class {@code T} whose body is {@code code}, in a fresh source file. */
  private static String translateSource(String code) throws Exception {
    Path f = Files.createTempDirectory("kt").resolve("T.java");
    Files.writeString(f, "import dev.taco.kernels.Parallel;\nclass T {\n" + code + "\n}\n");
    return new KernelTranslator(List.of(f)).translate(List.of(new KernelRequest("T", "k", Map.of())));
  }

  private static final String HELPERS = """
        static int bump(int[] c, int j) { c[j] += 1; return c[j]; }
        static int first(int[] c) { return c[0]; }
        static float half(float v) { return v * 0.5f; }
      """;

  /**
   * A call that writes memory and returns a value is translated where Java and C++ order it alike (a statement, an
   * initialiser, a return value, the right side of an assignment to a local) and refused inside a larger expression,
   * where C++ may evaluate the other operands before or after its write.
   */
  @Test
  void callsThatWriteMemoryAreTranslatedOnlyWhereTheirOrderIsJavas() throws Exception {
    String cu = translateSource(HELPERS + """
          static void k(int[] x, int[] y, int n) {
            for (@Parallel int i = 0; i < n; i++) {
              int r = bump(x, i);
              int s;
              s = (bump(x, i));
              s += bump(x, i);
              bump(x, i);
              y[i] = r + s + x[i];
            }
          }
        """);
    assertThat(cu).contains("int r = T_bump(x, i);").contains("s = T_bump(x, i);").contains("T_bump(x, i);");
    for (String bad : new String[] {"y[i] = bump(x, i) + x[i];", "y[i] = bump(x, i);", "if (bump(x, i) > 0) y[i] = 1;",
        "y[i] = Math.max(bump(x, i), x[i]);"}) {
      assertThatThrownBy(() -> translateSource(HELPERS + "static void k(int[] x, int[] y, int n) {\n"
          + "for (@Parallel int i = 0; i < n; i++) {\n" + bad + "\n}\n}\n"))
          .as(bad).isInstanceOf(KernelCompileException.class)
          .hasMessageContaining("bump writes an array and returns a value")
          .hasMessageContaining("assign its result to a local variable first");
    }
    // a helper that only reads is free to appear anywhere
    assertThat(translateSource(HELPERS + """
          static void k(float[] x, int n) {
            for (@Parallel int i = 0; i < n; i++) {
              x[i] = half(x[i]) + half(x[i] + 1f);
            }
          }
        """)).contains("x[i] = (T_half(x[i]) + T_half((x[i] + 1.0f)));");
  }

  /** {@code Float.isNaN(f(x))} once became {@code (f(x) != f(x))}: two calls of f. */
  @Test
  void nanTestEvaluatesItsArgumentOnce() throws Exception {
    String cu = translateSource(HELPERS + """
          static void k(float[] x, int[] y, int n) {
            for (@Parallel int i = 0; i < n; i++) {
              y[i] = Float.isNaN(half(x[i])) || Double.isNaN((double) half(x[i] + 1f)) ? 1 : 0;
            }
          }
        """);
    String body = cu.substring(cu.indexOf("__global__ void k("));
    assertThat(body).contains("j_is_nan(T_half(x[i]))").contains("j_is_nan((double)(T_half((x[i] + 1.0f))))");
    assertThat(body.split("T_half\\(", -1)).hasSize(3);
  }

  /** Every intrinsic template names each argument at most once, so the argument's expression is evaluated once. */
  @Test
  void everyIntrinsicTemplateUsesEachArgumentOnce() {
    Intrinsics.TABLE.forEach((java, c) -> {
      for (int i = 0; i < 6; i++) {
        assertThat(c.split("\\$" + i, -1).length).as(java + " -> " + c + ": $" + i).isLessThanOrEqualTo(2);
      }
    });
  }

  /** What C++ would group, type or spell differently is emitted as Java means it (and checked on g++: "grouping"). */
  @Test
  void groupingTypingAndNamesAreJavas() {
    String cu = translate(SemanticsCorpus.class, "grouping", Map.of());
    assertThat(cu).contains("cond[i] = ((a[i] > 10 ? (b[i] > 0) : (b[i] < -5)) ? 100 : 200);")
        .contains("SemanticsCorpus_pick(((signed char)-56))").contains("SemanticsCorpus_pick(((short)-25536))")
        .contains("int and_ = a[i];").contains("int and__ = b[i];").contains("int EOF_ = ").contains("int M_PI_ = ")
        .contains("j_max(p$1, q)").contains("(-(-1.5f))").contains("(-(-2.25))");
  }

  /** Kernels that C++ would run otherwise than Java are refused, naming the reason. */
  @Test
  void whatWouldRunOtherwiseOnTheGpuIsRefused() throws Exception {
    String[][] cases = {
        {"float first = x[2];\nfor (@Parallel int i = 0; i < n; i++) x[i] = x[i] - first;",
            "reads x, which the @Parallel loop writes"},
        {"for (@Parallel int i = 0; i < n; i++) x[i] = 1f;\nfloat last = x[n - 1];",
            "reads x[n - 1] in a declaration outside the @Parallel loop, and the loop writes x"},
        {"int r = bump(y, 0);\nfor (@Parallel int i = 0; i < n; i++) x[i] = r;",
            "bump writes an array: outside the @Parallel loop it would run once per GPU thread"},
        {"for (@Parallel int i = 0; i < n; i++) { x[i] = n; (n)--; }", "n is declared outside the @Parallel loop"},
        {"for (@Parallel int i = 0; i < n - 0.5f; i++) x[i] = 1f;", "the @Parallel loop's bound must be an integer"},
        {"for (@Parallel int i = 0; i < n / 3.0; i++) x[i] = 1f;", "the @Parallel loop's bound must be an integer"},
        {"int[] t = new int[1];\nfor (@Parallel int i = 0; i < n; i++) { int[] u = t; x[i] = u[0]; u[0] = i; }",
            "t is declared outside the @Parallel loop and aliases it"},
        {"int[] t = new int[1];\nfor (@Parallel int i = 0; i < n; i++) { x[i] = t[0]; bump(t, 0); }",
            "t is declared outside the @Parallel loop and bump may write it"},
        {"for (@Parallel int i = 0; i < n; i++) { int[] t = new int[2]; int[] s = new int[2]; t = s; x[i] = t[0]; }",
            "t is a fixed-size local array (a C array on the GPU): it cannot be reassigned; declare an alias"
                + " ('int[] alias = t;')"},
        {"x[0] = 1f;\nint m = n;", "a kernel needs a top-level @Parallel loop or a KernelContext parameter"},
        // the loop's bound and start are read by every thread (the bound at each iteration), after other iterations
        {"for (@Parallel int i = 0; i < y[0]; i++) y[i] = 0;",
            "reads y, which the @Parallel loop writes: in the @Parallel loop's bound"},
        {"for (@Parallel int i = y[1]; i < n; i++) y[i] = 0;",
            "reads y, which the @Parallel loop writes: in the @Parallel loop's start"},
        {"for (@Parallel int i = 0; i < bump(y, 0); i++) x[i] = 1f;",
            "bump writes an array: in the @Parallel loop's bound"},
        // the same through an alias (declared before or inside the loop) or a helper that reads the array
        {"for (@Parallel int i = 0; i < y[0]; i++) { int[] a = y; a[i] = 0; }",
            "reads y[0] in the @Parallel loop's bound, and the loop writes y"},
        {"int[] a = y;\nfor (@Parallel int i = a[1]; i < n; i++) y[i] = 0;",
            "reads a[1] in the @Parallel loop's start, and the loop writes y"},
        {"for (@Parallel int i = 0; i < first(y); i++) y[i] = 0;",
            "passes y to first in the @Parallel loop's bound, and the loop writes y"},
        {"int m = first(y);\nfor (@Parallel int i = 0; i < n; i++) y[i] = m;",
            "passes y to first in a declaration outside the @Parallel loop, and the loop writes y"},
        {"for (@Parallel int i = 0; i < n; i++) System.out.println(x[i]);",
            "instance method calls are not supported on the GPU (no objects): System.out.println (no I/O either)"}};
    for (String[] c : cases) {
      assertThatThrownBy(() -> translateSource(HELPERS + "static void k(float[] x, int[] y, int n) {\n" + c[0]
          + "\n}\n")).as(c[0]).isInstanceOf(KernelCompileException.class).hasMessageContaining(c[1]);
    }
    // reading a parameter the loop does not write, before the loop, stays allowed (a negated element is a read)
    assertThat(translateSource(HELPERS + """
          static void k(float[] x, int[] y, int n) {
            int first = y[0];
            for (@Parallel int i = 0; i < n; i++) x[i] = first - y[i] + (-y[i]);
          }
        """)).contains("int first = y[0];");
    // nor a bound or start read from an array the loop does not write
    assertThat(translateSource(HELPERS + """
          static void k(float[] x, int[] y, int n) {
            for (@Parallel int i = y[1]; i < y[0]; i++) x[i] = 1f;
          }
        """)).contains("j_i_it < (long long)(y[0])");
  }

  /**
   * Iterations of a @Parallel loop that would race as GPU threads are refused: a write at an index that does not depend
   * on the loop variable (directly, through a local, or through a call that writes), and a read of an element another
   * iteration writes; the same writes under an if on the loop variable, per-thread arrays, and reads at the written
   * index stay allowed.
   */
  @Test
  void iterationsThatWouldRaceOnTheGpuAreRefused() throws Exception {
    String[][] refused = {
        {"for (@Parallel int i = 0; i < n; i++) x[0] += x[i];", "writes x[0] at an index that does not depend on the"
            + " @Parallel variable i"},
        {"for (@Parallel int i = 0; i < n; i++) { int at = n - 1; y[at]++; }",
            "writes y[at] at an index that does not"},
        {"for (@Parallel int i = 0; i < n; i++) { x[i] = 1f; bump(y, 3); }", "writes y through bump(y, 3) at an index"
            + " that does not depend on the @Parallel variable i"},
        {"for (@Parallel int i = 1; i < n; i++) x[i] += x[i - 1];", "reads x[i - 1] and the @Parallel loop writes x[i]:"
            + " the element read is one another iteration writes"},
        {"for (@Parallel int i = 0; i < n; i++) { int r = i / 2; x[r * 2] = x[r * 2 + 1]; }", "reads x[r * 2 + 1]"}};
    for (String[] c : refused) {
      assertThatThrownBy(() -> translateSource(HELPERS + "static void k(float[] x, int[] y, int n) {\n" + c[0]
          + "\n}\n")).as(c[0]).isInstanceOf(KernelCompileException.class).hasMessageContaining(c[1])
          .hasMessageMatching("(?s).*T\\.java:\\d+: .*");
    }
    String[] allowed = {
        "for (@Parallel int i = 0; i < n; i++) { if (i == 0) y[0] = n; x[i] = 2f * x[i]; }",
        "for (@Parallel int i = 0; i < n; i++) { int row = i / 4; int at = row * 4 + i % 4; x[at] = x[at] + 1f; }",
        "for (@Parallel int i = 0; i < n; i++) { int[] t = new int[2]; t[0] = i; t[1] = t[0]; int r = bump(t, 1); y[i] = r; }",
        "for (@Parallel int i = 0; i < n; i++) { int j; j = 3 * i; x[j] = y[j + 1]; }",
        "for (@Parallel int once = 0; once < 1; once++) { int r = bump(y, 1); y[0] = r; }"};
    for (String code : allowed) {
      assertThat(translateSource(HELPERS + "static void k(float[] x, int[] y, int n) {\n" + code + "\n}\n"))
          .as(code).contains("__global__ void k(");
    }
  }

  private static final String RACE_HELPERS = """
        static final int ONE = 1;
        static void acc(float[] a, float v) { a[0] += v; }
        static void store(float[] a, int at, float v) { a[at] = v; }
        static void set(float[] a, int at, float v) { a[at] = v; }
        static float get(float[] a, int at) { return a[at]; }
        static void inc(int[] a, int at) { a[at]++; }
        static void copyTo(float[] dst, int at, float[] src) { dst[at] = src[at]; }
      """;

  /**
   * Races that the first version of the check let through (a fresh reviewer's probes; five of them gave wrong results
   * on an H200): aliases, an if that passes many iterations, writes under a picking if that meet other iterations'
   * accesses, updates at many-to-one indices, two write indices that meet, calls' value arguments and helpers' reads.
   */
  @Test
  void racesThroughAliasesGuardsUpdatesAndCallsAreRefused() {
    String[][] refused = {
        {"for (@Parallel int i = 1; i < n; i++) { float[] a = x; x[i] = a[i - 1] + x[i]; }", "reads a[i - 1]"},
        {"for (@Parallel int i = 0; i < n; i++) { float[] o = out; o[0] += x[i]; }", "writes o[0] at an index that"},
        {"float[] a = x;\nfor (@Parallel int i = 1; i < n; i++) x[i] = a[i - 1] + 1f;", "reads a[i - 1]"},
        {"for (@Parallel int i = 0; i < n; i++) { if (i < n) out[0] += x[i]; }", "writes out[0] at an index that"
            + " does not depend on the @Parallel variable i"},
        {"for (@Parallel int i = 0; i < n; i++) { if (i % 2 == 0) out[0] = x[i]; }", "writes out[0] at an index"},
        {"for (@Parallel int i = 0; i < n; i++) { if (i == 0) { out[1] = 1f; } else { out[0] += x[i]; } }",
            "writes out[0] at an index"},
        {"for (@Parallel int i = 0; i < n; i++) { out[i] = x[i]; if (i == 0) out[1] = 0f; }", "writes out[i], and"
            + " the @Parallel loop also writes out under an if that picks one iteration"},
        {"for (@Parallel int i = 0; i < n; i++) { if (i == 0) out[0] = 2f; x[i] = x[i] * out[0]; }", "reads out[0],"
            + " which one iteration of the @Parallel loop writes"},
        {"for (@Parallel int i = 0; i < n; i++) out[i / 2] += x[i];", "updates out[i / 2] at an index that depends"
            + " on i only through data (an array read, a call), a local assigned more than once, or one /, %"},
        {"for (@Parallel int i = 0; i < n; i++) y[(int) (x[i] * 16f)]++;", "updates y[(int) (x[i] * 16f)]"},
        {"for (@Parallel int i = 0; i < n; i++) { int row = i / 4; out[row] += x[i]; }", "updates out[row]"},
        {"for (@Parallel int i = 0; i < n; i++) { x[i + 1] = 0f; x[i] = 1f; }", "an element another iteration"
            + " writes too"},
        {"for (@Parallel int i = 0; i < n; i++) { x[i + 1] = 0f; x[i] += 1f; }", "another iteration writes too"},
        {"for (@Parallel int i = 0; i < n; i++) acc(out, x[i]);", "writes out through acc(out, x[i]) at an index"},
        {"for (@Parallel int i = 0; i < n; i++) store(out, 0, x[i]);", "writes out through store(out, 0, x[i])"},
        {"for (@Parallel int i = 1; i < n; i++) { set(x, i, 1f); out[i] = x[i - 1]; }", "reads x[i - 1] and the"
            + " @Parallel loop writes x through set(x, i, 1f)"},
        {"for (@Parallel int i = 1; i < n; i++) x[i] = get(x, i - 1) + x[i];", "reads x through get(x, i - 1)"},
        {"for (@Parallel int i = 0; i < n; i++) x[i] = x[i] + x[i + n];", "may be one another iteration writes"},
        // a second reviewer's probes
        {"for (@Parallel int i = 0; i < n; i++) { int b = (int) (x[i] * 16f); if (b > 15) b = 15; y[b]++; }",
            "updates y[b] at an index that depends on i only through data"},
        {"for (@Parallel int i = 0; i < n; i++) { int b = y[i]; out[b] = out[b] + 1f; }", "updates out[b]"},
        {"for (@Parallel int i = 0; i < n; i++) out[i / 2] = out[i / 2] + x[i];", "updates out[i / 2]"},
        {"for (@Parallel int i = 0; i < n; i++) out[y[i] * 16 + y[i + 1]] += 1f;", "updates out[y[i] * 16 + y[i + 1]]"},
        {"for (@Parallel int i = 0; i < n; i++) inc(y, y[i]);", "updates y through inc(y, y[i])"},
        {"for (@Parallel int i = 0; i < n; i++) for (int j = i; j < n; j++) out[j] += 1f;", "updates out[j]"},
        {"for (@Parallel int i = 0; i < n; i++) for (int j = 0; j < n; j++) if (i == j) out[0] += x[i * n + j];",
            "writes out[0] at an index that does not depend"},
        {"for (@Parallel int i = 0; i < n; i++) { if (i == 0) out[0] = 1f; if (i == 1) out[0] = 2f; }",
            "under another: two iterations write out"},
        {"for (@Parallel int i = 0; i < n; i++) { if (i == 0) out[0] = x[0]; if (i == n - 1) out[1] = out[0]; }",
            "reads out[0], which one iteration of the @Parallel loop writes"},
        {"for (@Parallel int i = 0; i < n; i++) { out[i] = 1f; out[2 * i] = 2f; }", "another iteration writes too"},
        {"for (@Parallel int i = 0; i < n; i++) out[i * 65536 * 65536] += x[i];", "writes out[i * 65536 * 65536] at"
            + " an index that does not depend"},
        {"for (@Parallel int i = 0; i < n; i++) out[i - i] += x[i];", "writes out[i - i] at an index that does not"},
        {"for (@Parallel int i = 0; i < n; i++) x[i * 2147483647 * 2] = x[i * 2147483647 * 2 + 2] + 1f;",
            "the element read is one another iteration writes"}};
    for (String[] c : refused) {
      assertThatThrownBy(() -> translateSource(RACE_HELPERS + "static void k(float[] x, float[] out, int[] y, int n)"
          + " {\n" + c[0] + "\n}\n")).as(c[0]).isInstanceOf(KernelCompileException.class)
          .hasMessageContaining(c[1]).hasMessageMatching("(?s).*T\\.java:\\d+: .*");
    }
    String[] allowed = {
        "for (@Parallel int i = 0; i < n; i++) { if (i == 3) out[0] = x[i]; x[i] = 2f * x[i]; }",
        "for (@Parallel int i = 0; i < n; i++) { if (i == 0 && n > 2) { out[0] = 1f; out[1] = out[0] + 1f; } }",
        "for (@Parallel int once = 0; once < ONE; once++) { out[0] = 1f; x[0] = out[0]; }",
        "for (@Parallel int i = 0; i < n; i++) x[(i)] = x[i] + 1f;",
        "for (@Parallel int i = 0; i < n; i++) { int k = 2 * i; x[k] = x[2 * i] * 2f; }",
        "for (@Parallel int i = 0; i < n; i++) x[2 * i] = x[2 * i] + x[1 + i * 2];",
        "for (@Parallel int i = 0; i < n; i++) { int t = i % 4; int b = i / 4; out[b * 4 + t] += x[i]; }",
        "for (@Parallel int i = 0; i < n; i++) { int o = i * n; for (int j = 0; j < n; j++) out[o + j] += x[j]; }",
        "for (@Parallel int i = 0; i < n; i++) { set(x, i, 1f); out[i] = x[i]; }",
        "for (@Parallel int i = 0; i < n; i++) copyTo(out, i, x);",
        "for (@Parallel int i = 0; i < n; i++) out[y[i]] = x[i];",
        "for (@Parallel int b = 0; b < n; b++) { int j0 = b * 16; int j1 = Math.min(j0 + 16, n);"
            + " for (int j = j0; j < j1; j++) out[j] += x[j]; }",
        "for (@Parallel int i = 0; i < n; i++) { int t = i % 8; int h = (i / 8) % 4; int b = i / 32;"
            + " out[(b * 8 + t) * 4 + h] += x[i]; }",
        "for (@Parallel int i = 0; i < 1L; i++) out[0] += x[0];",
        "for (@Parallel int i = 0; i < n; i++) { float[] z = new float[4];"
            + " dev.taco.kernels.Vec16.loadFloat4(x, 4 * i % n, z);"
            + " dev.taco.kernels.Vec16.storeFloat4(out, 4 * i, z); }",
        "for (@Parallel int i = 0; i < n; i++) { if (i == ONE && n > 2) out[0] = 1f; if (i == 1) out[1] = out[0]; }"};
    for (String code : allowed) {
      assertThatCode(() -> translateSource(RACE_HELPERS + "static void k(float[] x, float[] out, int[] y, int n)"
          + " {\n" + code + "\n}\n")).as(code).doesNotThrowAnyException();
    }
  }

  /**
   * Chained squares multiply out to 2^12 monomials: the race check takes such an index as one opaque term instead (it
   * took minutes; the guard is against a hang, not a speed target).
   */
  @Test
  void indicesThatMultiplyOutEnormouslyAreTakenWhole() {
    StringBuilder body = new StringBuilder("for (@Parallel int i = 0; i < n; i++) { int a0 = i + 1;");
    for (int k = 1; k <= 12; k++) {
      body.append(" int a").append(k).append(" = a").append(k - 1).append(" * a").append(k - 1).append(';');
    }
    body.append(" out[a12] = x[i]; }");
    assertTimeoutPreemptively(java.time.Duration.ofSeconds(60), () -> translateSource(RACE_HELPERS
        + "static void k(float[] x, float[] out, int[] y, int n) {\n" + body + "\n}\n"));
  }

  /** An assigned element's index holds no call or ?: (it may be evaluated twice); the message says what to do. */
  @Test
  void anAssignedIndexWithACallSaysToComputeItFirst() {
    assertThatThrownBy(() -> translateSource("static void k(float[] x, int n) {\n"
        + "for (@Parallel int i = 0; i < n; i++) x[Math.min(i, 3)] = 1f;\n}\n"))
        .hasMessageContaining("compute it into a local first").hasMessageNotContaining("compound");
  }

  /** A kernel's extern "C" name shares the C library's namespace. */
  @Test
  void kernelsMayNotTakeLibraryNames() {
    for (String name : new String[] {"exp", "sqrtf", "round", "max", "printf"}) {
      assertThatThrownBy(() -> {
        Path f = Files.createTempDirectory("kt").resolve("T.java");
        Files.writeString(f, "import dev.taco.kernels.Parallel;\nclass T {\nstatic void " + name
            + "(float[] x, int n) {\nfor (@Parallel int i = 0; i < n; i++) x[i] = 1f;\n}\n}\n");
        new KernelTranslator(List.of(f)).translate(List.of(new KernelRequest("T", name, Map.of())));
      }).as(name).isInstanceOf(KernelCompileException.class).hasMessageContaining("a kernel may not be named " + name);
    }
  }

  /** Device functions are named Class_method in C: two classes of one simple name are refused, not merged. */
  @Test
  void deviceFunctionsOfClassesWithOneSimpleNameAreRefused() throws Exception {
    Path f = Files.createTempDirectory("kt").resolve("T.java");
    Files.writeString(f, """
        import dev.taco.kernels.Parallel;
        class T {
          static class P { static class Util { static float f(float v) { return v + 1f; } } }
          static class Q { static class Util { static float f(float v) { return v * 2f; } } }
          static void k(float[] x, int n) {
            for (@Parallel int i = 0; i < n; i++) x[i] = P.Util.f(x[i]) + Q.Util.f(x[i]);
          }
        }
        """);
    assertThatThrownBy(() -> new KernelTranslator(List.of(f)).translate(List.of(new KernelRequest("T", "k",
        Map.of())))).isInstanceOf(KernelCompileException.class).hasMessageContaining("would be named Util_f in C, as")
        .hasMessageContaining("rename one of them");
  }

  @Test
  void unknownKernelIsReported() {
    assertThatThrownBy(() -> translate(SimtCorpus.class, "noSuchKernel", Map.of()))
        .hasMessageContaining("kernel noSuchKernel not found");
  }

  /** Each file in src/test/resources/unsupported marks the offending line with {@code // ERROR: reason}. */
  @TestFactory
  Stream<DynamicTest> unsupportedKernelsAreRejectedWithFileLineAndReason() throws Exception {
    List<Path> files;
    try (Stream<Path> s = Files.list(UNSUPPORTED)) {
      files = s.sorted().toList();
    }
    KernelTranslator t = new KernelTranslator(new ArrayList<>(files));
    return files.stream().map(f -> DynamicTest.dynamicTest(f.getFileName().toString(), () -> {
      List<String> lines = Files.readAllLines(f);
      int line = 0;
      String reason = null;
      for (int i = 0; i < lines.size(); i++) {
        int at = lines.get(i).indexOf("// ERROR: ");
        if (at >= 0) {
          line = i + 1;
          reason = lines.get(i).substring(at + "// ERROR: ".length()).trim();
        }
      }
      String cls = "unsupported." + f.getFileName().toString().replace(".java", "");
      assertThatThrownBy(() -> t.translate(List.of(new KernelRequest(cls, "k", Map.of()))))
          .isInstanceOf(KernelCompileException.class)
          .hasMessageStartingWith(f + ":" + line + ": ")
          .hasMessageContaining(reason);
    }));
  }
}
