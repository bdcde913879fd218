package dev.taco.kernels.compiler;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The build-time driver {@link KernelTranslator#main}: source root in, one .cu per kernel out. */
class KernelTranslatorDriverTest {
  @Test
  void translatesNamedKernelsAndAllKernelsOfAClass() throws Exception {
    Path out = Path.of("target/driver-test");
    assertThat(KernelTranslator.run(new String[] {"src/main/java", out.toString(),
        "dev.taco.kernels.TacoKernels#decodeGroups", "dev.taco.kernels.GroupKernels#encode"})).isZero();
    assertThat(Files.readString(out.resolve("decodeGroups.cu"))).contains("extern \"C\" __global__ void decodeGroups(");
    assertThat(out.resolve("encode.cu")).exists();
    assertThat(KernelTranslator
        .run(new String[] {"src/main/java:src/test/java/dev/taco/kernels/compiler/corpus", out.toString(),
            "dev.taco.kernels.compiler.corpus.SimtCorpus#compressWarp:vals=8",
            "dev.taco.kernels.compiler.corpus.SemanticsCorpus"}))
        .isZero();
    assertThat(Files.readString(out.resolve("compressWarp.cu"))).contains("constexpr int vals = 8;");
    assertThat(out.resolve("fp8.cu")).exists();
    assertThat(out.resolve("intArith.cu")).exists();
  }

  @Test
  void reportsTheFirstErrorWithStatus1() throws Exception {
    assertThat(KernelTranslator.run(new String[] {"src/test/resources/unsupported", "target/driver-test",
        "unsupported.Strings#k"})).isEqualTo(1);
  }

  @Test
  void parsesSpecialisations() {
    KernelRequest r = KernelTranslator.parseRequest("a.B#k:g=256,big=5L,flag=true");
    assertThat(r.className()).isEqualTo("a.B");
    assertThat(r.methodName()).isEqualTo("k");
    assertThat(r.constants()).isEqualTo(Map.of("g", 256, "big", 5L, "flag", true));
  }
}
