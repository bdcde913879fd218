package dev.taco.codec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The NaN/Inf policy of {@link Codec}: refuse by default, propagate on request, for every codec. */
class NonFiniteTest {

  static java.util.List<String> names() {
    return Codecs.names();
  }

  /** Relative L2 bound on Gaussian data (float64 reference), per base spec. */
  static double bound(String spec) {
    return switch (spec) {
      case "fp32" -> 0;
      case "none" -> 0x1p-8;
      case "int8-group", "hadamard-int8" -> 0.01;
      case "int4-group" -> 0.12;
      case "mxfp4" -> 0.13; // E2M1: a quarter of the binade at most, about 11.5 % RMS with MX's clipping
      case "nvfp4" -> 0.11;
      case "taco:e5m2", "nccl-fp8:e5m2" -> 0.07;
      default -> 0.035; // the E4M3 codecs: 2^-4 per value at most, about 2.6 % RMS
    };
  }

  static boolean hasInfinity(String spec) {
    return spec.equals("fp32") || spec.equals("none") || spec.endsWith(":e5m2");
  }

  @ParameterizedTest
  @MethodSource("names")
  void refuseNamesIndexRowAndColumnAndPropagateKeepsPositionsAndTheRestsError(String spec) {
    int rows = 6;
    int cols = 200; // not a multiple of any G
    SplittableRandom rnd = new SplittableRandom();
    float[] x = Inputs.gaussian(rnd.nextLong(), rows * cols);
    int[] pos = rnd.ints(0, rows * cols).distinct().limit(6).toArray();
    float[] special = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN,
        Float.NEGATIVE_INFINITY, Float.POSITIVE_INFINITY};
    for (int k = 0; k < pos.length; k++) {
      x[pos[k]] = special[k];
    }
    int first = Arrays.stream(pos).min().orElseThrow();
    AbstractCodec refuse = Codecs.byName(spec);
    assertThatThrownBy(() -> refuse.encode(x, 0, rows, cols, new byte[refuse.encodedSize(rows, cols)], 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("index " + first + " (row " + first / cols + ", col " + first % cols + ")");

    AbstractCodec c = Codecs.byName(spec + (spec.contains(":") ? "," : ":") + "nonfinite=propagate");
    assertThat(c.nonFinite()).isEqualTo(AbstractCodec.NonFinite.PROPAGATE);
    byte[] buf = new byte[c.encodedSize(rows, cols)];
    EncodeResult r = c.encodeWithStats(x, 0, rows, cols, buf, 0);
    if (!CodecPropertiesTest.clipsByDesign(spec)) {
      assertThat(r.saturated()).isZero();
    }
    float[] y = new float[x.length];
    refuse.decode(buf, 0, buf.length, y, 0, false); // the payload describes itself: any decoder accepts it
    double xx = 0;
    double ee = 0;
    for (int i = 0; i < x.length; i++) {
      if (Float.isNaN(x[i])) {
        assertThat(y[i]).as("%s NaN at %d", spec, i).isNaN();
      } else if (Float.isInfinite(x[i])) {
        if (hasInfinity(spec)) {
          assertThat(y[i]).as("%s Inf at %d", spec, i).isEqualTo(x[i]);
        } else {
          assertThat(y[i]).as("%s Inf at %d (no Inf in the format)", spec, i).isNaN();
        }
      } else {
        assertThat(Float.isFinite(y[i])).as("%s finite at %d", spec, i).isTrue();
        xx += (double) x[i] * x[i];
        ee += ((double) y[i] - x[i]) * ((double) y[i] - x[i]);
      }
    }
    assertThat(Math.sqrt(ee / xx)).as(spec).isLessThanOrEqualTo(bound(spec));
    // a finite tensor gives the same payload under both policies
    float[] f = Inputs.gaussian(rnd.nextLong(), rows * cols);
    assertThat(CodecTest.encode(c, f, rows, cols)).isEqualTo(CodecTest.encode(refuse, f, rows, cols));
  }

  @ParameterizedTest
  @MethodSource("names")
  void groupsOfOnlyNonFiniteAndZerosAndWholeRows(String spec) {
    AbstractCodec c = Codecs.byName(spec + (spec.contains(":") ? "," : ":") + "nonfinite=propagate");
    float[] x = new float[2 * 70];
    x[3] = Float.NaN;
    x[100] = Float.NEGATIVE_INFINITY;
    float[] y = CodecTest.roundTrip(c, x, 2, 70);
    for (int i = 0; i < x.length; i++) {
      if (i == 3 || (i == 100 && !hasInfinity(spec))) {
        assertThat(y[i]).isNaN();
      } else if (i == 100) {
        assertThat(y[i]).isEqualTo(Float.NEGATIVE_INFINITY);
      } else {
        assertThat(y[i]).as("%s at %d", spec, i).isEqualTo(0f);
      }
    }
  }

  @Test
  void aNanCodeWithoutTheFlagIsMalformed() {
    AbstractCodec c = Codecs.byName("int8-group:nonfinite=propagate");
    float[] x = Inputs.gaussian(3, 256);
    x[7] = Float.NaN;
    byte[] b = CodecTest.encode(c, x, 1, 256);
    assertThat(b[7] & PayloadHeader.FLAG_NONFINITE).isNotZero();
    byte[] cleared = CodecTest.withField(b, 7, 0, 1);
    assertThatThrownBy(() -> c.decode(cleared, 0, cleared.length, new float[256], 0, false))
        .isInstanceOf(MalformedPayloadException.class).hasMessageContaining("marker");
  }
}
