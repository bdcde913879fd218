package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.compiler.KernelTranslator;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every unit of {@link TwoShotGpuKernels#units()} and of {@link GroupTwoShotKernels#fp4Units()} (the E2M1 kernels)
 * translates, and compiles with {@code nvcc --ptx -arch=sm_90} and {@code ptxas -v} (skipped with the reason when nvcc
 * is not on PATH): no local memory in the PTX and no stack frame or spills after ptxas (the register arrays stay in
 * registers), at most 128 registers a thread in the row kernels (512-thread blocks at cols = 16384 must fit the 64 K
 * registers of an SM), 16-byte global loads and stores in the row kernels. The .cu files are kept in
 * {@code target/generated-cuda/twoshot}.
 */
class TwoShotGpuCudaTest {
  static final Path OUT = Path.of("target/generated-cuda/twoshot");
  static KernelTranslator translator;

  @BeforeAll
  static void translator() {
    Path root = Path.of("src/main/java");
    Path k = root.resolve("dev/taco/kernels");
    translator = new KernelTranslator(java.util.stream.Stream.of("gpu/TacoGpuKernels", "gpu/TwoShotGpuKernels",
        "gpu/GroupTwoShotKernels", "Fp8", "Fp4", "Bf16", "Bytes", "Hadamard", "TacoKernels", "GroupKernels", "Vec16",
        "KernelContext").map(f -> k.resolve(f + ".java")).toList());
  }

  static Stream<Arguments> units() {
    return Stream.concat(TwoShotGpuKernels.units().entrySet().stream(),
        GroupTwoShotKernels.fp4Units().entrySet().stream()).map(e -> Arguments.of(e.getKey(), e.getValue()));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("units")
  void translatesAndCompilesWithoutStackOrSpills(String key, List<KernelRequest> requests) throws Exception {
    Files.createDirectories(OUT);
    Path cu = OUT.resolve(key + ".cu");
    String source = translator.translate(requests);
    Files.writeString(cu, source);
    for (KernelRequest r : requests) {
      assertThat(source).contains("__global__ void " + r.methodName() + "(");
    }
    Path nvcc = TacoCudaSourcesNvccTest.nvcc();
    assumeTrue(nvcc != null, "nvcc is not on PATH: CUDA compile check skipped");
    Path ptx = OUT.resolve(key + ".ptx");
    run(nvcc.toString(), "--ptx", "-arch=sm_90", "-o", ptx.toString(), cu.toString());
    String text = Files.readString(ptx);
    assertThat(text).as("local memory in %s", ptx).doesNotContain("ld.local").doesNotContain("st.local");
    if (!key.startsWith("twoshot-layout")) {
      assertThat(text).as("16-byte global accesses in %s", ptx).containsPattern("ld\\.global(\\.nc)?\\.v4")
          .containsPattern("st\\.global\\.v4");
    }
    Path ptxas = nvcc.resolveSibling("ptxas");
    String log = run(Files.isExecutable(ptxas) ? ptxas.toString() : "ptxas", "-arch=sm_90", "-v", "-o",
        OUT.resolve(key + ".cubin").toString(), ptx.toString());
    Map<String, int[]> usage = usage(log);
    assertThat(usage.keySet()).as(log).containsExactlyInAnyOrderElementsOf(
        requests.stream().map(KernelRequest::methodName).toList());
    usage.forEach((kernel, u) -> {
      assertThat(u[1]).as("%s %s stack frame / spills:%n%s", key, kernel, log).isZero();
      if (!kernel.equals("permuteCols") && !kernel.equals("transpose")) {
        assertThat(u[0]).as("%s %s registers", key, kernel).isLessThanOrEqualTo(128);
      }
    });
    System.out.println(key + ": " + usage.entrySet().stream().map(e -> e.getKey() + " " + e.getValue()[0] + " regs")
        .toList());
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
    Map<String, int[]> m = new java.util.LinkedHashMap<>();
    Matcher e = Pattern
        .compile("Compiling entry function '(\\w+)'[\\s\\S]*?(\\d+) bytes stack frame, (\\d+) bytes spill "
            + "stores, (\\d+) bytes spill loads[\\s\\S]*?Used (\\d+) registers")
        .matcher(log);
    while (e.find()) {
      m.put(e.group(1), new int[] {Integer.parseInt(e.group(5)),
          Integer.parseInt(e.group(2)) + Integer.parseInt(e.group(3)) + Integer.parseInt(e.group(4))});
    }
    return m;
  }

  @Test
  void catalogCoversEveryCombination() {
    assertThat(TwoShotGpuKernels.units()).hasSize(4 * 2 * 2 * 2 + 2 * 2 + 2);
    List<KernelRequest> all = TwoShotGpuKernels.kernels();
    assertThat(all).hasSize(32 * 4 + 4 * 4 + 2 * 2);
    assertThat(new ArrayList<>(all.stream().map(r -> r.methodName()).distinct().toList())).containsExactlyInAnyOrder(
        "compressRows", "reduceCompressRows", "reduceRows", "decompressRows", "packRows", "reducePackRows",
        "reduceRowsRaw", "unpackRows", "permuteCols", "transpose");
    assertThat(TwoShotGpuKernels.key(32, false, 2, true)).isEqualTo("twoshot-g32-h0-f2-bf16");
    assertThat(TwoShotGpuKernels.rawKey(TwoShotGpuKernels.RAW_FP32, false)).isEqualTo("twoshot-raw-w4-f32");
  }
}
