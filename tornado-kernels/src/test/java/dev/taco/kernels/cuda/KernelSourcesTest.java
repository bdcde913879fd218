package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.gpu.TacoCudaSources;
import dev.taco.kernels.gpu.TacoGpuKernels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link KernelSources}: keys deterministic per request and changed by any source a kernel may call, a pre-translated
 * file preferred to translating, a clear error when there is neither, and the build step writing the files that a
 * runtime without sources or {@code jdk.compiler} then reads.
 */
class KernelSourcesTest {
  static final KernelRequest COMPRESS = TacoCudaSources.compress(64, true, Fp8.E4M3, true);
  static final List<Path> MAIN = List.of(Path.of("src/main/java"));

  @TempDir
  Path dir;

  @Test
  void theSourceSetIsWhatTheKernelCanCall() {
    List<String> set = new KernelSources(dir, MAIN).sourceSet(TacoGpuKernels.class.getName());
    System.out.println("source set of TacoGpuKernels: " + set);
    assertThat(set).contains(TacoGpuKernels.class.getName(), "dev.taco.kernels.TacoKernels", "dev.taco.kernels.Fp8",
        "dev.taco.kernels.Bf16", "dev.taco.kernels.KernelContext", "dev.taco.kernels.Vec16",
        "dev.taco.kernels.Constant")
        .doesNotContain("dev.taco.kernels.gpu.GpuTacoCodec", "dev.taco.kernels.cpu.SimtEmulator",
            "dev.taco.kernels.cuda.TaskGraph");
  }

  /**
   * A user's kernel in a package of their own calling a helper class of theirs: both are in the source set (their
   * sources under the root) and the helper is translated with the kernel; an edit to the helper changes the key.
   */
  @Test
  void aUsersOwnHelperClassesArePartOfTheSourceSet() throws Exception {
    Path root = dir.resolve("user-src"), classes = dir.resolve("user-classes");
    Files.createDirectories(root.resolve("my"));
    Files.writeString(root.resolve("my/Helpers.java"),
        "package my;\npublic final class Helpers {\n  public static float twice(float v) { return 2f * v; }\n}\n");
    Files.writeString(root.resolve("my/UseHelper.java"), """
        package my;
        import dev.taco.kernels.Constant;
        import dev.taco.kernels.KernelContext;
        import dev.taco.kernels.Parallel;
        public final class UseHelper {
          public static void k(float[] x, float[] y, int n) {
            for (@Parallel int i = 0; i < n; i++) y[i] = Helpers.twice(x[i]);
          }
          public static void scaled(KernelContext ctx, float[] x, float[] y, @Constant int factor) {
            int i = ctx.globalIdx;
            y[i] = factor * x[i];
          }
        }
        """);
    javax.tools.JavaCompiler javac = javax.tools.ToolProvider.getSystemJavaCompiler();
    int rc = javac.run(null, null, null, "-parameters", "-d", classes.toString(), "-cp",
        System.getProperty("java.class.path"), root.resolve("my/Helpers.java").toString(),
        root.resolve("my/UseHelper.java").toString());
    assertThat(rc).as("javac").isZero();
    Thread t = Thread.currentThread();
    ClassLoader before = t.getContextClassLoader();
    try (java.net.URLClassLoader user = new java.net.URLClassLoader(new java.net.URL[] {classes.toUri().toURL()},
        before)) {
      t.setContextClassLoader(user);
      // only the user's own root, as README shows: the project's sources (KernelContext, Constant) come from its jar
      KernelSources ks = new KernelSources(dir.resolve("cuda"), List.of(root));
      assertThat(ks.sourceSet("my.UseHelper")).contains("my.Helpers", "my.UseHelper", KernelContext.class.getName());
      assertThat(ks.cudaSource(new KernelRequest("my.UseHelper", "scaled", java.util.Map.of("factor", 3))))
          .contains("__global__ void scaled(").contains("factor = 3");
      KernelRequest k = new KernelRequest("my.UseHelper", "k", java.util.Map.of());
      String key = ks.key(k);
      assertThat(ks.cudaSource(k)).contains("__global__ void k(").contains("Helpers_twice(");
      Files.writeString(root.resolve("my/Helpers.java"), "// edited\n", StandardOpenOption.APPEND);
      assertThat(new KernelSources(dir.resolve("cuda"), List.of(root)).key(k)).isNotEqualTo(key);
    } finally {
      t.setContextClassLoader(before);
    }
  }

  @Test
  void keysAreDeterministicPerRequest() {
    KernelSources fromFiles = new KernelSources(dir, MAIN);
    KernelSources fromJar = new KernelSources(dir.resolve("elsewhere"), List.of()); // the sources the jar carries
    String key = fromFiles.key(COMPRESS);
    assertThat(key).matches("[0-9a-f]{64}").isEqualTo(fromJar.key(COMPRESS))
        .isEqualTo(new KernelSources(dir, MAIN).key(TacoCudaSources.compress(64, true, Fp8.E4M3, true)));
    assertThat(fromFiles.key(TacoCudaSources.compress(128, true, Fp8.E4M3, true))).isNotEqualTo(key);
    assertThat(fromFiles.key(TacoCudaSources.compress(64, true, Fp8.E4M3, false))).isNotEqualTo(key);
    assertThat(fromFiles.file(COMPRESS)).isEqualTo(dir.resolve("TacoGpuKernels.compress-" + key + ".cu"));
  }

  @Test
  void keysChangeWhenASourceTheKernelMayCallChanges() throws Exception {
    Path root = dir.resolve("src");
    for (String c : new KernelSources(dir, MAIN).sourceSet(TacoGpuKernels.class.getName())) {
      String rel = c.replace('.', '/') + ".java";
      Files.createDirectories(root.resolve(rel).getParent());
      Files.copy(MAIN.get(0).resolve(rel), root.resolve(rel));
    }
    String key = new KernelSources(dir, List.of(root)).key(COMPRESS);
    assertThat(key).isEqualTo(new KernelSources(dir, MAIN).key(COMPRESS));
    Files.writeString(root.resolve("dev/taco/kernels/Fp8.java"), "// edited\n", StandardOpenOption.APPEND);
    String edited = new KernelSources(dir, List.of(root)).key(COMPRESS);
    assertThat(edited).isNotEqualTo(key);
    Files.writeString(root.resolve("dev/taco/kernels/gpu/TacoGpuKernels.java"), "// edited\n",
        StandardOpenOption.APPEND);
    assertThat(new KernelSources(dir, List.of(root)).key(COMPRESS)).isNotEqualTo(key).isNotEqualTo(edited);
  }

  @Test
  void aPreTranslatedFileIsPreferred() throws Exception {
    KernelSources ks = new KernelSources(dir, MAIN);
    Files.writeString(ks.file(COMPRESS), "// pre-translated\n");
    assertThat(ks.cudaSource(COMPRESS)).isEqualTo("// pre-translated\n");
  }

  /**
   * With no source roots the project's kernels translate from the sources their jar carries, to the same CUDA C as from
   * the source files; a class whose source is nowhere is named.
   */
  @Test
  void withoutSourceRootsTheJarsSourcesTranslateAndAMissingSourceIsNamed() {
    KernelSources ks = new KernelSources(dir, List.of());
    String fromJar = ks.cudaSource(COMPRESS);
    assertThat(fromJar).contains("extern \"C\" __global__ void compress(")
        .contains("(dev/taco/kernels/gpu/TacoGpuKernels.java:"); // the comments name the source under its root
    String fromFiles = new KernelSources(dir.resolve("other"), MAIN).cudaSource(COMPRESS);
    assertThat(fromJar.replace("(dev/taco/", "(src/main/java/dev/taco/")).isEqualTo(fromFiles);
    assertThat(ks.file(COMPRESS)).doesNotExist(); // translated in memory, written only by pretranslate
    assertThatThrownBy(() -> ks.key(KernelRequest.of(LaneKernels.class, "scale")))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("no source of dev.taco.kernels.cuda.LaneKernels");
  }

  /** The build step's input: a class with {@code static List<KernelRequest> kernels()}. */
  public static final class Specs {
    private Specs() {}

    /** @return two TACO kernels */
    public static List<KernelRequest> kernels() {
      return List.of(COMPRESS, TacoCudaSources.unfusedEncode(64, Fp8.E4M3), COMPRESS);
    }
  }

  @Test
  void theBuildStepWritesWhatARuntimeWithoutSourcesReads() throws Exception {
    Path out = dir.resolve("cuda");
    assertThat(KernelSources.run(new String[] {"src/main/java", out.toString(), Specs.class.getName()})).isZero();
    KernelSources gpuMachine = new KernelSources(out, List.of());
    try (var files = Files.list(out)) {
      assertThat(files.map(p -> p.getFileName().toString())).containsExactlyInAnyOrder(
          gpuMachine.file(COMPRESS).getFileName().toString(),
          gpuMachine.file(TacoCudaSources.unfusedEncode(64, Fp8.E4M3)).getFileName().toString());
    }
    String cuda = gpuMachine.cudaSource(COMPRESS);
    assertThat(cuda).contains("extern \"C\" __global__ void compress(").contains("// Kernels: " + TacoGpuKernels.class
        .getName() + ".compress {bf16=true, format=1, groupSize=64, hadamard=true}");
    assertThat(KernelSources.run(new String[] {"src/main/java"})).isEqualTo(2);
  }
}
