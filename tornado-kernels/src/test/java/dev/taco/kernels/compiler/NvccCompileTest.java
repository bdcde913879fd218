package dev.taco.kernels.compiler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The compiler's output builds (docs/design.md §5): every corpus kernel and every supported codec kernel, translated and
 * compiled with {@code nvcc -cubin -arch=sm_90} (ptxas included) when nvcc is on PATH (skipped with the reason
 * otherwise). The .cu files are kept in {@code target/generated-cuda} for inspection.
 */
class NvccCompileTest {
  static final Path OUT = Path.of("target/generated-cuda");

  @TestFactory
  Stream<DynamicTest> everyKernelCompilesWithNvcc() throws Exception {
    Files.createDirectories(OUT);
    KernelTranslator t = new KernelTranslator(Corpus.sources());
    List<KernelRequest> all = Corpus.allKernels();
    return all.stream().map(r -> DynamicTest.dynamicTest(r.className() + "." + r.methodName(), () -> {
      Path cu = OUT.resolve(r.methodName() + ".cu");
      Files.writeString(cu, t.translate(List.of(r)));
      boolean haveNvcc = Nvcc.find() != null;
      if (!haveNvcc) {
        System.err.println("SKIPPED nvcc check of " + cu + ": nvcc is not on PATH");
      }
      assumeTrue(haveNvcc, "nvcc is not on PATH: CUDA compile check skipped");
      // -cubin runs ptxas too, which checks the inline PTX (ldmatrix, cp.async, mma) that --ptx passes through
      Nvcc.Result res = Nvcc.run(List.of("-cubin", "-arch=sm_90", "-o", "/dev/null", cu.toString()));
      assertThat(res.exit()).as("nvcc -cubin -arch=sm_90 %s:%n%s", cu, res.log()).isZero();
    }));
  }
}
