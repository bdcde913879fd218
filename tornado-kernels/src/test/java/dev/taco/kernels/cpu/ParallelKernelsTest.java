package dev.taco.kernels.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.TacoKernels;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link ParallelKernels}: the codec kernels of {@code dev.taco.kernels}, compiled from the sources the jar carries,
 * give bit-identical results to the direct (sequential) calls; iterations really run at the same time; loops the
 * rewrite cannot honour are refused with file:line.
 */
class ParallelKernelsTest {
  static final Path FIXTURES = Path.of("src/test/java/dev/taco/kernels/cpu/ParallelFixtures.java");

  static float[] gaussian(SplittableRandom r, int n, double scale) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) (r.nextGaussian() * scale * (i % 61 == 7 ? 300 : 1));
    }
    return x;
  }

  @ParameterizedTest(name = "{0} x {1}, G={2}, hadamard={3}, format={4}")
  @CsvSource({"1, 64, 64, true, 1", "7, 300, 64, true, 1", "33, 512, 128, false, 2", "64, 1024, 256, true, 1",
      "5, 1000, 32, true, 2"})
  void tacoKernelsMatchTheSequentialCallBitForBit(int rows, int cols, int g, boolean hadamard, int format)
      throws Throwable {
    SplittableRandom rnd = new SplittableRandom(rows * 1000L + cols);
    float[] x = gaussian(rnd, rows * cols, 2.0);
    int ng = TacoKernels.groupsPerRow(cols, g);
    int fineOff = 4 * rows;
    int codeOff = fineOff + rows * ng;
    int size = codeOff + rows * ng * g;
    MethodHandle rowScales = ParallelKernels.kernel(TacoKernels.class, "rowScales", MethodType.methodType(void.class,
        float[].class, int.class, int.class, int.class, int.class, int.class, boolean.class, byte[].class, int.class));
    MethodHandle encode = ParallelKernels.kernel(TacoKernels.class, "encodeGroups", MethodType.methodType(void.class,
        float[].class, int.class, int.class, int.class, int.class, int.class, float.class, boolean.class,
        boolean.class, float[].class, int[].class, byte[].class, int.class, int.class, int.class));
    MethodHandle decode = ParallelKernels.kernel(TacoKernels.class, "decodeGroups", MethodType.methodType(void.class,
        byte[].class, int.class, int.class, int.class, int.class, int.class, int.class, int.class, boolean.class,
        boolean.class, float[].class, float[].class, int.class, boolean.class));

    byte[] seq = new byte[size];
    TacoKernels.rowScales(x, 0, rows, cols, g, format, hadamard, seq, 0);
    TacoKernels.encodeGroups(x, 0, rows, cols, g, format, 1f, hadamard, true, new float[rows * ng * g],
        new int[rows * ng], seq, 0, fineOff, codeOff);
    byte[] par = new byte[size];
    rowScales.invokeExact(x, 0, rows, cols, g, format, hadamard, par, 0);
    int[] sat = new int[rows * ng];
    encode.invokeExact(x, 0, rows, cols, g, format, 1f, hadamard, true, new float[rows * ng * g], sat, par, 0,
        fineOff, codeOff);
    assertThat(par).isEqualTo(seq);
    assertThat(sat).containsOnly(0);

    float[] y = gaussian(rnd, rows * cols, 1.0);
    float[] ySeq = y.clone();
    TacoKernels.decodeGroups(seq, 0, fineOff, codeOff, rows, cols, g, format, hadamard, true,
        new float[rows * ng * g], ySeq, 0, true);
    decode.invokeExact(par, 0, fineOff, codeOff, rows, cols, g, format, hadamard, true, new float[rows * ng * g], y,
        0, true);
    assertThat(Arrays.equals(y, ySeq)).isTrue();
    assertThat(ySeq).isNotEqualTo(gaussian(new SplittableRandom(rows * 1000L + cols), rows * cols, 2.0)); // did work
  }

  @Test
  void groupKernelsMatchTheSequentialCall() throws Throwable {
    int rows = 9;
    int cols = 700;
    int g = 64;
    float[] x = gaussian(new SplittableRandom(5), rows * cols, 1.0);
    int ng = TacoKernels.groupsPerRow(cols, g);
    int codeOff = 4 * rows * ng;
    MethodType t = MethodType.methodType(void.class, float[].class, int.class, int.class, int.class, int.class,
        int.class, boolean.class, float[].class, byte[].class, int.class, int.class);
    MethodHandle encode = ParallelKernels.kernel(GroupKernels.class, "encode", t);
    for (int kind : new int[] {GroupKernels.INT8, GroupKernels.E4M3, GroupKernels.INT4}) {
      byte[] seq = new byte[codeOff + rows * ng * g];
      byte[] par = seq.clone();
      GroupKernels.encode(x, 0, rows, cols, g, kind, true, new float[rows * ng * g], seq, 0, codeOff);
      encode.invokeExact(x, 0, rows, cols, g, kind, true, new float[rows * ng * g], par, 0, codeOff);
      assertThat(par).as("kind %d", kind).isEqualTo(seq);
      assertThat(seq).as("kind %d", kind).isNotEqualTo(new byte[seq.length]);
    }
  }

  @Test
  void iterationsRunAtTheSameTime() throws Throwable {
    assumeTrue(Runtime.getRuntime().availableProcessors() >= 2, "needs 2 cores");
    MethodHandle k = ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "meetInTheMiddle",
        MethodType.methodType(void.class, int[].class, int.class, CyclicBarrier.class));
    int[] out = new int[1000];
    k.invokeExact(out, out.length, new CyclicBarrier(2));
    for (int i = 0; i < out.length; i++) {
      assertThat(out[i]).isEqualTo(i * 3 + 1);
    }
    int[] seq = new int[10];
    assertThatThrownBy(() -> ParallelFixtures.meetInTheMiddle(seq, seq.length, new CyclicBarrier(2) {
      @Override
      public int await(long timeout, java.util.concurrent.TimeUnit unit) throws java.util.concurrent.TimeoutException {
        throw new java.util.concurrent.TimeoutException("a sequential run waits alone");
      }
    })).isInstanceOf(IllegalStateException.class).hasMessageContaining("waited alone");
  }

  @Test
  void nestedLoopsLabelsAndOffsetsAreKept() throws Throwable {
    MethodHandle k = ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "shapes", MethodType.methodType(
        void.class, float[].class, float[].class, int.class, int.class, int.class));
    float[] x = gaussian(new SplittableRandom(3), 200 * 17, 2.0);
    float[] seq = new float[200];
    float[] par = new float[200];
    ParallelFixtures.shapes(x, seq, 13, 200, 17);
    k.invokeExact(x, par, 13, 200, 17);
    assertThat(par).isEqualTo(seq);
    assertThat(par[12]).isZero();
    assertThat(par[13]).isNotZero();
  }

  @Test
  void theRewriteIsReadableJava() {
    String src = "package p;\nimport dev.taco.kernels.Parallel;\npublic final class K {\n  private K() {}\n"
        + "  static void k(float[] a, int n) {\n    for (@Parallel int i = 1; i < n; i++) {\n"
        + "      a[i] = K.twice(a[i]);\n    }\n  }\n  static float twice(float v) { return 2 * v; }\n}\n";
    String out = ParallelKernels.rewrite(src, "K.java", Fake.K.class);
    assertThat(out).contains("package p; import " + ParallelExecutor.class.getName() + "; \n",
        "public final class K__Parallel", "private K__Parallel()", "K.twice(a__p[i])",
        "{ final int lo__b = 1; final int hi__b = n; final var a__p = a; ParallelExecutor.split(lo__b, hi__b, "
            + "(lo__, hi__) -> { for (int i = lo__; i < hi__; i++) {")
        .doesNotContain("final var n__p", "final var i__p");
    assertThat(out.lines().count()).isEqualTo(src.lines().count()); // stack traces and javac errors keep their lines
  }

  @Test
  void outerIndicesLabelsSwitchesAndNestedClassesWork() throws Throwable {
    MethodHandle k = ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "outerIndex", MethodType.methodType(
        void.class, float[].class, String[].class, int.class, int.class, ParallelFixtures.Mode.class));
    for (ParallelFixtures.Mode mode : ParallelFixtures.Mode.values()) {
      float[] seq = new float[6 * 50];
      String[] seqNames = new String[seq.length];
      float[] par = new float[seq.length];
      String[] parNames = new String[seq.length];
      ParallelFixtures.outerIndex(seq, seqNames, 6, 50, mode);
      k.invokeExact(par, parNames, 6, 50, mode);
      assertThat(par).as("%s", mode).isEqualTo(seq);
      assertThat(parNames).isEqualTo(seqNames).contains("ParallelFixtures#7");
      assertThat(seq[5 * 50 + 7]).isNotZero();
      assertThat(seq[3]).isZero(); // skipped by continue
    }
  }

  @Test
  void namesFollowTheirDeclarationsAndStaticTablesAreShared() throws Throwable {
    MethodHandle k = ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "scopes",
        MethodType.methodType(void.class, float[].class, int.class, int.class));
    for (float t : new float[] {0.5f, -3f}) {
      java.util.Arrays.fill(ParallelFixtures.TABLE, t); // after the copy was made: it must see this
      float[] seq = new float[301];
      float[] par = new float[301];
      ParallelFixtures.scopes(seq, seq.length, 0);
      k.invokeExact(par, par.length, 0);
      assertThat(par).isEqualTo(seq);
      assertThat(seq[10]).isEqualTo(2 * t + (10 + 7) * 6f);
    }
    ParallelFixtures.Inner.fill(new int[3]); // the member type is the original's, untouched
  }

  @Test
  void interfacesSharedTablesObscuringNamesPrivateHelpersAndSideEffectsInTheBound() throws Throwable {
    Path src = Path.of("src/test/java/dev/taco/kernels/cpu/InterfaceFixture.java");
    MethodHandle k = ParallelKernels.kernel(InterfaceFixture.class, src, "lookup",
        MethodType.methodType(void.class, float[].class, int.class, float.class));
    MethodHandle fq = ParallelKernels.kernel(InterfaceFixture.class, src, "fullyQualified",
        MethodType.methodType(void.class, float[].class, int.class));
    java.util.Arrays.fill(InterfaceFixture.TABLE, 7f); // after the copy was made
    float[] seq = new float[97];
    float[] par = new float[97];
    InterfaceFixture.lookup(seq, seq.length, 0.5f);
    k.invokeExact(par, par.length, 0.5f);
    assertThat(par).isEqualTo(seq);
    assertThat(seq[1]).isEqualTo(3.5f + 2f + 2f * 97 + 3f); // the table, g, twice(len) with len = n, thrice
    float[] seqFq = new float[9];
    float[] parFq = new float[9];
    InterfaceFixture.fullyQualified(seqFq, 9);
    fq.invokeExact(parFq, 9);
    assertThat(parFq).isEqualTo(seqFq);
  }

  @Test
  void aMultiLineHeaderKeepsTheLinesOfWhatFollows() throws Exception {
    String src = Files.readString(Path.of("src/test/java/dev/taco/kernels/cpu/InterfaceFixture.java"));
    String out = ParallelKernels.rewrite(src, "InterfaceFixture.java", InterfaceFixture.class);
    assertThat(out.lines().count()).isEqualTo(src.lines().count());
    int line = src.lines().toList().indexOf("      throw new IllegalStateException(\"line 36\");");
    assertThat(line).isEqualTo(35);
    assertThat(out.lines().toList().get(line)).contains("line 36");
    String crlf = src.replace("\n", "\r\n");
    assertThat(ParallelKernels.rewrite(crlf, "InterfaceFixture.java", InterfaceFixture.class).lines().toList()
        .get(line)).contains("line 36");
  }

  @Test
  void theSameFileByAnotherPathIsTheSameSource() {
    MethodType t = MethodType.methodType(void.class, float[].class, float[].class, int.class, int.class, int.class);
    ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "shapes", t);
    assertThatCode(() -> ParallelKernels.kernel(ParallelFixtures.class, FIXTURES.toAbsolutePath(), "shapes", t))
        .doesNotThrowAnyException();
  }

  @Test
  void aClassCompiledFromOneSourceIsNotSilentlyReusedForAnother(@TempDir Path dir) {
    MethodType t = MethodType.methodType(void.class, float[].class, float[].class, int.class, int.class, int.class);
    ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "shapes", t);
    assertThatThrownBy(() -> ParallelKernels.kernel(ParallelFixtures.class, dir.resolve("Other.java"), "shapes", t))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("already");
  }

  @Test
  void instanceMethodsAndMissingKernelsAreNamed() {
    MethodType t = MethodType.methodType(void.class, float[].class, float[].class, int.class, int.class, int.class);
    assertThatThrownBy(() -> ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "shapez", t))
        .hasMessageContaining("no static kernel ParallelFixtures.shapez");
    assertThatThrownBy(() -> ParallelKernels.kernel(ParallelFixtures.class, FIXTURES, "toString",
        MethodType.methodType(String.class))).hasMessageContaining("no static kernel");
  }

  @Test
  void splitCoversRangesLongerThanAnInt() {
    java.util.concurrent.atomic.AtomicLong covered = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicInteger low = new java.util.concurrent.atomic.AtomicInteger(Integer.MAX_VALUE);
    ParallelExecutor.split(-10, Integer.MAX_VALUE, (lo, hi) -> {
      covered.addAndGet((long) hi - lo);
      low.accumulateAndGet(lo, Math::min);
    });
    assertThat(covered.get()).isEqualTo((long) Integer.MAX_VALUE + 10);
    assertThat(low.get()).isEqualTo(-10);
    ParallelExecutor.split(5, 5, (lo, hi) -> {
      throw new AssertionError("empty range ran");
    });
  }

  @ParameterizedTest(name = "{1}")
  @CsvSource(delimiter = '|', value = {
      "for (@Parallel int i = 0; i < n; i++) { if (a[i] > 0) return; a[i] = 1; }|K.java:4: 'return' inside a @Parallel loop",
      "for (@Parallel int i = 0; i < n; i++) { if (a[i] > 0) break; a[i] = 1; }|K.java:4: 'break' out of a @Parallel loop",
      "o: for (@Parallel int i = 0; i < n; i++) { for (int j = 0; j < 2; j++) { if (j > i) break o; } }|K.java:4: 'break' out of a @Parallel loop",
      "for (@Parallel int i = 0; i <= n; i++) { a[i] = 1; }|K.java:4: a @Parallel loop must read 'for (@Parallel int i = a; i < b; i++)'",
      "for (@Parallel int i = 0; i < n; i += 2) { a[i] = 1; }|K.java:4: a @Parallel loop must read",
      "for (@Parallel int i = 0, j = 0; i < n; i++) { a[i] = j; }|K.java:4: a @Parallel loop must read",
      "float s = 0; for (@Parallel int i = 0; i < n; i++) { s += a[i]; }|K.java:4: the @Parallel loop assigns 's', a local of the enclosing method",
      "for (@Parallel int i = 0; i < n; i++) { n--; }|K.java:4: the @Parallel loop assigns 'n'",
      "for (@Parallel int i = 0; i < n; i++) { a[i] = 1; i++; }|K.java:4: the @Parallel loop assigns 'i', its own loop variable",
      "for (@Parallel short i = 0; i < n; i++) { a[i] = 1; }|K.java:4: a @Parallel loop must read",
      "for (@Parallel int i : new int[] {1, 2}) { a[i] = 1; }|K.java:4: a @Parallel loop must read 'for (@Parallel int i = a; i < b; i++)', not a for-each",
      "for (@Parallel int i = 0; i < n; i++) { a[i] = 1; (i)++; }|K.java:4: the @Parallel loop assigns 'i', its own loop variable",
      "for (@Parallel int i = 0; i < 10L * n; i++) { a[i] = 1; }|K.java:4: the bound of a @Parallel loop must be an int (here long)",
      "int r = switch (n) { default -> { for (@Parallel int i = 0; i < n; i++) { yield 1; } yield 0; } };|K.java:4: 'yield' out of a @Parallel loop"})
  void loopsTheRewriteCannotHonourAreRefusedWithFileAndLine(String loop, String message) {
    String src = "package p;\nimport dev.taco.kernels.Parallel;\npublic final class K { static void k(float[] a, int n) {\n"
        + loop + "\n} }\n";
    assertThatThrownBy(() -> ParallelKernels.rewrite(src, "K.java", Fake.K.class))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(message);
  }

  @ParameterizedTest(name = "{1}")
  @CsvSource(delimiter = '|', value = {
      "static float scale = 1f;|K.java:3: static field 'scale' is not final",
      "static final float[] T = new float[4]; static { T[0] = 1; }|K.java:3: a static initialiser would run again",
      "private static final float[] T = new float[4];|K.java:3: private static final field 'T' holds an object",
      "private static final class C { static float gain = 1f; }|K.java:3: private member type C holds static state",
      "static final L T = new L(); private static final class L {}|K.java:3: static final field 'T' has a private type"})
  void mutableStaticStateIsRefused(String member, String message) {
    String src = "package p;\nimport dev.taco.kernels.Parallel;\npublic final class K { " + member + "\n"
        + "  static void k(float[] a, int n) { for (@Parallel int i = 0; i < n; i++) { a[i] = 1; } } }\n";
    assertThatThrownBy(() -> ParallelKernels.rewrite(src, "K.java", Fake.K.class))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(message);
  }

  @Test
  void otherTopLevelTypesAndAdjacentTokensSurviveTheRewrite() {
    String out = ParallelKernels.rewrite("package p;import dev.taco.kernels.Parallel;\nfinal class K {\n"
        + "  static void k(int[] a, int n) {\n    for (@Parallel int i = 0; i < n; i++) { a[i] = i; }K.bump(a);\n  }\n"
        + "  private static void bump(int[] a) { a[0]++; }\n}\nfinal class Second {}\n", "K.java", Fake.K.class);
    assertThat(out).startsWith("package p; import " + ParallelExecutor.class.getName() + "; import dev.taco")
        .contains("a__p[i] = i; } }); }K__Parallel.bump(a);").doesNotContain("class Second");
    assertThatThrownBy(() -> ParallelKernels.rewrite("import dev.taco.kernels.Parallel;\nfinal class K {\n"
        + "  static final class M {}\n}\n", "K.java", Fake.K.class)).hasMessageContaining("unnamed package");
  }

  @Test
  void enumAndRecordKernelClassesAreRefused() {
    assertThatThrownBy(() -> ParallelKernels.rewrite("package p; enum K { A; static void k() {} }", "K.java",
        Fake.K.class)).hasMessageContaining("K.java: K is an enum");
    assertThatThrownBy(() -> ParallelKernels.rewrite("package p; record K(int a) { static void k() {} }", "K.java",
        Fake.K.class)).hasMessageContaining("K.java: K is a record");
  }

  @Test
  void javacsReasonsComeWithTheLine(@TempDir Path dir) throws Exception {
    Path src = dir.resolve("CarriedFixture.java");
    Files.writeString(src, """
        package dev.taco.kernels.cpu;

        import dev.taco.kernels.Parallel;

        final class CarriedFixture {
          /** A kernel whose body throws a checked exception, which a lambda cannot. */
          static void rowSums(float[] x, float[] out, int rows, int cols) {
            for (@Parallel int r = 0; r < rows; r++) {
              out[r] = x[r * cols];
              Thread.sleep(1);
            }
          }
        }
        """);
    assertThatThrownBy(() -> ParallelKernels.kernel(CarriedFixture.class, src, "rowSums",
        MethodType.methodType(void.class, float[].class, float[].class, int.class, int.class)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(src + ":10: ")
        .hasMessageContaining("InterruptedException");
  }

  @Test
  void aClassWithoutItsSourceIsNamed() {
    assertThatThrownBy(() -> ParallelKernels.kernel(CarriedFixture.class, "k", MethodType.methodType(void.class)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("dev/taco/kernels/cpu/CarriedFixture.java");
    assertThatThrownBy(() -> ParallelKernels.kernel(Fake.K.class, "k", MethodType.methodType(void.class)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is nested");
  }

  /** Stand-ins whose names the rewrite uses. */
  static final class Fake {
    static final class K {}
  }
}
