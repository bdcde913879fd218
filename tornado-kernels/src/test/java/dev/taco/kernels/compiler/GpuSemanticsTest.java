package dev.taco.kernels.compiler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.compiler.corpus.SemanticsCorpus;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The semantics corpus (docs/design.md §5). For every {@link SemanticsCorpus} kernel: runs it on the JVM over fixed
 * inputs ({@link TestValues}) and writes {@code gpu-semantics/<kernel>.cu} (a standalone program: translated
 * kernel, inputs, JVM outputs, self-check; see {@link GpuHarness}) and {@code gpu-semantics/<kernel>.expected} (JVM
 * outputs in hex) into the module; files are rewritten only when they change. Then two checks per kernel:
 * <ul>
 *   <li><b>host</b>: g++ compiles the program with {@code src/test/resources/cuda/host_shim.h} (CUDA built-ins
 *       replaced by their IEEE definitions, the grid run sequentially) and runs it: the translated C must give the
 *       JVM's bits for every input. This checks the translator's Java semantics without a GPU; skipped without g++.
 *   <li><b>nvcc</b>: {@code nvcc -arch=sm_90 -c} compiles the program; skipped without nvcc.
 * </ul>
 * Running the programs on a GPU is {@code gpu-semantics.sh}'s job.
 */
class GpuSemanticsTest {
  static final Path DIR = Path.of("gpu-semantics");
  static final int N = 512;
  static final Path GXX = Path.of("/usr/bin/g++");

  @TestFactory
  Stream<DynamicTest> semanticsCorpus() throws Exception {
    Files.createDirectories(DIR);
    Path bin = Files.createDirectories(Path.of("target/host-shim"));
    KernelTranslator t = new KernelTranslator(Corpus.sources());
    List<DynamicTest> tests = new ArrayList<>();
    for (String k : Corpus.SEMANTICS.keySet().stream().sorted().toList()) {
      Path cu = writeProgram(t, k);
      tests.add(DynamicTest.dynamicTest(k + ": host", () -> {
        assumeTrue(Files.isExecutable(GXX), "g++ not found: host check of the translation skipped");
        Path exe = bin.resolve(k);
        run(List.of(GXX.toString(), "-std=c++17", "-O1", "-ffp-contract=off", "-w", "-DHOST_SHIM", "-include",
            Path.of("src/test/resources/cuda/host_shim.h").toAbsolutePath().toString(), "-x", "c++", "-o",
            exe.toString(), cu.toString()), false);
        assertThat(run(List.of(exe.toString()), true)).contains(k + ": 0 mismatches");
      }));
      tests.add(DynamicTest.dynamicTest(k + ": nvcc", () -> {
        assumeTrue(Nvcc.find() != null, "nvcc is not on PATH: harness compile check skipped");
        Nvcc.Result r = Nvcc.run(List.of("-arch=sm_90", "-c", "-o", "/dev/null", cu.toString()));
        assertThat(r.exit()).as("nvcc -arch=sm_90 -c %s:%n%s", cu, r.log()).isZero();
      }));
    }
    return tests.stream();
  }

  private static Path writeProgram(KernelTranslator t, String k) throws Exception {
    Method m = Arrays.stream(SemanticsCorpus.class.getMethods()).filter(x -> x.getName().equals(k)).findFirst()
        .orElseThrow();
    Class<?>[] types = m.getParameterTypes();
    Object[] inputs = new Object[types.length - 1];
    Object[] args = new Object[types.length];
    for (int p = 0; p < inputs.length; p++) {
      inputs[p] = TestValues.array(types[p].getComponentType(), N, p, k.hashCode());
      args[p] = cloneArray(inputs[p]);
    }
    args[inputs.length] = N;
    m.invoke(null, args);
    Object[] expected = Arrays.copyOf(args, inputs.length);
    String unit = t.translate(List.of(KernelRequest.of(SemanticsCorpus.class, k)));
    Path cu = DIR.resolve(k + ".cu");
    String program = GpuHarness.program(unit, k, inputs, expected, N, Corpus.SEMANTICS.get(k),
        Corpus.ANY_NAN.contains(k));
    writeIfChanged(cu, sharePrelude(program));
    writeIfChanged(DIR.resolve(k + ".expected"), GpuHarness.dump(GpuHarness.parameterNames(unit, k), expected));
    return cu;
  }

  /**
   * Moves the translator's Java-semantics helpers (the same text in every program) into {@code java_semantics.cuh}
   * beside the programs, and includes that instead: one copy of the helpers, not one per kernel.
   *
   * @throws AssertionError if two programs carry different helpers (the shared header would then be wrong)
   */
  private static String sharePrelude(String program) throws Exception {
    int a = program.indexOf(PRELUDE_START), b = program.indexOf(PRELUDE_END);
    assertThat(a).as("helpers block in the generated program").isNotNegative();
    assertThat(b).isGreaterThan(a);
    b += PRELUDE_END.length();
    String prelude = program.substring(a, b) + "\n";
    synchronized (GpuSemanticsTest.class) {
      if (sharedPrelude == null) {
        sharedPrelude = prelude;
        writeIfChanged(DIR.resolve(PRELUDE_FILE), prelude);
      }
      assertThat(prelude).as("helpers differ between kernels").isEqualTo(sharedPrelude);
    }
    return program.substring(0, a) + "#include \"" + PRELUDE_FILE + "\"" + program.substring(b);
  }

  private static final String PRELUDE_START = "// ---- Java semantics helpers";
  private static final String PRELUDE_END = "// ---- end of helpers ----";
  private static final String PRELUDE_FILE = "java_semantics.cuh";
  private static String sharedPrelude;

  /** Runs a command, asserts exit 0, returns its stderr (when stdout is discarded) or its combined output. */
  private static String run(List<String> cmd, boolean discardStdout) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(cmd);
    if (discardStdout) {
      pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    } else {
      pb.redirectErrorStream(true);
    }
    Process p = pb.start();
    String text = new String((discardStdout ? p.getErrorStream() : p.getInputStream()).readAllBytes(),
        StandardCharsets.UTF_8);
    int exit = p.waitFor();
    assertThat(exit).as("%s exited %d:%n%s", cmd, exit, text.length() > 4000 ? text.substring(0, 4000) : text)
        .isZero();
    return text;
  }

  private static Object cloneArray(Object a) {
    int n = java.lang.reflect.Array.getLength(a);
    Object c = java.lang.reflect.Array.newInstance(a.getClass().getComponentType(), n);
    System.arraycopy(a, 0, c, 0, n);
    return c;
  }

  private static void writeIfChanged(Path p, String text) throws Exception {
    if (!Files.exists(p) || !Files.readString(p).equals(text)) {
      Files.writeString(p, text);
    }
  }
}
