package dev.taco.kernels;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link NcclFp8}: one hop of the sum against NCCL's own steps written out with Java's binary16 conversions, for every
 * pair of codes of both formats, and the ring's order.
 */
class NcclFp8Test {

  /**
   * NCCL's {@code FuncSum} on sm90 ({@code src/device/reduce_kernel.h}): {@code __nv_fp8(__hadd(__half(a),
   * __half(b)))}. The widening is exact; {@code __hadd} rounds the exact sum to binary16, which {@code floatToFloat16}
   * of the float32 sum of two binary16 values does too (that sum is exact unless the operands are more than 13 binades
   * apart, and then it is far from any binary16 midpoint); {@code cvt.rn.satfinite} rounds to nearest even and turns
   * magnitudes beyond the format's maximum, binary16 infinities included, into that maximum.
   */
  static int ncclHop(int a, int b, int format) {
    short ha = Float.floatToFloat16(Fp8.decode((byte) a, format));
    short hb = Float.floatToFloat16(Fp8.decode((byte) b, format));
    short sum = Float.floatToFloat16(Float.float16ToFloat(ha) + Float.float16ToFloat(hb));
    return Fp8.encode(Float.float16ToFloat(sum), format) & 0xFF;
  }

  @ParameterizedTest(name = "format {0}")
  @ValueSource(ints = {Fp8.E4M3, Fp8.E5M2})
  void everyPairOfCodesAddsAsNcclsBinary16Sum(int format) {
    int saturated = 0;
    for (int a = 0; a < 256; a++) {
      for (int b = 0; b < 256; b++) {
        int want = ncclHop(a, b, format), got = NcclFp8.add(a, b, format);
        if (Float.isNaN(Fp8.decode((byte) want, format))) {
          assertThat(Fp8.decode((byte) got, format)).as("0x%02x + 0x%02x", a, b).isNaN();
        } else {
          assertThat(got).as("0x%02x + 0x%02x", a, b).isEqualTo(want);
        }
        if (Math.abs(Fp8.decode((byte) got, format)) == Fp8.maxValue(format)) saturated++;
      }
    }
    assertThat(saturated).as("sums at the format's maximum").isPositive();
  }

  @Test
  void sumsSaturateAndTinyValuesStayExact() {
    int max = Fp8.encodeE4M3(448f) & 0xFF;
    assertThat(Fp8.decodeE4M3((byte) NcclFp8.add(max, max, Fp8.E4M3))).isEqualTo(448f);
    int tiny = Fp8.encodeE4M3(0x1p-9f) & 0xFF; // the smallest subnormal
    assertThat(Fp8.decodeE4M3((byte) NcclFp8.add(tiny, tiny, Fp8.E4M3))).isEqualTo(0x1p-8f);
    // 1 + 2^-9 is 1 in E4M3: the small addend is lost at the hop
    assertThat(Fp8.decodeE4M3((byte) NcclFp8.add(Fp8.encodeE4M3(1f), tiny, Fp8.E4M3))).isEqualTo(1f);
  }

  @Test
  void theRingStartsAfterTheOwnerAndEndsWithIt() {
    // E4M3 at 16: step 2. Rank 1 owns the element; its chain is 2, 3, 0, then 1.
    float[] v = {1f, 16f, 0.75f, 0.75f};
    byte[] slots = new byte[4 * 3];
    for (int q = 0; q < 4; q++) slots[q * 3 + 2] = Fp8.encodeE4M3(v[q]);
    // 0.75 + 0.75 = 1.5, + 1 = 2.5, + 16 = 18.5 -> 18 (the float32 sum is 18.5 in every order)
    int c = NcclFp8.ringSum(slots, 3, 2, 1, 4, Fp8.E4M3);
    assertThat(Fp8.decodeE4M3((byte) c)).isEqualTo(18f);
    // the owner 2's chain is 3, 0, 1, 2: 0.75 + 1 = 1.75, + 16 = 17.75 -> 18, + 0.75 = 18.75 -> 18
    assertThat(Fp8.decodeE4M3((byte) NcclFp8.ringSum(slots, 3, 2, 2, 4, Fp8.E4M3))).isEqualTo(18f);
    // owner 0: 16 + 0.75 = 16.75 -> 16, + 0.75 -> 16, + 1 = 17 -> 16 (tie to even): the order loses what fp32 keeps
    assertThat(Fp8.decodeE4M3((byte) NcclFp8.ringSum(slots, 3, 2, 0, 4, Fp8.E4M3))).isEqualTo(16f);
  }

  @Test
  void theScaleMapsTheGroupsLargestMagnitudeToTheTop() {
    float amax = 3.7f;
    for (int divisor : new int[] {1, 2, 3, 8}) {
      float top = NcclFp8.top(divisor, Fp8.E4M3);
      int c = NcclFp8.encode(-amax, amax, top, Fp8.E4M3);
      assertThat(Fp8.decodeE4M3((byte) c)).isEqualTo(-Fp8.decodeE4M3(Fp8.encodeE4M3(448f / divisor)));
      assertThat(NcclFp8.decode(c, amax, top, Fp8.E4M3)).isCloseTo(-amax, org.assertj.core.data.Percentage
          .withPercentage(6.25));
    }
    assertThat(NcclFp8.encode(5f, 0f, 448f, Fp8.E4M3)).as("an all-zero group").isZero();
    assertThat(NcclFp8.encode(Float.NEGATIVE_INFINITY, 1f, 448f, Fp8.E5M2)).isEqualTo(0xFC);
    assertThat(Fp8.decodeE4M3((byte) NcclFp8.encode(Float.POSITIVE_INFINITY, 1f, 448f, Fp8.E4M3))).isNaN();
  }
}
