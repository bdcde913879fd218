package dev.taco.codec;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Prints the measurement behind {@link TacoCodec#DEFAULT_GROUP}: relative L2 error and wire bytes per element for
 * G in 32..256 on three input kinds (64 x 4096), next to the baselines. Asserts only coarse sanity.
 */
class GroupSizeTableTest {

  @Test
  void groupSizeTable() {
    int rows = 64;
    int cols = 4096;
    String[] names = {"gaussian", "laplace+outliers", "outlier-channels"};
    float[][] inputs = {Inputs.gaussian(21, rows * cols), Inputs.heavyTailed(21, rows * cols),
        Inputs.outlierChannels(21, rows, cols)};
    StringBuilder t = new StringBuilder(String.format("%n%-28s %18s %18s %18s %18s %8s%n", "codec (64x4096)",
        names[0], names[1], names[2], "(bulk, |x|<5)", "B/el"));
    String[] specs = {"taco:g=32", "taco:g=64", "taco:g=128", "taco:g=256", "taco:e5m2,g=32", "taco:e5m2,g=64",
        "taco:e5m2,g=128", "taco:e5m2,g=256", "taco:g=64,hadamard=off", "taco:g=128,hadamard=off",
        "taco:e5m2,g=64,hadamard=off",
        "int8-group:g=64", "int8-group:g=128", "none", "fp32"};
    for (String spec : specs) {
      AbstractCodec c = Codecs.byName(spec);
      t.append(String.format("%-28s", spec));
      double bpe = 0;
      for (float[] x : inputs) {
        CodecStats s = CodecStats.measure(c, x, rows, cols);
        assertThat(s.saturated()).isZero();
        assertThat(s.groupCollapseRate()).isZero();
        t.append(String.format(" %18.4e", s.relL2()));
        bpe = s.bytesPerElement();
      }
      t.append(String.format(" %18.4e", bulkError(c, inputs[2], rows, cols)));
      t.append(String.format(" %8.4f%n", bpe));
    }
    System.out.print(t);
  }

  /** Relative L2 error over the ordinary values only (|x| &lt; 5), i.e. what the outliers do to their groups. */
  static double bulkError(AbstractCodec c, float[] x, int rows, int cols) {
    byte[] buf = new byte[c.encodedSize(rows, cols)];
    c.encode(x, 0, rows, cols, buf, 0);
    float[] y = new float[x.length];
    c.decode(buf, 0, buf.length, y, 0, false);
    double xx = 0;
    double ee = 0;
    for (int i = 0; i < x.length; i++) {
      if (Math.abs(x[i]) < 5) {
        xx += (double) x[i] * x[i];
        ee += ((double) y[i] - x[i]) * ((double) y[i] - x[i]);
      }
    }
    return Math.sqrt(ee / xx);
  }
}
