package dev.taco.kernels.simd;

import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which implementation the CPU codecs run: the SIMD kernels of this package, or the scalar reference kernels of
 * {@code dev.taco.kernels}. Both give the same bytes and floats; the SIMD ones are the fast path.
 *
 * <p>The SIMD kernels run when the {@code jdk.incubator.vector} module is in the boot layer (the project's launcher,
 * tests and benchmarks add it), the machine has vectors of at least 8 float lanes (AVX2, AVX-512, SVE of 256 bits
 * up) and the system property {@code taco.simd} is not {@code false}; otherwise, and inside
 * {@link #reference}, the reference kernels run. Thread-safe.
 */
public final class Simd {
  private Simd() {}

  private static final boolean AVAILABLE = !"false".equalsIgnoreCase(System.getProperty("taco.simd"))
      && ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent() && Lanes.supported();

  private static final ScopedValue<Boolean> REFERENCE = ScopedValue.newInstance();

  static {
    Logger log = LoggerFactory.getLogger(Simd.class);
    log.debug("CPU codec kernels: {}", AVAILABLE ? "SIMD, " + Lanes.L + " float lanes" : "scalar reference");
  }

  /** True when the calling code should run the SIMD kernels (see the class doc). */
  public static boolean enabled() {
    return AVAILABLE && !REFERENCE.isBound();
  }

  /** True when the SIMD kernels can run at all in this JVM (module present, not switched off by property). */
  public static boolean available() {
    return AVAILABLE;
  }

  /**
   * Runs {@code op} in the calling thread with the scalar reference kernels (for comparisons: tests, a user's doubt).
   *
   * @return what {@code op} returns; its exceptions pass through
   */
  public static <T> T reference(Supplier<T> op) {
    return ScopedValue.where(REFERENCE, Boolean.TRUE).call(op::get);
  }
}
