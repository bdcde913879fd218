package dev.taco.kernels.cuda;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether CUDA can be used in this process, and why not.
 *
 * <p>CUDA is available when libcuda loads ({@link CudaDriver#get()}), {@code cuInit(0)} succeeds and
 * {@code cuDeviceGetCount} reports at least one device. The answer is computed once. Setting the
 * environment variable {@code TACO_DISABLE_CUDA=1} (or the system property {@code taco.cuda.disable=true})
 * forces "unavailable", so a GPU machine can run the CPU-only suite.
 *
 * <p>GPU tests use it as
 * {@code Assumptions.assumeTrue(Cuda.available(), Cuda.unavailableReason())}, so a machine without a GPU
 * shows a skip with the reason rather than a failure.
 *
 * <p>Reference: CUDA Driver API, {@code cuInit}, {@code cuDeviceGetCount}.
 */
public final class Cuda {
  private static final Logger LOG = LoggerFactory.getLogger(Cuda.class);
  private static volatile String reason; // null until probed; "" when available
  private static volatile int deviceCount;

  private Cuda() {}

  /**
   * Probes (once) whether CUDA is usable. Never throws.
   *
   * @return true if libcuda loaded, {@code cuInit} succeeded and there is at least one device
   */
  public static boolean available() {
    return probe().isEmpty();
  }

  /**
   * @return why CUDA is unavailable (e.g. {@code "libcuda not loadable (...)"},
   *         {@code "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"}),
   *         or {@code "CUDA available: N device(s)"} when it is
   */
  public static String unavailableReason() {
    String r = probe();
    return r.isEmpty() ? "CUDA available: " + deviceCount + " device(s)" : r;
  }

  /** @return the number of devices, 0 when CUDA is unavailable */
  public static int deviceCount() {
    probe();
    return deviceCount;
  }

  private static String probe() {
    String r = reason;
    if (r != null) return r;
    synchronized (Cuda.class) {
      if (reason == null) reason = compute();
      return reason;
    }
  }

  private static String compute() {
    if ("1".equals(System.getenv("TACO_DISABLE_CUDA")) || Boolean.getBoolean("taco.cuda.disable")) {
      return "CUDA disabled by TACO_DISABLE_CUDA / taco.cuda.disable";
    }
    String r;
    try {
      CudaDriver d = CudaDriver.get();
      d.init();
      int n = d.deviceGetCount();
      if (n < 1) {
        r = "no CUDA device (cuDeviceGetCount = 0)";
      } else {
        deviceCount = n;
        r = "";
      }
    } catch (CudaException e) {
      r = "cuInit failed: " + e.getMessage();
    } catch (LinkageError e) {
      String m = String.valueOf(e.getMessage());
      r = m.startsWith("libcuda not loadable") ? m : "libcuda not loadable: " + m;
    } catch (RuntimeException e) {
      r = "CUDA probe failed: " + e;
    }
    if (r.isEmpty()) LOG.info("CUDA available: {} device(s)", deviceCount);
    else LOG.debug("CUDA unavailable: {}", r); // callers that need a GPU report it
    return r;
  }
}
