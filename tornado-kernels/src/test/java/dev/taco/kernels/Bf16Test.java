package dev.taco.kernels;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class Bf16Test {

  /** Float64 reference: nearest bf16 (ties to even), Inf beyond max + half ulp. */
  static int reference(float v) {
    int bits = Float.floatToRawIntBits(v);
    int lo = bits >>> 16;
    int hi = lo + 1;
    double x = v;
    double a = Float.intBitsToFloat(lo << 16);
    double b = (hi & 0x7FFF) == 0x7F80 ? Math.copySign(Math.scalb(1.0, 128), x) : Float.intBitsToFloat(hi << 16);
    double da = Math.abs(x - a);
    double db = Math.abs(b - x);
    return da < db ? lo : db < da ? hi : ((lo & 1) == 0 ? lo : hi);
  }

  @Test
  void decodeIsExact() {
    for (int c = 0; c < 65536; c++) {
      float v = Bf16.decode((short) c);
      assertThat(Float.floatToRawIntBits(v)).isEqualTo(c << 16);
      if (!Float.isNaN(v)) {
        assertThat(Bf16.encode(v) & 0xFFFF).isEqualTo(c);
      }
    }
  }

  @Test
  void roundsToNearestEvenAgainstFloat64() {
    SplittableRandom rnd = new SplittableRandom(7);
    for (int i = 0; i < 300_000; i++) {
      float v = Float.intBitsToFloat(rnd.nextInt());
      if (Float.isNaN(v)) {
        assertThat(Bf16.decode(Bf16.encode(v))).isNaN();
        assertThat(Bf16.encode(v) & 0x8000).isEqualTo((Float.floatToRawIntBits(v) >>> 16) & 0x8000);
        continue;
      }
      if (Float.isInfinite(v)) {
        assertThat(Bf16.decode(Bf16.encode(v))).isEqualTo(v);
        continue;
      }
      assertThat(Bf16.encode(v) & 0xFFFF).as("%s", v).isEqualTo(reference(v) & 0xFFFF);
    }
    // ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> even (1); 1 + 3*2^-8 -> 1 + 2^-6
    assertThat(Bf16.decode(Bf16.encode(1f + 0x1p-8f))).isEqualTo(1f);
    assertThat(Bf16.decode(Bf16.encode(1f + 3 * 0x1p-8f))).isEqualTo(1f + 0x1p-6f);
    assertThat(Bf16.decode(Bf16.encode(Math.nextUp(1f + 0x1p-8f)))).isEqualTo(1f + 0x1p-7f);
  }

  @Test
  void overflowAndSaturation() {
    assertThat(Bf16.decode(Bf16.encode(Float.MAX_VALUE))).isInfinite();
    assertThat(Bf16.encodeSaturating(Float.MAX_VALUE)).isEqualTo(Bf16.MAX_CODE);
    assertThat(Bf16.encodeSaturating(-Float.MAX_VALUE) & 0xFFFF).isEqualTo(0x8000 | Bf16.MAX_CODE);
    assertThat(Bf16.decode(Bf16.encodeSaturating(Float.POSITIVE_INFINITY))).isInfinite();
    assertThat(Bf16.decode(Bf16.encode(Float.NaN))).isNaN();
    assertThat(Bf16.isNonFinite(Bf16.encode(Float.NaN))).isTrue();
    assertThat(Bf16.isNonFinite(Bf16.MAX_CODE)).isFalse();
  }

  @Test
  void encodeSaturating2PacksTwoSaturatingCodes() {
    SplittableRandom rnd = new SplittableRandom(11);
    float[] edge = {Float.MAX_VALUE, -Float.MAX_VALUE, 3.3895e38f, 3.3896e38f, -3.3897e38f, Float.POSITIVE_INFINITY,
        Float.NEGATIVE_INFINITY, Float.intBitsToFloat(0x7F812345), Float.intBitsToFloat(0xFFC00001), 0f, -0f,
        Float.MIN_VALUE, 1f};
    for (int i = 0; i < 200_000; i++) {
      float lo = i < edge.length * edge.length ? edge[i % edge.length] : Float.intBitsToFloat(rnd.nextInt());
      float hi = i < edge.length * edge.length ? edge[i / edge.length] : Float.intBitsToFloat(rnd.nextInt());
      assertThat(Bf16.encodeSaturating2(lo, hi)).as("%s %s", lo, hi)
          .isEqualTo((Bf16.encodeSaturating(lo) & 0xFFFF) | Bf16.encodeSaturating(hi) << 16);
    }
  }
}
