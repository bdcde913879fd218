package dev.taco.kernels.cpu;

import dev.taco.kernels.Parallel;
import java.util.function.IntToDoubleFunction;

/**
 * A kernel interface for {@link ParallelKernelsTest}: an implicitly static final table the test changes, a parameter
 * named like the package's first part, private helpers reached qualified, fully qualified and by method reference, a
 * bound with a side effect on a local the body reads, and a loop header over several lines.
 */
public interface InterfaceFixture {
  float[] TABLE = new float[4];

  static void lookup(float[] out, int n, float dev) {
    IntToDoubleFunction g = InterfaceFixture::twice;
    int len = 0;
    for (@Parallel int i = 0;
        i < (len = n);
        i++) {
      out[i] = TABLE[i % 4] * dev + (float) g.applyAsDouble(i) + InterfaceFixture.twice(len) + thrice(i);
    }
  }

  static void fullyQualified(float[] out, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      out[i] = dev.taco.kernels.cpu.InterfaceFixture.twice(i);
    }
  }

  private static float twice(int v) {
    return 2f * v;
  }

  private static float thrice(int v) {
    if (v < 0) {
      throw new IllegalStateException("line 36");
    }
    return 3f * v;
  }
}
