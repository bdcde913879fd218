package dev.taco.kernels.gpu;

import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.NO_FLOATS;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.NO_SHORTS;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.REAL;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.ROW0;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.ROWS;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.assertOutput;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.bf16;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.chunk;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.cpuBody;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.cpuPayload;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.filled;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.garbage;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.input;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.roundUp16;
import static dev.taco.kernels.gpu.TwoShotGpuKernelsTest.seed;
import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Codecs;
import dev.taco.codec.PayloadHeader;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.cpu.SimtEmulator;
import java.util.Arrays;
import java.util.Random;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link GroupTwoShotKernels}' E2M1 kernels ({@code mxfp4}, {@code nvfp4}) on the exact SIMT emulator against the CPU
 * codecs: bodies byte for byte (compress, and reduce-compress against the encoding of {@code decodeReduce}), decoded and
 * reduced values bit for bit (bf16 outputs: those rounded to nearest even). Chunks of {@code ROWS} payload rows,
 * {@code REAL} of them real, from tensor row {@code ROW0}, as {@link TwoShotGpuKernelsTest}; both kinds, Hadamard on
 * and off, bf16 and fp32 tensors, cols from 1 to 4100 (widths below a block, odd, not multiples of 16 or 32: byte-wise
 * code rows, lanes holding one NVFP4 block, lanes past the last block), world 2..4; and NaN/Inf, sent as the codecs
 * send them under {@code nonfinite=propagate}. The seed is in every message ({@code -Dtaco.seed=S} repeats a run).
 */
class GroupTwoShotFp4Test {
  static final int[] COLS = {1, 7, 16, 17, 48, 100, 333, 1024, 4100};

  /** Both kinds x Hadamard on/off x every width; dtype, world and the own rank rotate over the cases. */
  static Stream<Arguments> cases() {
    int n = COLS.length;
    return IntStream.range(0, 4 * n).mapToObj(i -> Arguments.of(i < 2 * n ? GroupKernels.MXFP4 : GroupKernels.NVFP4,
        i / n % 2 == 0, COLS[i % n], i % 2 == 0, 2 + i % 3, i / 3 % (2 + i % 3)));
  }

  static AbstractCodec codec(int kind, boolean hadamard) {
    return Codecs.byName((kind == GroupKernels.MXFP4 ? "mxfp4" : "nvfp4") + ":hadamard=" + (hadamard ? "on" : "off")
        + ",nonfinite=propagate");
  }

  @ParameterizedTest(name = "kind={0} hadamard={1} cols={2} bf16={3} world={4} me={5}")
  @MethodSource("cases")
  void compressDecompressAndReduceAreTheCodecs(int kind, boolean hadamard, int cols, boolean bf16, int world,
      int me) {
    long seed = seed(kind, hadamard ? 1 : 0, cols, world, me);
    Random rnd = new Random(seed);
    AbstractCodec codec = codec(kind, hadamard);
    int g = GroupKernels.blockSize(kind);
    int threads = GroupTwoShotKernels.fp4Threads(cols, kind);
    int bodyBytes = (int) GroupTwoShotKernels.fp4BodyBytes(ROWS, cols, kind, hadamard);
    assertThat(bodyBytes + PayloadHeader.SIZE).isEqualTo(codec.encodedSize(ROWS, cols));
    int slotBytes = roundUp16(bodyBytes) + 16;
    String why = "seed " + seed;

    // compress: this rank's chunk
    float[] x = input(rnd, cols, g, bf16);
    short[] xb = bf16 ? bf16(x) : NO_SHORTS;
    float[] xf = bf16 ? NO_FLOATS : x;
    byte[] slot = filled(slotBytes, (byte) 0x5A);
    SimtEmulator.launch(ROWS, threads, ctx -> GroupTwoShotKernels.compressFp4(ctx, xb, xf, slot, ROW0, REAL, ROWS, cols,
        kind, hadamard, bf16));
    assertThat(Arrays.copyOf(slot, bodyBytes)).as(why).isEqualTo(cpuBody(codec, chunk(x, cols), cols));
    assertThat(Arrays.copyOfRange(slot, bodyBytes, slotBytes)).as(why + ": past the body").containsOnly((byte) 0x5A);

    // decompress-reduce: into rows, and re-compressed
    byte[] recv = garbage(rnd, world * slotBytes); // slot me and the gaps stay garbage: never read
    byte[][] payloads = TwoShotGpuKernelsTest.peerPayloads(rnd, codec, world, me, cols, g, recv, slotBytes);
    float[] y = new float[ROWS * cols];
    codec.decodeReduce(payloads, ROWS, cols, chunk(x, cols), 0, y, 0);
    byte[] body = filled(bodyBytes + 24, (byte) 0x5A);
    SimtEmulator.launch(ROWS, threads, ctx -> GroupTwoShotKernels.reduceCompressFp4(ctx, xb, xf, recv, slotBytes, me,
        world, body, ROW0, REAL, ROWS, cols, kind, hadamard, bf16));
    assertThat(Arrays.copyOf(body, bodyBytes)).as(why + ": re-compressed").isEqualTo(cpuBody(codec, y, cols));
    assertThat(Arrays.copyOfRange(body, bodyBytes, body.length)).as(why).containsOnly((byte) 0x5A);
    int yRow0 = 5;
    int outRows = yRow0 + REAL + 3;
    short[] yb = bf16 ? filled(new short[outRows * cols], (short) 0x1234) : NO_SHORTS;
    float[] yf = bf16 ? NO_FLOATS : filled(new float[outRows * cols], 1234f);
    SimtEmulator.launch(ROWS, threads, ctx -> GroupTwoShotKernels.reduceFp4Rows(ctx, xb, xf, recv, slotBytes, me, world,
        yb, yf, ROW0, REAL, ROWS, cols, yRow0, kind, hadamard, bf16));
    float[] expectedY = filled(new float[outRows * cols], bf16 ? Bf16.decode((short) 0x1234) : 1234f);
    System.arraycopy(y, 0, expectedY, yRow0 * cols, REAL * cols);
    assertOutput(expectedY, yb, yf, bf16, why + ": reduced rows");

    // decompress every slot of a gathered buffer
    int rowsPerRank = 13;
    int pieceRow0 = 5;
    int pieceRows = 7; // one padding row per slot, and the last rank's piece cut by rowsTotal
    int rowsTotal = (world - 1) * rowsPerRank + pieceRow0 + 3;
    byte[] gathered = garbage(rnd, world * slotBytes);
    float[][] decoded = new float[world][];
    for (int q = 0; q < world; q++) {
      byte[] p = cpuPayload(codec, chunk(input(rnd, cols, g, q % 2 == 0), cols), cols);
      System.arraycopy(p, PayloadHeader.SIZE, gathered, q * slotBytes, bodyBytes);
      decoded[q] = new float[ROWS * cols];
      codec.decode(p, 0, p.length, decoded[q], 0, false);
    }
    short[] outB = bf16 ? filled(new short[rowsTotal * cols], (short) 0x1234) : NO_SHORTS;
    float[] outF = bf16 ? NO_FLOATS : filled(new float[rowsTotal * cols], 1234f);
    SimtEmulator.launch(world * ROWS, threads, ctx -> GroupTwoShotKernels.decompressFp4(ctx, gathered, slotBytes, outB,
        outF, rowsTotal, rowsPerRank, pieceRow0, pieceRows, ROWS, cols, kind, hadamard, bf16));
    float[] expected = TwoShotGpuKernelsTest.gathered(decoded, rowsTotal, rowsPerRank, pieceRow0, pieceRows, cols,
        bf16 ? Bf16.decode((short) 0x1234) : 1234f);
    assertOutput(expected, outB, outF, bf16, why + ": decompressed");
  }

  /**
   * MXFP4's compress multiplies by the reciprocal of its power-of-two scale where the CPU codec divides: the same bits
   * across E8M0's range, blocks of subnormal values (scale 2^-127, reciprocal 2^127) up to the largest the codec takes
   * (2^119), each block a different magnitude, with and without the rotation.
   */
  @Test
  void mxfp4ScalesAtTheEndsOfTheirRangeGiveTheCodecsBits() {
    for (boolean hadamard : new boolean[] {true, false}) {
      int cols = 320; // ten blocks of 32
      long seed = seed(GroupKernels.MXFP4, hadamard ? 1 : 0, 320);
      Random rnd = new Random(seed);
      float[] x = input(rnd, cols, 32, false);
      int[] exponents = {-149, -140, -127, -126, -100, 0, 60, 100, 110, 117}; // the codec takes |x| <= 2^119
      for (int r = ROW0; r < ROW0 + REAL; r++) {
        for (int c = 0; c < cols; c++) {
          x[r * cols + c] = Math.scalb((float) (rnd.nextGaussian() * 0.4), exponents[c / 32]);
        }
      }
      AbstractCodec codec = codec(GroupKernels.MXFP4, hadamard);
      byte[] body = new byte[(int) GroupTwoShotKernels.fp4BodyBytes(ROWS, cols, GroupKernels.MXFP4, hadamard)];
      SimtEmulator.launch(ROWS, GroupTwoShotKernels.fp4Threads(cols, GroupKernels.MXFP4),
          ctx -> GroupTwoShotKernels.compressFp4(ctx, NO_SHORTS, x, body, ROW0, REAL, ROWS, cols, GroupKernels.MXFP4,
              hadamard, false));
      assertThat(body).as("seed %d hadamard %s", seed, hadamard).isEqualTo(cpuBody(codec, chunk(x, cols), cols));
    }
  }

  /** NaN and +-Inf (rows of them, and lone ones in blocks that are otherwise rotated) go as the marker code. */
  @Test
  void nonFiniteValuesAreSentAsTheCodecsSendThemUnderPropagate() {
    for (int kind : new int[] {GroupKernels.MXFP4, GroupKernels.NVFP4}) {
      for (boolean hadamard : new boolean[] {true, false}) {
        int cols = 100;
        long seed = seed(kind, hadamard ? 1 : 0, 77);
        float[] x = input(new Random(seed), cols, 32, false);
        x[ROW0 * cols + 3] = Float.NaN;
        x[ROW0 * cols + 40] = Float.NEGATIVE_INFINITY;
        for (int c = 0; c < cols; c++) {
          x[(ROW0 + 4) * cols + c] = c % 2 == 0 ? Float.POSITIVE_INFINITY : 1f;
        }
        AbstractCodec codec = codec(kind, hadamard);
        int bodyBytes = (int) GroupTwoShotKernels.fp4BodyBytes(ROWS, cols, kind, hadamard);
        byte[] body = new byte[bodyBytes];
        SimtEmulator.launch(ROWS, GroupTwoShotKernels.fp4Threads(cols, kind), ctx -> GroupTwoShotKernels.compressFp4(
            ctx, NO_SHORTS, x, body, ROW0, REAL, ROWS, cols, kind, hadamard, false));
        assertThat(body).as("seed %d kind %d hadamard %s", seed, kind, hadamard).isEqualTo(cpuBody(codec, chunk(x,
            cols), cols));
        float[] out = new float[ROWS * cols];
        SimtEmulator.launch(ROWS, GroupTwoShotKernels.fp4Threads(cols, kind), ctx -> GroupTwoShotKernels.decompressFp4(
            ctx, body, bodyBytes, NO_SHORTS, out, ROWS, ROWS, 0, ROWS, ROWS, cols, kind, hadamard, false));
        assertThat(out[3]).isNaN();
        assertThat(out[40]).isNaN();
        assertThat(out[4 * cols + 1]).isEqualTo(1f);
        assertThat(Float.isFinite(out[5])).isTrue();
      }
    }
  }

  @Test
  void shapesAreCheckedAndTheCatalogCoversEveryCombination() {
    GroupTwoShotKernels.checkFp4Shape(8, 16384, GroupKernels.NVFP4, true);
    for (int[] bad : new int[][] {{0, 16, GroupKernels.MXFP4}, {8, 16385, GroupKernels.MXFP4},
        {8, 16, GroupKernels.INT8}}) {
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> GroupTwoShotKernels.checkFp4Shape(bad[0], bad[1], bad[2],
          false)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("two-shot GPU");
    }
    assertThat(GroupTwoShotKernels.fp4Units()).hasSize(8).containsKey("fp4-k3-h1-bf16").containsKey("fp4-k4-h0-f32");
    assertThat(GroupTwoShotKernels.kernels()).hasSize(6 + 8 * 4);
    assertThat(GroupTwoShotKernels.fp4Threads(4096, GroupKernels.NVFP4)).isEqualTo(128);
    assertThat(GroupTwoShotKernels.fp4Threads(17, GroupKernels.MXFP4)).isEqualTo(32);
  }
}
