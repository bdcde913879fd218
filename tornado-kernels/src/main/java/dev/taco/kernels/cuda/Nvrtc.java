package dev.taco.kernels.cuda;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * JNA binding of NVRTC ({@code libnvrtc.so.13}): CUDA C → PTX at run time.
 *
 * <p>{@link #compile(String, String, String, List)} creates a program, compiles it with
 * {@link #defaultOptions(String)} plus the caller's options, reads the PTX and destroys the program;
 * any failure throws {@link NvrtcException} with {@code nvrtcGetErrorString} and the full program log.
 * {@link #compileCached} puts a {@link PtxCache} in front (NVRTC takes about 80 ms even for a trivial
 * kernel).
 *
 * <p>Headers: {@code cuda_fp16.h}, {@code cuda_bf16.h} and {@code cuda_fp8.h} are bundled in
 * libnvrtc-builtins in recent NVRTC versions; as a fallback, the first of {@code $CUDA_HOME/include},
 * {@code $CUDA_PATH/include}, {@code /usr/local/cuda/include} that holds {@code cuda_fp8.h} is added as
 * {@code --include-path} (unless {@code TACO_NVRTC_NO_TOOLKIT_INCLUDE=1}).
 *
 * <p>The library is searched as the system property {@code taco.libnvrtc} or {@code $TACO_LIBNVRTC} if set, then {@code libnvrtc.so.13},
 * {@code libnvrtc.so.12}, {@code nvrtc}.
 *
 * <p>Reference: NVRTC User Guide (CUDA 13.0): {@code nvrtcVersion}, {@code nvrtcCreateProgram},
 * {@code nvrtcCompileProgram}, {@code nvrtcGetProgramLogSize}/{@code nvrtcGetProgramLog},
 * {@code nvrtcGetPTXSize}/{@code nvrtcGetPTX}, {@code nvrtcDestroyProgram}, {@code nvrtcGetErrorString};
 * "Supported Compile Options".
 */
public final class Nvrtc {
  private static final Logger LOG = LoggerFactory.getLogger(Nvrtc.class);

  /** The {@code nvrtcResult} names of CUDA 13.0, indexed by code. */
  private static final String[] RESULT_NAMES = {
      "NVRTC_SUCCESS", "NVRTC_ERROR_OUT_OF_MEMORY", "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
      "NVRTC_ERROR_INVALID_INPUT", "NVRTC_ERROR_INVALID_PROGRAM", "NVRTC_ERROR_INVALID_OPTION",
      "NVRTC_ERROR_COMPILATION", "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
      "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION", "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
      "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID", "NVRTC_ERROR_INTERNAL_ERROR", "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
      "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED", "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED", "NVRTC_ERROR_PCH_CREATE",
      "NVRTC_ERROR_CANCELLED", "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
  };

  interface Api extends Library {
    int nvrtcVersion(IntByReference major, IntByReference minor);
    int nvrtcCreateProgram(PointerByReference prog, String src, String name, int numHeaders, String[] headers,
        String[] includeNames);
    int nvrtcCompileProgram(Pointer prog, int numOptions, String[] options);
    int nvrtcGetProgramLogSize(Pointer prog, LongByReference size);
    int nvrtcGetProgramLog(Pointer prog, byte[] log);
    int nvrtcGetPTXSize(Pointer prog, LongByReference size);
    int nvrtcGetPTX(Pointer prog, byte[] ptx);
    int nvrtcDestroyProgram(PointerByReference prog);
    String nvrtcGetErrorString(int result);
  }

  private static final NativeLibraries.Once<Nvrtc> INSTANCE = new NativeLibraries.Once<>(() -> {
    Nvrtc loaded = NativeLibraries.loadFirst("libnvrtc", NativeLibraries.candidates("taco.libnvrtc",
        "TACO_LIBNVRTC", "libnvrtc.so.13", "libnvrtc.so.12", "nvrtc"),
        name -> new Nvrtc(Native.load(name, Api.class), name));
    LOG.debug("loaded NVRTC {} from {}", loaded.versionString(), loaded.libraryName());
    return loaded;
  });

  private final Api api;
  private final String libraryName;
  private final int major;
  private final int minor;

  private Nvrtc(Api api, String libraryName) {
    this.api = api;
    this.libraryName = libraryName;
    IntByReference ma = new IntByReference();
    IntByReference mi = new IntByReference();
    int s = api.nvrtcVersion(ma, mi);
    if (s != 0) throw new NvrtcException("nvrtcVersion", s, errorName(s), "", "");
    this.major = ma.getValue();
    this.minor = mi.getValue();
  }

  /**
   * The process-wide binding, loading libnvrtc on first use.
   *
   * @return the binding
   * @throws UnsatisfiedLinkError if no libnvrtc can be loaded (message lists what was tried)
   */
  public static Nvrtc get() {
    return INSTANCE.get();
  }

  /**
   * Whether NVRTC can be loaded here. Never throws.
   *
   * @return true if {@link #get()} succeeds
   */
  public static boolean available() {
    return INSTANCE.available();
  }

  /** @return why NVRTC is unavailable, or {@code "NVRTC <version> available"} */
  public static String unavailableReason() {
    return INSTANCE.describe(n -> "NVRTC " + n.versionString() + " available");
  }

  /**
   * The name of an {@code nvrtcResult} without calling the library (CUDA 13.0 enum).
   *
   * @param code an {@code nvrtcResult}
   * @return e.g. {@code "NVRTC_ERROR_COMPILATION"} for 6, {@code "NVRTC_ERROR_UNRECOGNIZED_<code>"} otherwise
   */
  public static String errorName(int code) {
    return code >= 0 && code < RESULT_NAMES.length ? RESULT_NAMES[code] : "NVRTC_ERROR_UNRECOGNIZED_" + code;
  }

  /** @return NVRTC's major version, e.g. 13 */
  public int major() { return major; }

  /** @return NVRTC's minor version */
  public int minor() { return minor; }

  /** @return e.g. {@code "nvrtc 13.0"}; part of the {@link PtxCache} key */
  public String versionString() {
    return "nvrtc " + major + "." + minor;
  }

  /** @return the name under which the library was loaded */
  public String libraryName() { return libraryName; }

  /**
   * {@code nvrtcGetErrorString}.
   *
   * @param code an {@code nvrtcResult}
   * @return the library's description, e.g. {@code "NVRTC_ERROR_COMPILATION"}
   */
  public String errorString(int code) {
    String s = api.nvrtcGetErrorString(code);
    return s == null ? errorName(code) : s;
  }

  /**
   * The options every compilation gets: {@code --gpu-architecture=<arch>}, {@code --std=c++17}, and the
   * toolkit include directory if one is found (see class comment). No fast-math: kernels keep IEEE
   * semantics (docs/design.md §5).
   *
   * @param arch a virtual ({@code compute_90}) architecture for PTX output
   * @return the options, in order
   */
  public static List<String> defaultOptions(String arch) {
    List<String> o = new ArrayList<>();
    o.add("--gpu-architecture=" + arch);
    o.add("--std=c++17");
    Path inc = toolkitInclude();
    if (inc != null) o.add("--include-path=" + inc);
    return o;
  }

  /** @return the CUDA toolkit include directory holding {@code cuda_fp8.h}, or null */
  static Path toolkitInclude() {
    if ("1".equals(System.getenv("TACO_NVRTC_NO_TOOLKIT_INCLUDE"))) return null;
    for (String root : new String[] {System.getenv("CUDA_HOME"), System.getenv("CUDA_PATH"), "/usr/local/cuda"}) {
      if (root == null || root.isBlank()) continue;
      Path p = Path.of(root, "include");
      if (Files.isRegularFile(p.resolve("cuda_fp8.h"))) return p;
    }
    return null;
  }

  /**
   * Compiles CUDA C to PTX.
   *
   * @param source       CUDA C source; kernels should be {@code extern "C"}
   * @param programName  a name for the log and error messages, e.g. {@code "vector_add.cu"}
   * @param arch         virtual architecture, e.g. {@code "compute_90"} (PTX is JIT-compiled by the driver
   *                     on load, so PTX for compute_90 runs on sm_90 and later)
   * @param extraOptions options after {@link #defaultOptions(String)}, e.g. {@code "-DG=128"}, {@code "-lineinfo"}
   * @return the PTX text
   * @throws NvrtcException with the compile log on any failure (e.g. {@code NVRTC_ERROR_COMPILATION},
   *                        {@code NVRTC_ERROR_INVALID_OPTION})
   */
  public String compile(String source, String programName, String arch, List<String> extraOptions) {
    List<String> options = new ArrayList<>(defaultOptions(arch));
    options.addAll(extraOptions);
    return compileWithOptions(source, programName, options);
  }

  /**
   * Compiles CUDA C to PTX with exactly {@code options} (no defaults added).
   *
   * @param source      CUDA C source
   * @param programName a name for messages
   * @param options     all NVRTC options
   * @return the PTX text
   * @throws NvrtcException with the compile log on any failure
   */
  public String compileWithOptions(String source, String programName, List<String> options) {
    String context = programName + " with " + String.join(" ", options);
    PointerByReference progRef = new PointerByReference();
    int s = api.nvrtcCreateProgram(progRef, source, programName, 0, null, null);
    if (s != 0) throw new NvrtcException("nvrtcCreateProgram", s, errorString(s), context, "");
    Pointer prog = progRef.getValue();
    long t0 = System.nanoTime();
    try {
      s = api.nvrtcCompileProgram(prog, options.size(), options.toArray(String[]::new));
      String log = programLog(prog);
      if (s != 0) throw new NvrtcException("nvrtcCompileProgram", s, errorString(s), context, log);
      if (!log.isBlank()) LOG.debug("NVRTC log for {}:\n{}", programName, log.strip());
      LongByReference size = new LongByReference();
      s = api.nvrtcGetPTXSize(prog, size);
      if (s != 0) throw new NvrtcException("nvrtcGetPTXSize", s, errorString(s), context, log);
      byte[] ptx = new byte[(int) size.getValue()];
      s = api.nvrtcGetPTX(prog, ptx);
      if (s != 0) throw new NvrtcException("nvrtcGetPTX", s, errorString(s), context, log);
      int n = ptx.length;
      while (n > 0 && ptx[n - 1] == 0) n--; // the size includes the terminating NUL
      LOG.debug("NVRTC compiled {} in {} ms ({} bytes of PTX)", programName, (System.nanoTime() - t0) / 1_000_000, n);
      return new String(ptx, 0, n, StandardCharsets.UTF_8);
    } finally {
      int d = api.nvrtcDestroyProgram(progRef);
      if (d != 0) LOG.warn("nvrtcDestroyProgram failed: {}", errorString(d));
    }
  }

  private String programLog(Pointer prog) {
    LongByReference size = new LongByReference();
    if (api.nvrtcGetProgramLogSize(prog, size) != 0 || size.getValue() <= 1) return "";
    byte[] log = new byte[(int) size.getValue()];
    if (api.nvrtcGetProgramLog(prog, log) != 0) return "";
    int n = log.length;
    while (n > 0 && log[n - 1] == 0) n--;
    return new String(log, 0, n, StandardCharsets.UTF_8);
  }

  /**
   * Compiles through a {@link PtxCache}: a hit returns the stored PTX without running NVRTC (NVRTC is
   * still loaded, for its version, which is part of the key).
   *
   * @param source       CUDA C source
   * @param programName  a name for messages
   * @param arch         virtual architecture, e.g. {@code "compute_90"}
   * @param extraOptions options after the defaults
   * @param cache        the cache
   * @return the PTX
   * @throws NvrtcException       on a compilation failure (nothing is cached then)
   * @throws UnsatisfiedLinkError if libnvrtc cannot be loaded
   */
  public static String compileCached(String source, String programName, String arch, List<String> extraOptions,
      PtxCache cache) {
    Nvrtc nvrtc = get();
    List<String> options = new ArrayList<>(defaultOptions(arch));
    options.addAll(extraOptions);
    return cache.getOrCompile(source, arch, options, nvrtc.versionString(),
        () -> nvrtc.compileWithOptions(source, programName, options));
  }
}
