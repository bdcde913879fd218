package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.codec.Fp8Format;
import dev.taco.codec.PayloadHeader;
import dev.taco.codec.TacoCodec;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.cpu.SimtEmulator;
import java.util.Arrays;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The GPU kernels of {@link TacoGpuKernels} run on the exact SIMT emulator (no GPU needed): their body bytes equal the
 * CPU {@link TacoCodec}'s body byte for byte, their decode equals the CPU decode bit for bit, for every supported G,
 * Hadamard on/off, both FP8 formats, bf16 and fp32 input, fused and unfused.
 */
class TacoGpuKernelsTest {
  static final int ROWS = 4;
  static final int COLS = 3072; // 3 warps per row: the cross-warp reduction with a non-power-of-two warp count

  static Stream<Arguments> configs() {
    return Stream.of(64, 128, 256).flatMap(g -> Stream.of(
        Arguments.of(g, true, Fp8.E4M3, g), Arguments.of(g, false, Fp8.E4M3, g + 1), Arguments.of(g, true, Fp8.E5M2,
            g + 2)));
  }

  /**
   * Gaussian rows with outlier channels (x 300), a group 2^-40 below its row's max, an all-zero group and an all-zero
   * row; values are bf16-representable (the bf16 and fp32 paths see the same numbers).
   */
  static float[] input(int groupSize, long seed) {
    Random rnd = new Random(seed);
    float[] x = new float[ROWS * COLS];
    for (int i = 0; i < x.length; i++) {
      int col = i % COLS;
      double s = col % 97 == 5 ? 300 : 1;
      x[i] = Bf16.decode(Bf16.encode((float) (rnd.nextGaussian() * s)));
    }
    for (int c = 0; c < groupSize; c++) {
      x[COLS + groupSize + c] = Math.scalb(x[COLS + groupSize + c], -40); // row 1, group 1: quiet
      x[2 * COLS + c] = 0f; // row 2, group 0: zeros
      x[3 * COLS + c] = -0f;
    }
    Arrays.fill(x, 3 * COLS, 4 * COLS, 0f); // row 3: zeros
    return x;
  }

  static short[] bf16(float[] x) {
    short[] b = new short[x.length];
    for (int i = 0; i < x.length; i++) {
      b[i] = Bf16.encode(x[i]);
    }
    return b;
  }

  static TacoCodec cpu(int g, boolean hadamard, int format) {
    return new TacoCodec(g, format == Fp8.E4M3 ? Fp8Format.E4M3 : Fp8Format.E5M2, 1f, hadamard);
  }

  static byte[] cpuPayload(TacoCodec codec, float[] x) {
    byte[] p = new byte[codec.encodedSize(ROWS, COLS)];
    codec.encode(x, 0, ROWS, COLS, p, 0);
    return p;
  }

  static byte[] body(byte[] payload) {
    return Arrays.copyOfRange(payload, PayloadHeader.SIZE, payload.length);
  }

  static int threads() {
    return COLS / TacoGpuKernels.V;
  }

  @ParameterizedTest(name = "G={0} hadamard={1} format={2}")
  @MethodSource("configs")
  void fusedCompressBodyEqualsCpuCodec(int g, boolean hadamard, int format, long seed) {
    float[] x = input(g, seed);
    byte[] expected = body(cpuPayload(cpu(g, hadamard, format), x));
    short[] xb = bf16(x);
    byte[] fromBf16 = new byte[expected.length];
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.compress(ctx, xb, new float[0], fromBf16, ROWS, COLS,
        g, hadamard, format, true));
    assertThat(fromBf16).isEqualTo(expected);
    byte[] fromF32 = new byte[expected.length];
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.compress(ctx, new short[0], x, fromF32, ROWS, COLS,
        g, hadamard, format, false));
    assertThat(fromF32).isEqualTo(expected);
  }

  @ParameterizedTest(name = "G={0} hadamard={1} format={2}")
  @MethodSource("configs")
  void unfusedCompressBodyEqualsCpuCodec(int g, boolean hadamard, int format, long seed) {
    float[] x = input(g, seed);
    byte[] expected = body(cpuPayload(cpu(g, hadamard, format), x));
    short[] xb = bf16(x);
    byte[] out = new byte[expected.length];
    float[] groupMax = new float[ROWS * COLS / g];
    float[] work = new float[ROWS * COLS];
    float[] none = new float[0];
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.unfusedStats(ctx, xb, none, out, groupMax, ROWS, COLS,
        g, hadamard, format, true));
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.unfusedTransform(ctx, xb, none, groupMax, work, COLS,
        g, hadamard, true));
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.unfusedEncode(ctx, work, groupMax, out, ROWS, COLS,
        g, format));
    assertThat(out).isEqualTo(expected);
  }

  @ParameterizedTest(name = "G={0} hadamard={1} format={2}")
  @MethodSource("configs")
  void decompressEqualsCpuDecodeBitForBit(int g, boolean hadamard, int format, long seed) {
    TacoCodec codec = cpu(g, hadamard, format);
    byte[] payload = cpuPayload(codec, input(g, seed));
    byte[] body = body(payload);
    float[] expected = new float[ROWS * COLS];
    codec.decode(payload, 0, payload.length, expected, 0, false);

    float[] f32 = new float[ROWS * COLS];
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.decompress(ctx, body, new short[0], f32, ROWS, COLS,
        g, hadamard, format, false, false));
    assertThat(bits(f32)).isEqualTo(bits(expected));

    short[] b16 = new short[ROWS * COLS];
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.decompress(ctx, body, b16, new float[0], ROWS, COLS,
        g, hadamard, format, true, false));
    assertThat(b16).isEqualTo(bf16(expected));

    float[] acc = new float[ROWS * COLS];
    Random rnd = new Random(seed);
    for (int i = 0; i < acc.length; i++) {
      acc[i] = i % 11 == 0 ? -0f : (float) rnd.nextGaussian();
    }
    float[] expectedAcc = acc.clone();
    codec.decode(payload, 0, payload.length, expectedAcc, 0, true);
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.decompress(ctx, body, new short[0], acc, ROWS, COLS,
        g, hadamard, format, false, true));
    assertThat(bits(acc)).isEqualTo(bits(expectedAcc));
  }

  /**
   * Rows near the float32 max: decoded values can round past it and are clamped to +-MAX as the CPU decoder does
   * (with Hadamard the transform's sums reach FP8MAX * sqrt(G) before the decode multiplier, so the GPU's check for
   * "may overflow" must allow for that).
   */
  @ParameterizedTest(name = "G={0} hadamard={1} format={2}")
  @MethodSource("configs")
  void rowsNearTheFloatMaxDecodeAsTheCpu(int g, boolean hadamard, int format, long seed) {
    TacoCodec codec = cpu(g, hadamard, format);
    float[] x = input(g, seed);
    Random rnd = new Random(seed);
    for (int i = 0; i < COLS; i++) { // row 0: +-bf16 max, row 1: Gaussian times 1e38, clipped
      x[i] = Bf16.decode(Bf16.MAX_CODE) * (rnd.nextBoolean() ? 1 : -1);
      x[COLS + i] = Bf16.decode(Bf16.encode((float) Math.max(-3e38, Math.min(3e38, rnd.nextGaussian() * 1e38))));
    }
    byte[] payload = cpuPayload(codec, x);
    float[] expected = new float[ROWS * COLS];
    codec.decode(payload, 0, payload.length, expected, 0, false);
    float[] f32 = new float[ROWS * COLS];
    byte[] body = body(payload);
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.decompress(ctx, body, new short[0], f32, ROWS, COLS,
        g, hadamard, format, false, false));
    assertThat(bits(f32)).isEqualTo(bits(expected));
    long clamped = 0;
    for (float e : expected) {
      assertThat(Float.isFinite(e)).isTrue();
      clamped += Math.abs(e) == Float.MAX_VALUE ? 1 : 0;
    }
    if (hadamard) { // the transform spreads each code's rounding over the group: some values round past MAX
      assertThat(clamped).isPositive();
    }
  }

  /**
   * A row holding NaN or Inf gets a NaN coarse scale from the GPU kernel (the GPU path does not encode non-finite
   * values): the CPU decoder refuses the payload naming that row, and the GPU decoder gives NaN for the row, never
   * numbers that look right. The other rows are unaffected.
   */
  @ParameterizedTest(name = "{0}")
  @org.junit.jupiter.params.provider.ValueSource(floats = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY})
  void nonFiniteRowIsMarkedNotSilentlyEncoded(float bad) {
    TacoCodec codec = cpu(64, true, Fp8.E4M3);
    float[] x = input(64, 11);
    byte[] finite = cpuPayload(codec, x);
    x[COLS + 77] = bad; // row 1
    byte[] gpuBody = new byte[finite.length - PayloadHeader.SIZE];
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.compress(ctx, new short[0], x, gpuBody, ROWS, COLS,
        64, true, Fp8.E4M3, false));
    assertThat(Float.isNaN(dev.taco.kernels.Bytes.getFloat(gpuBody, 4))).isTrue();
    assertThat(Arrays.copyOfRange(gpuBody, 0, 4)).isEqualTo(Arrays.copyOfRange(body(finite), 0, 4)); // row 0 intact
    byte[] payload = finite.clone();
    System.arraycopy(gpuBody, 0, payload, PayloadHeader.SIZE, gpuBody.length);
    PayloadHeader.read(finite, 0, finite.length, PayloadHeader.TACO, "taco")
        .write(payload, 0, PayloadHeader.crc(payload, PayloadHeader.SIZE, gpuBody.length));
    float[] out = new float[ROWS * COLS];
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> codec.decode(payload, 0, payload.length, out, 0, false))
        .hasMessageContaining("row 1");
    float[] dec = new float[ROWS * COLS];
    SimtEmulator.launch(ROWS, threads(), ctx -> TacoGpuKernels.decompress(ctx, gpuBody, new short[0], dec, ROWS, COLS,
        64, true, Fp8.E4M3, false, false));
    for (int i = COLS; i < 2 * COLS; i++) {
      assertThat(dec[i]).as("row 1 col %d", i - COLS).isNaN();
    }
  }

  static int[] bits(float[] a) {
    int[] b = new int[a.length];
    for (int i = 0; i < a.length; i++) {
      b[i] = Float.floatToRawIntBits(a[i]);
    }
    return b;
  }
}
