package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.compiler.KernelTranslator;
import dev.taco.kernels.cuda.KernelSources;
import dev.taco.runtime.layers.AdamW;
import java.io.File;
import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every training kernel of {@link LayerKernels#unspecialised()} translates with {@link KernelTranslator} (the layer
 * sources under {@code runtime/src/main/java} plus {@code AdamW}; the {@code dev.taco.kernels} classes they use come
 * from the class path) into one CUDA C unit, which compiles with {@code nvcc --ptx -arch=sm_90} and {@code ptxas -v}
 * (skipped with the reason when nvcc is not on PATH) into one entry per kernel with no local memory, stack frame or
 * spills; each {@link LayerKernels#flashKernels()} specialisation the same way in a unit of its own, with its
 * tensor-core products as {@code mma.sync} instructions. The .cu, .ptx and .cubin files are kept in
 * {@code target/generated-cuda/layers}. The catalog holds every {@link Kernel} method of the layer classes, and each
 * request also goes through {@link KernelSources} (the pre-translation path).
 */
class LayerKernelsCudaTest {
  static final Path OUT = Path.of("target/generated-cuda/layers");
  static final Path ROOT = Path.of("src/main/java");
  static final List<Class<?>> CLASSES = List.of(Encoder.class, LayerNorm.class, Matmul.class, Attention.class,
      FlashAttention.class, Gelu.class, Residual.class, CrossEntropy.class, GradNorm.class, AdamW.class);

  static List<Path> sources;
  static String cuda;

  @BeforeAll
  static void translate() throws IOException {
    sources = new ArrayList<>(CLASSES.stream().map(c -> ROOT.resolve(c.getName().replace('.', '/') + ".java"))
        .toList());
    sources.add(Path.of("../tornado-kernels/src/main/java/dev/taco/kernels/Bf16.java")); // roundToBf16 calls it
    cuda = new KernelTranslator(sources).translate(LayerKernels.unspecialised());
    Files.createDirectories(OUT);
    Files.writeString(OUT.resolve("layers.cu"), cuda);
  }

  @Test
  void catalogListsEveryKernelMethodOnce() {
    List<KernelRequest> all = LayerKernels.kernels();
    assertThat(new HashSet<>(all)).hasSameSizeAs(all);
    List<KernelRequest> plain = LayerKernels.unspecialised();
    assertThat(plain).allMatch(r -> r.constants().isEmpty());
    assertThat(new HashSet<>(plain.stream().map(KernelRequest::methodName).toList())).hasSameSizeAs(plain);
    List<String> annotated = new ArrayList<>();
    for (Class<?> c : CLASSES) {
      for (Method m : c.getDeclaredMethods()) {
        if (m.isAnnotationPresent(Kernel.class)) {
          annotated.add(c.getName() + "#" + m.getName());
        }
      }
    }
    assertThat(all.stream().map(r -> r.className() + "#" + r.methodName()).distinct().toList())
        .containsExactlyInAnyOrderElementsOf(annotated);
    assertThat(LayerKernels.flashKernels()).filteredOn(r -> !r.constants().isEmpty())
        .hasSize(3 * LayerKernels.FLASH_HEAD_SIZES.size())
        .allMatch(r -> FlashAttention.supports((Integer) r.constants().get("HS")));
  }

  @Test
  void everyKernelIsAnEntryPointAndTheHelpersAreDeviceFunctions() {
    for (KernelRequest r : LayerKernels.unspecialised()) {
      assertThat(cuda).contains("extern \"C\" __global__ void " + r.methodName() + "(");
    }
    assertThat(cuda).contains("__device__ __forceinline__ float Attention_dot(")
        .contains("__device__ __forceinline__ float Gelu_tanh(");
    assertThat(cuda).doesNotContain("Check_");
    // (float) Math.exp of a float argument in single precision (softmax, cross-entropy, GELU's tanh); the loss's
    // log-sum-exp stays a double expression (one per row)
    assertThat(cuda).contains("expf(").doesNotContain(" exp(").doesNotContain("(exp(").contains("log((double)");
  }

  @Test
  void theCatalogPretranslatesThroughKernelSources() throws IOException {
    Path dir = Files.createDirectories(OUT.resolve("kernel-sources"));
    List<Path> roots = List.of(ROOT, Path.of("../tornado-kernels/src/main/java"));
    List<Path> files = new KernelSources(dir, roots).pretranslate(LayerKernels.kernels());
    assertThat(files).hasSize(LayerKernels.kernels().size()).allMatch(Files::isRegularFile);
    KernelSources reader = new KernelSources(dir, roots); // a fresh instance reads the files, as the GPU machine does
    for (KernelRequest r : LayerKernels.kernels()) {
      assertThat(reader.file(r)).isIn(files);
      assertThat(reader.cudaSource(r)).as(r.toString()).contains("__global__ void " + r.methodName() + "(");
    }
  }

  @Test
  void compilesToPtxWithoutLocalMemoryStackOrSpills() throws Exception {
    Path nvcc = nvcc();
    assumeTrue(nvcc != null, "nvcc is not on PATH: CUDA compile check of the layer kernels skipped");
    Path cu = OUT.resolve("layers.cu");
    Path ptx = OUT.resolve("layers.ptx");
    run(nvcc.toString(), "--ptx", "-arch=sm_90", "-o", ptx.toString(), cu.toString());
    String text = Files.readString(ptx);
    assertThat(text).as("local memory in %s", ptx).doesNotContain("ld.local").doesNotContain("st.local");
    Path ptxas = nvcc.resolveSibling("ptxas");
    String log = run(Files.isExecutable(ptxas) ? ptxas.toString() : "ptxas", "-arch=sm_90", "-v", "-o",
        OUT.resolve("layers.cubin").toString(), ptx.toString());
    Map<String, int[]> usage = usage(log);
    assertThat(usage.keySet()).as(log).containsExactlyInAnyOrderElementsOf(
        LayerKernels.unspecialised().stream().map(KernelRequest::methodName).toList());
    usage.forEach((kernel, u) -> assertThat(u[1]).as("%s stack frame + spill bytes:%n%s", kernel, log).isZero());
    System.out.println("layer kernels, registers per thread: " + usage.entrySet().stream()
        .map(e -> e.getKey() + " " + e.getValue()[0]).toList());
  }

  @Test
  void flashKernelsCompileToTensorCoreCodeWithoutSpills() throws Exception {
    Path nvcc = nvcc();
    assumeTrue(nvcc != null, "nvcc is not on PATH: CUDA compile check of the flash-attention kernels skipped");
    KernelTranslator translator = new KernelTranslator(sources);
    Path ptxas = nvcc.resolveSibling("ptxas");
    List<String> registers = new ArrayList<>();
    for (KernelRequest r : LayerKernels.flashKernels()) {
      String name = r.methodName() + r.constants().values().stream().map(v -> "-" + v).reduce("", String::concat);
      Path cu = OUT.resolve(name + ".cu"), ptx = OUT.resolve(name + ".ptx");
      Files.writeString(cu, translator.translate(List.of(r)));
      run(nvcc.toString(), "--ptx", "-arch=sm_90", "-o", ptx.toString(), cu.toString());
      String text = Files.readString(ptx);
      assertThat(text).as("local memory in %s", ptx).doesNotContain("ld.local").doesNotContain("st.local");
      if (!r.constants().isEmpty()) {
        assertThat(text).as("tensor-core products in %s", ptx).contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16");
      }
      String log = run(Files.isExecutable(ptxas) ? ptxas.toString() : "ptxas", "-arch=sm_90", "-v", "-o",
          OUT.resolve(name + ".cubin").toString(), ptx.toString());
      int[] u = usage(log).get(r.methodName());
      assertThat(u).as(log).isNotNull();
      assertThat(u[1]).as("%s stack frame + spill bytes:%n%s", name, log).isZero();
      registers.add(name + " " + u[0]);
    }
    System.out.println("flash-attention kernels, registers per thread: " + registers);
  }

  static Path nvcc() {
    for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      Path p = Path.of(d, "nvcc");
      if (Files.isExecutable(p)) {
        return p;
      }
    }
    return null;
  }

  static String run(String... command) throws Exception {
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(300, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("%s:%n%s", String.join(" ", command), log).isZero();
    return log;
  }

  /** kernel -> {registers, stack frame + spill bytes} from ptxas -v. */
  static Map<String, int[]> usage(String log) {
    Map<String, int[]> m = new LinkedHashMap<>();
    Matcher e = Pattern.compile("Compiling entry function '(\\w+)'[\\s\\S]*?(\\d+) bytes stack frame, (\\d+) bytes "
        + "spill stores, (\\d+) bytes spill loads[\\s\\S]*?Used (\\d+) registers").matcher(log);
    while (e.find()) {
      m.put(e.group(1), new int[] {Integer.parseInt(e.group(5)),
          Integer.parseInt(e.group(2)) + Integer.parseInt(e.group(3)) + Integer.parseInt(e.group(4))});
    }
    return m;
  }
}
