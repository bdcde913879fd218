package dev.taco.kernels.gpu;

import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.compiler.KernelTranslator;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The CUDA C of {@link TacoGpuKernels}, one translation unit per specialisation (DESIGN §5: Java kernel → CUDA C →
 * NVRTC at first use). The GPU machine's jlink'd runtime has no {@code jdk.compiler}, so the units are translated
 * on the CPU machine by {@link #main} ({@code bench/gpu-codec-prepare.sh} writes them to {@code .device/cuda/}, which
 * travels with the bundle) and read from there; where a JDK and the kernel sources are at hand (tests, a CPU
 * machine) a missing unit is translated on the spot.
 *
 * <p>A unit holds the entries {@code compress}, {@code decompress}, {@code unfusedStats}, {@code unfusedTransform}
 * and {@code unfusedEncode} specialised for (G, Hadamard, format, bf16 in/out); the "reduce" unit holds
 * {@code decompress} with fp32 output and {@code accumulate}.
 */
public final class TacoCudaSources {
  private TacoCudaSources() {}

  /** Supported group sizes. */
  public static final List<Integer> GROUP_SIZES = List.of(64, 128, 256);

  /** Where the pre-translated units are read: {@code -Dtaco.cuda.dir}, else {@code $TACO_CUDA_DIR}, else {@code .device/cuda}. */
  public static Path cudaDir() {
    String d = System.getProperty("taco.cuda.dir", System.getenv("TACO_CUDA_DIR"));
    return Path.of(d == null || d.isEmpty() ? ".device/cuda" : d);
  }

  /**
   * The unit's key, e.g. {@code taco-g256-h0-f1-bf16} or {@code taco-g64-h1-f1-reduce}.
   *
   * @param reduce the decompress-reduce unit (fp32, accumulate) instead of the main one
   */
  public static String key(int groupSize, boolean hadamard, int format, boolean bf16, boolean reduce) {
    return "taco-g" + groupSize + "-h" + (hadamard ? 1 : 0) + "-f" + format + "-"
        + (reduce ? "reduce" : bf16 ? "bf16" : "f32");
  }

  /** The kernels of one unit (see class doc). */
  static List<KernelRequest> requests(int groupSize, boolean hadamard, int format, boolean bf16, boolean reduce) {
    Class<?> k = TacoGpuKernels.class;
    Map<String, Object> spec = Map.of("groupSize", groupSize, "hadamard", hadamard, "format", format);
    if (reduce) {
      return List.of(KernelRequest.of(k, "decompress", with(spec, "bf16", false, "accumulate", true)));
    }
    Map<String, Object> io = with(spec, "bf16", bf16);
    return List.of(KernelRequest.of(k, "compress", io),
        KernelRequest.of(k, "decompress", with(io, "accumulate", false)),
        KernelRequest.of(k, "unfusedStats", io),
        KernelRequest.of(k, "unfusedTransform", Map.of("groupSize", groupSize, "hadamard", hadamard, "bf16", bf16)),
        KernelRequest.of(k, "unfusedEncode", Map.of("groupSize", groupSize, "format", format)));
  }

  private static Map<String, Object> with(Map<String, Object> m, Object... kv) {
    Map<String, Object> r = new java.util.HashMap<>(m);
    for (int i = 0; i < kv.length; i += 2) {
      r.put((String) kv[i], kv[i + 1]);
    }
    return r;
  }

  /**
   * The CUDA C of a unit: {@code <cudaDir>/<key>.cu}, else a fresh translation.
   *
   * @throws IllegalStateException if there is neither a file nor a JDK compiler and kernel sources to translate
   */
  public static String source(int groupSize, boolean hadamard, int format, boolean bf16, boolean reduce) {
    return source(key(groupSize, hadamard, format, bf16, reduce), requests(groupSize, hadamard, format, bf16, reduce));
  }

  /**
   * The CUDA C of the unit {@code key} holding {@code requests} (kernels of {@link TacoGpuKernels} or
   * {@link TwoShotGpuKernels}, e.g. one of {@link TwoShotGpuKernels#units()}): {@code <cudaDir>/<key>.cu}, else a
   * fresh translation.
   *
   * @throws IllegalStateException if there is neither a file nor a JDK compiler and kernel sources to translate
   */
  public static String source(String key, List<KernelRequest> requests) {
    Path file = cudaDir().resolve(key + ".cu");
    if (Files.isRegularFile(file)) {
      try {
        return Files.readString(file);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    Path root = Stream.of(System.getProperty("taco.kernel.sources", ""), "tornado-kernels/src/main/java",
        "src/main/java").filter(s -> !s.isEmpty()).map(Path::of)
        .filter(p -> Files.isRegularFile(p.resolve(kernelFile()))).findFirst()
        .orElseThrow(() -> new IllegalStateException("no " + file + " and no kernel sources to translate: run "
            + "bench/gpu-codec-prepare.sh on the CPU machine (or set -Dtaco.cuda.dir / -Dtaco.kernel.sources)"));
    return translator(root).translate(requests);
  }

  private static String kernelFile() {
    return TacoGpuKernels.class.getName().replace('.', '/') + ".java";
  }

  /** A translator over the kernel file and the dev.taco.kernels sources it calls. */
  static KernelTranslator translator(Path root) {
    Path k = root.resolve("dev/taco/kernels");
    return new KernelTranslator(List.of(root.resolve(kernelFile()),
        root.resolve(TwoShotGpuKernels.class.getName().replace('.', '/') + ".java"), k.resolve("Fp8.java"),
        k.resolve("Bf16.java"),
        k.resolve("Bytes.java"), k.resolve("Hadamard.java"), k.resolve("TacoKernels.java"),
        k.resolve("Vec16.java"), k.resolve("KernelContext.java")));
  }

  /**
   * Build step: {@code TacoCudaSources <source-root> <out-dir>} writes every unit ({@link #GROUP_SIZES} x Hadamard
   * on/off x E4M3/E5M2 x bf16/fp32, plus the reduce units, plus {@link TwoShotGpuKernels#units()}) as
   * {@code <out-dir>/<key>.cu}.
   */
  public static void main(String[] args) throws IOException {
    KernelTranslator t = translator(Path.of(args[0]));
    Path out = Files.createDirectories(Path.of(args[1]));
    List<String> written = new ArrayList<>();
    for (int g : GROUP_SIZES) {
      for (boolean h : new boolean[] {true, false}) {
        for (int f : new int[] {dev.taco.kernels.Fp8.E4M3, dev.taco.kernels.Fp8.E5M2}) {
          for (int u = 0; u < 3; u++) {
            String key = key(g, h, f, u == 0, u == 2);
            Files.writeString(out.resolve(key + ".cu"), t.translate(requests(g, h, f, u == 0, u == 2)));
            written.add(key);
          }
        }
      }
    }
    for (Map.Entry<String, List<KernelRequest>> u : TwoShotGpuKernels.units().entrySet()) {
      Files.writeString(out.resolve(u.getKey() + ".cu"), t.translate(u.getValue()));
      written.add(u.getKey());
    }
    System.out.println("TacoCudaSources: wrote " + written.size() + " CUDA units to " + out);
  }
}
