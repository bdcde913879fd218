package dev.taco.kernels.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * How the JNA bindings (CUDA driver, NVRTC, cuBLAS, cuBLASLt, NCCL) find their native library: an override from a
 * system property or environment variable first, then the usual names; the first that loads wins, and when none does
 * the error lists every name with the loader's reason.
 */
public final class NativeLibraries {
  private NativeLibraries() {}

  /**
   * The names to try, in order: {@code -D<property>} or {@code $<variable>} when set (stripped), then
   * {@code defaults}.
   */
  public static List<String> candidates(String property, String variable, String... defaults) {
    List<String> names = new ArrayList<>();
    String override = System.getProperty(property, System.getenv(variable));
    if (override != null && !override.isBlank()) names.add(override.strip());
    names.addAll(List.of(defaults));
    return names;
  }

  /**
   * @param name the library name tried
   * @param message JNA's message, which begins "Unable to load library 'x':" with the loader's reason on the next line
   * @return {@code "<name>: <the loader's reason>"}, e.g. {@code "libnccl.so.2: cannot open shared object file: ..."}
   */
  public static String why(String name, String message) {
    if (message == null || message.isBlank()) return name + ": unknown error";
    String[] lines = message.strip().split("\n");
    String line = lines[0].endsWith(":") && lines.length > 1 ? lines[1].strip() : lines[0];
    return line.startsWith(name) ? line : name + ": " + line;
  }

  /**
   * The result of {@code load} for the first of {@code names} where it does not throw {@link UnsatisfiedLinkError}.
   *
   * @param library the library's short name for the message, e.g. {@code "libcublas"}
   * @throws UnsatisfiedLinkError {@code "<library> not loadable (<name>: <reason>; ...)"} when every name fails
   */
  public static <T> T loadFirst(String library, List<String> names, Function<String, T> load) {
    List<String> tried = new ArrayList<>();
    for (String name : names) {
      try {
        return load.apply(name);
      } catch (UnsatisfiedLinkError e) {
        tried.add(why(name, e.getMessage()));
      }
    }
    throw new UnsatisfiedLinkError(library + " not loadable (" + String.join("; ", tried) + ")");
  }

  /**
   * A binding loaded at most once per process: the first successful load is kept, and the first
   * {@link UnsatisfiedLinkError} (what was tried, and why) stays the answer; other exceptions of {@code load} pass
   * through and a later call tries again.
   *
   * @param <B> the binding
   */
  public static final class Once<B> {
    private final Supplier<B> load;
    private volatile B value;
    private volatile String failure;

    /** @param load loads the library and makes the binding (e.g. through {@link #loadFirst}) */
    public Once(Supplier<B> load) {
      this.load = load;
    }

    /**
     * The binding, loading it on the first call.
     *
     * @throws UnsatisfiedLinkError if the library does not load (the first failure's message, every time)
     */
    public B get() {
      B v = value;
      if (v != null) return v;
      synchronized (this) {
        if (value != null) return value;
        if (failure != null) throw new UnsatisfiedLinkError(failure);
        try {
          value = load.get();
        } catch (UnsatisfiedLinkError e) {
          failure = e.getMessage();
          throw e;
        }
        return value;
      }
    }

    /** Whether {@link #get} succeeds. Never throws. */
    public boolean available() {
      try {
        get();
        return true;
      } catch (LinkageError | RuntimeException e) {
        return false;
      }
    }

    /** {@code describe} of the binding, or the reason it does not load. Never throws. */
    public String describe(Function<B, String> describe) {
      try {
        return describe.apply(get());
      } catch (LinkageError | RuntimeException e) {
        return e.getMessage();
      }
    }
  }
}
