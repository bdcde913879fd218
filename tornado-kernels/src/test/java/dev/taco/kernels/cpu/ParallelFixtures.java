package dev.taco.kernels.cpu;

import dev.taco.kernels.Parallel;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;

/** Kernels for {@link ParallelKernelsTest} (compiled from this file's source). */
public final class ParallelFixtures {
  /** A constant the kernels read (static final fields are allowed: the copy evaluates the same initialiser). */
  static final float OFFSET = 0.25f;

  /** A table the kernels read and the tests change: the copy must read this very array, not one of its own. */
  static final float[] TABLE = new float[4];

  private ParallelFixtures() {}

  /**
   * Reads {@link #TABLE}, calls a private helper through the class name, redeclares a captured name inside an
   * anonymous class, and reads a local declared in an old-style switch case.
   */
  public static void scopes(float[] out, int n, int k) {
    switch (k) {
      case 0:
      default:
        float s = 2f;
        s *= 3;
        for (@Parallel int i = 0; i < n; i++) {
          java.util.function.IntUnaryOperator f = new java.util.function.IntUnaryOperator() {
            final int n = 7; // not the method's n

            @Override
            public int applyAsInt(int v) {
              int k = v; // not the method's k
              k += n;
              return k;
            }
          };
          out[i] = ParallelFixtures.twice(TABLE[i % 4]) + f.applyAsInt(i) * s + k;
        }
    }
  }

  private static float twice(float v) {
    return 2 * v;
  }

  /** A member type with a @Parallel loop of its own: the copy leaves it to the original (it runs on one core). */
  static final class Inner {
    private Inner() {}

    static void fill(int[] a) {
      for (@Parallel int i = 0; i < a.length; i++) {
        a[i] = i;
      }
    }
  }

  enum Mode { PLUS, TIMES }

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

  /**
   * A sequential outer loop whose {@code @Parallel} inner loop reads the outer index (not effectively final), a label
   * on the parallel loop itself with {@code continue} to it, an enum switch and an anonymous class (javac writes extra
   * classes for both), and a string holding the class's name.
   */
  public static void outerIndex(float[] out, String[] names, int rows, int cols, Mode mode) {
    float scale = 1f;
    if (rows > 3) {
      scale = 2f; // assigned twice: not effectively final either
    }
    for (int r = 0; r < rows; r++) {
      cols:
      for (@Parallel int c = 0; c < cols; c++) {
        if (c == 3) {
          continue cols;
        }
        java.util.function.IntUnaryOperator twice = new java.util.function.IntUnaryOperator() {
          @Override
          public int applyAsInt(int v) {
            return 2 * v;
          }
        };
        float v = switch (mode) {
          case PLUS -> r + c + OFFSET;
          case TIMES -> r * c * scale;
        };
        out[r * cols + c] = v + twice.applyAsInt(c);
        names[r * cols + c] = "ParallelFixtures#" + c;
      }
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
