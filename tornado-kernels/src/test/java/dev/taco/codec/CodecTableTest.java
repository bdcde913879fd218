package dev.taco.codec;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Prints relative L2 error and wire bytes per element of every codec in {@link Codecs#names} on a Gaussian and an
 * outlier-channel 64 x 4096 tensor (float64 reference), and asserts the facts docs/design.md §3 states about them.
 */
class CodecTableTest {

  @Test
  void everyCodecOnGaussianAndOutlierChannels() {
    int rows = 64;
    int cols = 4096;
    float[] gauss = Inputs.gaussian(31, rows * cols);
    float[] chan = Inputs.outlierChannels(31, rows, cols);
    StringBuilder t = new StringBuilder(String.format("%n| codec | gaussian relL2 | outlier-channels relL2 | "
        + "outlier-channels, bulk |x|<5 | group collapse (2^+-40 groups) | bytes/el |%n|---|---|---|---|---|---|%n"));
    java.util.Map<String, Double> g = new java.util.HashMap<>();
    for (String spec : Codecs.names()) {
      AbstractCodec c = Codecs.byName(spec);
      CodecStats a = CodecStats.measure(c, gauss, rows, cols);
      CodecStats b = CodecStats.measure(c, chan, rows, cols);
      int gs = c.groupSize() > 0 ? c.groupSize() : 64;
      float[] wide = Inputs.wideGroups(31, 8, 1024, gs, 40);
      CodecStats w = CodecStats.measure(c, wide, 8, 1024);
      assertThat(a.saturated() + b.saturated() + w.saturated()).isZero();
      g.put(spec, a.relL2());
      t.append(String.format("| %s | %.4f %% | %.4f %% | %.4f %% | %.3f | %.4f |%n", spec, 100 * a.relL2(),
          100 * b.relL2(), 100 * GroupSizeTableTest.bulkError(c, chan, rows, cols), w.groupCollapseRate(),
          a.bytesPerElement()));
    }
    System.out.print(t);
    // docs/design.md §3: INT8 per group beats any FP8 on L2; int4 is far worse; fp32 is exact
    assertThat(g.get("int8-group")).isLessThan(g.get("taco")).isLessThan(g.get("fp8-group") * 1.2);
    assertThat(g.get("int4-group")).isGreaterThan(3 * g.get("taco"));
    assertThat(g.get("fp32")).isZero();
  }
}
