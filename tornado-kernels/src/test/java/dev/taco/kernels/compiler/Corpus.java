package dev.taco.kernels.compiler;

import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.compiler.corpus.SemanticsCorpus;
import dev.taco.kernels.compiler.corpus.SimtCorpus;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** The kernels the tests translate: the corpora, and the codec kernels of dev.taco.kernels the translator supports. */
final class Corpus {
  private Corpus() {}

  static final Path MAIN = Path.of("src/main/java/dev/taco/kernels");
  static final Path TEST = Path.of("src/test/java/dev/taco/kernels/compiler/corpus");

  static List<Path> sources() {
    return List.of(MAIN.resolve("Parallel.java"), MAIN.resolve("Kernel.java"), MAIN.resolve("Constant.java"),
        MAIN.resolve("KernelContext.java"), MAIN.resolve("Fp8.java"), MAIN.resolve("Fp4.java"),
        MAIN.resolve("Bf16.java"),
        MAIN.resolve("Bytes.java"), MAIN.resolve("Hadamard.java"), MAIN.resolve("TacoKernels.java"),
        MAIN.resolve("GroupKernels.java"), TEST.resolve("SemanticsCorpus.java"), TEST.resolve("SimtCorpus.java"));
  }

  /** Semantics kernels (harness convention of SemanticsCorpus), with their ulp tolerance for float outputs. */
  static final Map<String, Integer> SEMANTICS = Map.ofEntries(Map.entry("intArith", 0), Map.entry("shifts", 0),
      Map.entry("longArith", 0), Map.entry("casts", 0), Map.entry("mathExact", 0), Map.entry("transcendental", 4),
      Map.entry("fp8", 0), Map.entry("fp4", 0), Map.entry("bf16", 0), Map.entry("bytes", 0), Map.entry("grouping", 0));

  /**
   * Kernels whose float outputs come from floating-point arithmetic on NaN inputs: the NaN's payload and sign are not
   * specified by Java (JLS §4.2.3, "NaN" values are indistinguishable except through the raw-bits methods) nor by
   * IEEE 754 for arithmetic results, and differ between x86 (JVM) and NVIDIA GPUs (canonical 0x7fffffff); so any NaN
   * matches any NaN there. Kernels that need exact NaN bits (Fp8, Bf16) compute them with integer code and are
   * compared bit for bit.
   */
  static final java.util.Set<String> ANY_NAN = java.util.Set.of("mathExact", "transcendental", "grouping");

  /** Every kernel checked by nvcc, one translation unit each. */
  static List<KernelRequest> allKernels() {
    List<KernelRequest> all = new java.util.ArrayList<>();
    SEMANTICS.keySet().stream().sorted().forEach(k -> all.add(KernelRequest.of(SemanticsCorpus.class, k)));
    for (String k : List.of("blockSum", "blockReverse", "warpHadamard", "tensorCoreTile")) {
      all.add(KernelRequest.of(SimtCorpus.class, k));
    }
    all.add(KernelRequest.of(SimtCorpus.class, "compressWarp", Map.of("vals", 8)));
    for (String k : List.of("rowScales", "encodeGroups", "decodeGroups")) {
      all.add(KernelRequest.of(TacoKernels.class, k));
    }
    all.add(KernelRequest.of(GroupKernels.class, "encode"));
    all.add(KernelRequest.of(GroupKernels.class, "decode"));
    return all;
  }
}
