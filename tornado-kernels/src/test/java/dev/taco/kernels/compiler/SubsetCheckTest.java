package dev.taco.kernels.compiler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.kernels.compiler.corpus.SemanticsCorpus;
import dev.taco.kernels.compiler.corpus.SimtCorpus;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The subset check as a pass of its own ({@link KernelTranslator#check}): it refuses what
 * {@link KernelTranslator#translate} refuses, with the same {@code file:line: reason}, before any C is written, in the
 * order the C would be written.
 */
class SubsetCheckTest {

  /** Every unsupported kernel is refused by the check alone, with translate's message, at its marked line. */
  @TestFactory
  Stream<DynamicTest> theCheckAloneRefusesEveryUnsupportedKernel() throws Exception {
    List<Path> files;
    try (Stream<Path> s = Files.list(KernelTranslatorTest.UNSUPPORTED)) {
      files = s.sorted().toList();
    }
    KernelTranslator t = new KernelTranslator(new ArrayList<>(files));
    return files.stream().map(f -> DynamicTest.dynamicTest(f.getFileName().toString(), () -> {
      List<String> lines = Files.readAllLines(f);
      int line = 0;
      for (int i = 0; i < lines.size(); i++) {
        if (lines.get(i).contains("// ERROR: ")) {
          line = i + 1;
        }
      }
      List<KernelRequest> request = List.of(new KernelRequest("unsupported." + f.getFileName().toString()
          .replace(".java", ""), "k", Map.of()));
      String translated = messageOf(() -> t.translate(request));
      assertThat(messageOf(() -> t.check(request))).isEqualTo(translated).startsWith(f + ":" + line + ": ");
    }));
  }

  /**
   * A device function's refusal comes from the check before the kernel that calls it is emitted: the check of the
   * whole call graph throws, and returns nothing to emit.
   */
  @Test
  void aRefusedDeviceFunctionStopsTheCheckOfItsKernel() throws Exception {
    KernelTranslator t = translator("""
          static float inner(float v) { String s = "a"; return v + s.length(); }
          static float outer(float v) { return inner(v) * 2f; }
          static void k(float[] x, int n) {
            for (@Parallel int i = 0; i < n; i++) x[i] = outer(x[i]);
          }
        """);
    List<KernelRequest> k = List.of(new KernelRequest("T", "k", Map.of()));
    assertThatThrownBy(() -> t.check(k)).isInstanceOf(KernelCompileException.class)
        .hasMessageMatching("(?s).*T\\.java:3: type java.lang.String is not supported on the GPU.*")
        .hasMessage(messageOf(() -> t.translate(k)));
  }

  /**
   * The check hands the emitter the kernels and then the device functions in the order first reached, the
   * specialisation as the parameters' types (8L for an int is 8) and the size of every fixed-size array; the C of
   * translate defines those functions, the device functions first, in that order.
   */
  @Test
  void theCheckReturnsWhatTheEmitterWrites() {
    KernelTranslator t = new KernelTranslator(Corpus.sources());
    List<KernelRequest> requests = List.of(KernelRequest.of(SimtCorpus.class, "compressWarp", Map.of("vals", 8L)),
        KernelRequest.of(SemanticsCorpus.class, "fp8", Map.of()));
    List<SubsetCheck.Checked> checked = t.check(requests);
    assertThat(checked.subList(0, 2)).allMatch(SubsetCheck.Checked::kernel);
    assertThat(checked.subList(2, checked.size())).isNotEmpty().noneMatch(SubsetCheck.Checked::kernel);
    assertThat(checked.getFirst().constants()).containsExactly(Map.entry("vals", 8));
    assertThat(checked.getFirst().arraySizes()).containsValue(8); // float[] v = new float[vals]
    List<String> defined = new ArrayList<>();
    for (String line : t.translate(requests).split("\n")) {
      if (line.startsWith("// Java: ")) {
        defined.add(line.substring("// Java: ".length(), line.indexOf(" (")));
      }
    }
    List<String> expected = new ArrayList<>();
    Stream.concat(checked.stream().filter(c -> !c.kernel()), checked.stream().filter(SubsetCheck.Checked::kernel))
        .forEach(c -> expected.add(c.source().owner().getQualifiedName() + "." + c.source().method().getName()));
    assertThat(defined).isEqualTo(expected);
  }

  /**
   * Of several refusals, the first in the order the C is written: an assignment's value before its target's index, a
   * for loop's update before its condition, a @Parallel loop's body before its races.
   */
  @Test
  void ofSeveralRefusalsTheFirstInTheOrderOfTheCIsReported() throws Exception {
    String[][] cases = {
        {"for (@Parallel int i = 0; i < n; i++) x[(int) 'a'] = \"ab\".length();", "strings and null"},
        {"for (@Parallel int i = 0; i < n; i++) for (int j = 0; j < \"ab\".length(); j = j + 'a') x[i] = j;",
            "char is not supported on the GPU"},
        {"for (@Parallel int i = 0; i < n; i++) { x[0] += x[i]; switch (n) { default: x[i] = 0f; } }",
            "switch is not supported"}};
    for (String[] c : cases) {
      KernelTranslator t = translator("static void k(float[] x, int n) {\n" + c[0] + "\n}\n");
      List<KernelRequest> k = List.of(new KernelRequest("T", "k", Map.of()));
      assertThatThrownBy(() -> t.check(k)).as(c[0]).hasMessageContaining(c[1])
          .hasMessage(messageOf(() -> t.translate(k)));
    }
  }

  /** A translator over one source file, {@code class T} with {@code code} as its members. */
  private static KernelTranslator translator(String code) throws Exception {
    Path f = Files.createTempDirectory("sc").resolve("T.java");
    Files.writeString(f, "import dev.taco.kernels.Parallel;\nclass T {\n" + code + "\n}\n");
    return new KernelTranslator(List.of(f));
  }

  /** The message of the {@link KernelCompileException} that {@code run} throws. */
  private static String messageOf(Runnable run) {
    try {
      run.run();
    } catch (KernelCompileException e) {
      return e.getMessage();
    }
    throw new AssertionError("no KernelCompileException");
  }
}
