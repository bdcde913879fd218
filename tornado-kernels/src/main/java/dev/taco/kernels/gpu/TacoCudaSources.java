package dev.taco.kernels.gpu;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.cuda.KernelSources;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The specialisations of {@link TacoGpuKernels} that {@link GpuTacoCodec} launches, as {@link KernelRequest}s (docs/design.md
 * §5: compile-time constants specialise a kernel), one kernel each. Their CUDA C comes from {@link KernelSources} like
 * every Java kernel's: the GPU machine's jlink'd runtime has no {@code jdk.compiler}, so {@link #kernels()} is
 * translated beforehand on the CPU machine ({@code bench/gpu-prepare.sh} runs {@link KernelSources} over the sources
 * of tornado-kernels and runtime into {@code .device/cuda}, for this class and the other kernel lists); where a JDK
 * and the kernel sources are at hand (tests, a CPU machine) a missing file is translated on the spot.
 */
public final class TacoCudaSources {
  private TacoCudaSources() {}

  /** Supported group sizes. */
  public static final List<Integer> GROUP_SIZES = List.of(64, 128, 256);

  /** {@link TacoGpuKernels#compress} for G, Hadamard, format ({@link Fp8#E4M3} or {@link Fp8#E5M2}) and input type. */
  public static KernelRequest compress(int groupSize, boolean hadamard, int format, boolean bf16) {
    return request("compress", "groupSize", groupSize, "hadamard", hadamard, "format", format, "bf16", bf16);
  }

  /** {@link TacoGpuKernels#decompress}; {@code accumulate} (decompress-reduce) needs fp32 output. */
  public static KernelRequest decompress(int groupSize, boolean hadamard, int format, boolean bf16,
      boolean accumulate) {
    return request("decompress", "groupSize", groupSize, "hadamard", hadamard, "format", format, "bf16", bf16,
        "accumulate", accumulate);
  }

  /** {@link TacoGpuKernels#unfusedStats}, step 1 of the unfused ablation. */
  public static KernelRequest unfusedStats(int groupSize, boolean hadamard, int format, boolean bf16) {
    return request("unfusedStats", "groupSize", groupSize, "hadamard", hadamard, "format", format, "bf16", bf16);
  }

  /** {@link TacoGpuKernels#unfusedTransform}, step 2 (independent of the format). */
  public static KernelRequest unfusedTransform(int groupSize, boolean hadamard, boolean bf16) {
    return request("unfusedTransform", "groupSize", groupSize, "hadamard", hadamard, "bf16", bf16);
  }

  /** {@link TacoGpuKernels#unfusedEncode}, step 3 (independent of Hadamard and input type). */
  public static KernelRequest unfusedEncode(int groupSize, int format) {
    return request("unfusedEncode", "groupSize", groupSize, "format", format);
  }

  private static KernelRequest request(String method, Object... nameValue) {
    Map<String, Object> constants = new java.util.HashMap<>();
    for (int i = 0; i < nameValue.length; i += 2) {
      constants.put((String) nameValue[i], nameValue[i + 1]);
    }
    return KernelRequest.of(TacoGpuKernels.class, method, constants);
  }

  /**
   * Every specialisation the GPU codec can launch: {@link #GROUP_SIZES} x Hadamard on/off x E4M3/E5M2 x bf16/fp32
   * for each kernel, plus the fp32 decompress-reduce; each once. The list {@code KernelSources}' build step
   * pre-translates.
   *
   * @return the requests, in a fixed order
   */
  public static List<KernelRequest> kernels() {
    Set<KernelRequest> all = new LinkedHashSet<>();
    for (int g : GROUP_SIZES) {
      for (boolean h : new boolean[] {true, false}) {
        for (int f : new int[] {Fp8.E4M3, Fp8.E5M2}) {
          for (boolean bf16 : new boolean[] {true, false}) {
            all.add(compress(g, h, f, bf16));
            all.add(decompress(g, h, f, bf16, false));
            all.add(unfusedStats(g, h, f, bf16));
            all.add(unfusedTransform(g, h, bf16));
            all.add(unfusedEncode(g, f));
          }
          all.add(decompress(g, h, f, false, true));
        }
      }
    }
    return new ArrayList<>(all);
  }
}
