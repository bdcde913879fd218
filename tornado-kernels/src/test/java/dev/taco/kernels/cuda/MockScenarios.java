package dev.taco.kernels.cuda;

import java.util.Map;

/**
 * The runner of the mock-library scenario programs ({@link MockDriverScenarios}, {@link CublasMockScenarios}): each
 * runs in its own JVM with the mock library named by a system property; every scenario gets a cleared mock log and
 * prints {@code PASS name} or {@code FAIL name: reason} with its stack trace; the exit status is 0 only if all passed.
 */
final class MockScenarios {
  private MockScenarios() {}

  /** A scenario: fails by throwing. */
  interface Scenario {
    void run(CudaContext ctx) throws Exception;
  }

  /** Runs {@code scenarios} in order on device 0 of the mock, {@code clearLog} before each, then exits. */
  static void runAndExit(Map<String, Scenario> scenarios, Runnable clearLog) {
    int failed = 0;
    try (CudaContext ctx = CudaContext.open(0)) {
      for (Map.Entry<String, Scenario> e : scenarios.entrySet()) {
        clearLog.run();
        try {
          e.getValue().run(ctx);
          System.out.println("PASS " + e.getKey());
        } catch (Throwable t) {
          failed++;
          System.out.println("FAIL " + e.getKey() + ": " + t);
          t.printStackTrace(System.out);
        }
      }
    }
    System.exit(failed == 0 ? 0 : 1);
  }
}
