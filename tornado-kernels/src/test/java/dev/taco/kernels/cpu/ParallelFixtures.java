package dev.taco.kernels.cpu;

import dev.taco.kernels.Parallel;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;

/** Kernels for {@link ParallelKernelsTest} (compiled from this file's source). */
public final class ParallelFixtures {
  private ParallelFixtures() {}

  /**
   * The first iteration of each half of the range waits for the other half's: only a run that really executes the
   * two halves at the same time gets past the barrier (a sequential one times out).
   */
  public static void meetInTheMiddle(int[] out, int n, CyclicBarrier barrier) {
    int half = n / 2;
    for (@Parallel int i = 0; i < n; i++) {
      if (i == 0 || i == half) {
        try {
          barrier.await(20, TimeUnit.SECONDS);
        } catch (Exception e) {
          throw new IllegalStateException("iteration " + i + " waited alone", e);
        }
      }
      out[i] = i * 3 + 1;
    }
  }

  /** Sums rows; the test breaks it by making the loop assign {@code total}, a local of the method. */
  public static void rowSums(float[] x, float[] out, int rows, int cols) {
    float total = 0f;
    for (@Parallel int r = 0; r < rows; r++) {
      float acc = 0f;
      for (int c = 0; c < cols; c++) {
        acc += x[r * cols + c];
      }
      out[r] = acc + total;
    }
  }

  /** A nested loop, a labelled inner loop with break/continue of its own, and an offset range. */
  public static void shapes(float[] x, float[] out, int lo, int n, int cols) {
    float scale = 0.5f;
    for (@Parallel int r = lo; r < n; r++) {
      float acc = 0f;
      inner:
      for (int c = 0; c < cols; c++) {
        if (x[r * cols + c] < -2f) {
          continue;
        }
        for (int k = 0; k < 3; k++) {
          if (k == 2) {
            break;
          }
          if (x[r * cols + c] > 3f) {
            break inner;
          }
          acc += x[r * cols + c] * scale;
        }
      }
      out[r] = acc;
    }
  }
}
