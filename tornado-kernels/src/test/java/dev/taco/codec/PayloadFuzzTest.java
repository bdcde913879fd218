package dev.taco.codec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.kernels.Bytes;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Fuzzing the decoder of every codec in {@link Codecs#names}: random bit flips anywhere in a valid payload and
 * truncation at every length must give {@link MalformedPayloadException} (never IndexOutOfBounds, OutOfMemoryError
 * or another exception) or, if the checksums happen to survive, a decode equal bit for bit to the original one;
 * forged headers with a valid header CRC but lying sizes are rejected before any large allocation (under 1 MiB,
 * exception and message included, against the gigabytes the sizes claim). Note: a forged header is not always
 * detectable: for hadamard-int8 and taco, 2 x 65 and 2 x 64 imply the same padded body, so a forger who recomputes
 * the header CRC can change cols within the padding; checksums protect against corruption, not forgery.
 */
class PayloadFuzzTest {

  static java.util.List<String> names() {
    return Codecs.names();
  }

  /** Decodes, returning the raw bits of the output, or null on MalformedPayloadException; anything else fails. */
  static int[] decodeBits(AbstractCodec c, byte[] b, int len, int n) {
    float[] out = new float[n];
    try {
      c.decode(b, 0, len, out, 0, false);
    } catch (MalformedPayloadException e) {
      assertThat(e.getMessage()).startsWith(c.name() + " payload: ");
      return null;
    }
    int[] bits = new int[n];
    for (int i = 0; i < n; i++) {
      bits[i] = Float.floatToRawIntBits(out[i]);
    }
    return bits;
  }

  @ParameterizedTest
  @MethodSource("names")
  void bitFlipsAndTruncations(String spec) {
    AbstractCodec c = Codecs.byName(spec);
    SplittableRandom rnd = new SplittableRandom();
    int rows = rnd.nextInt(1, 4);
    int cols = rnd.nextInt(1, 150);
    int n = rows * cols;
    float[] x = Inputs.heavyTailed(rnd.nextLong(), n);
    byte[] good = CodecTest.encode(c, x, rows, cols);
    int[] ref = decodeBits(c, good, good.length, n);
    assertThat(ref).isNotNull();
    for (int len = 0; len < good.length; len++) {
      assertThat(decodeBits(c, good, len, n)).as("%s truncated to %d", spec, len).isNull();
    }
    int survived = 0;
    for (int t = 0; t < 400; t++) {
      byte[] b = good.clone();
      int flips = 1 + rnd.nextInt(3);
      for (int f = 0; f < flips; f++) {
        b[rnd.nextInt(b.length)] ^= (byte) (1 << rnd.nextInt(8));
      }
      int[] got = decodeBits(c, b, b.length, n);
      if (got != null) {
        survived++;
        assertThat(got).as("%s: a flip that survived the checks must decode to the same tensor", spec).isEqualTo(ref);
      }
    }
    assertThat(survived).as("flips that decoded (only flips that cancel each other)").isLessThan(40);
  }

  @ParameterizedTest
  @MethodSource("names")
  void forgedHeadersWithLyingSizesAreRejectedBeforeAllocating(String spec) {
    AbstractCodec c = Codecs.byName(spec);
    byte[] good = CodecTest.encode(c, Inputs.gaussian(7, 2 * 64), 2, 64);
    com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long tid = Thread.currentThread().threadId();
    int[][] shapes = {{46340, 46340}, {1, Integer.MAX_VALUE}, {Integer.MAX_VALUE, 1}, {65536, 32768}, {3, 64},
        {2, 200}};
    for (int[] s : shapes) {
      byte[] b = good.clone();
      Bytes.putInt(b, 12, s[0]);
      Bytes.putInt(b, 16, s[1]);
      Bytes.putInt(b, 20, PayloadHeader.crc(b, 0, 20));
      float[] out = new float[128];
      assertThatThrownBy(() -> c.decode(b, 0, b.length, out, 0, false)); // warm: class loading, message formats
      long before = mx.getThreadAllocatedBytes(tid);
      assertThatThrownBy(() -> c.decode(b, 0, b.length, out, 0, false)).as("%s %dx%d", spec, s[0], s[1])
          .isInstanceOf(MalformedPayloadException.class);
      long allocated = mx.getThreadAllocatedBytes(tid) - before;
      assertThat(allocated).as("%s %dx%d: bytes allocated while rejecting", spec, s[0], s[1]).isLessThan(1 << 20);
      assertThat(out).containsOnly(0f);
    }
    // a forged group size (valid header CRC) for the grouped codecs
    if (c.groupSize() > 0) {
      for (int g : new int[] {0, 1, 16, 48, 512, 65535}) {
        if (g == c.groupSize()) { // nvfp4's own
          continue;
        }
        byte[] b = CodecTest.withField(good, 8, g, 2);
        assertThatThrownBy(() -> c.decode(b, 0, b.length, new float[128], 0, false)).as("%s G=%d", spec, g)
            .isInstanceOf(MalformedPayloadException.class);
      }
    }
    assertThat(Arrays.equals(good, CodecTest.encode(c, Inputs.gaussian(7, 2 * 64), 2, 64))).isTrue();
  }
}
