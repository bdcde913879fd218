package dev.taco.kernels.compiler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.compiler.corpus.SemanticsCorpus;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Issue C part 4/5: for every semantics-corpus kernel, runs it on the JVM over fixed inputs and writes
 * {@code gpu-semantics/<kernel>.cu} (standalone program: kernel + inputs + JVM outputs + self-check) and
 * {@code gpu-semantics/<kernel>.expected} (the JVM outputs in hex) into the module, so that
 * {@code gpu-semantics.sh} can compare on a GPU machine without Java. Files are rewritten only when they change;
 * each program is compiled here ({@code nvcc -arch=sm_90 -c}) when nvcc is on PATH.
 */
class GpuSemanticsTest {
  static final Path DIR = Path.of("gpu-semantics");
  static final int N = 512;

  @TestFactory
  Stream<DynamicTest> harnessPerCorpusKernel() throws Exception {
    Files.createDirectories(DIR);
    KernelTranslator t = new KernelTranslator(Corpus.sources());
    return Corpus.SEMANTICS.keySet().stream().sorted().map(k -> DynamicTest.dynamicTest(k, () -> {
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
      String program = GpuHarness.program(unit, k, inputs, expected, N, Corpus.SEMANTICS.get(k));
      writeIfChanged(DIR.resolve(k + ".cu"), program);
      writeIfChanged(DIR.resolve(k + ".expected"), GpuHarness.dump(GpuHarness.parameterNames(unit, k), expected));
      boolean haveNvcc = Nvcc.find() != null;
      assumeTrue(haveNvcc, "nvcc is not on PATH: harness compile check skipped");
      Nvcc.Result r = Nvcc.run(List.of("-arch=sm_90", "-c", "-o", "/dev/null", DIR.resolve(k + ".cu").toString()));
      assertThat(r.exit()).as("nvcc -arch=sm_90 -c %s.cu:%n%s", k, r.log()).isZero();
    }));
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
