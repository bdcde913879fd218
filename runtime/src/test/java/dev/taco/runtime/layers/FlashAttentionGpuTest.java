package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.cpu.SimtEmulator;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link FlashAttention}'s kernels on the GPU (tensor cores, {@code mma.sync}): against the float64 reference of
 * {@link FlashAttentionTest} within the same bounds (device run 7 of 2026-12-01: out 0.8-1.2e-3, gradients 1.2-5.1e-3,
 * lse 4e-8; GPU against emulator 3e-8 to 4e-5), and against the SIMT emulator's run of the same kernels on the same
 * inputs, which checks the emulator's model of the mma fragment layout against the hardware (a wrong layout moves the
 * results by their own size; the two differ only in how the 16 products of an mma are summed, and in the odd bf16
 * rounding of P or dS that this tips). Skipped with the reason where there is no GPU. Fresh random inputs; the seed is in
 * every message.
 */
@Tag("gpu")
class FlashAttentionGpuTest {
  static final int THREADS = FlashAttention.WARPS * 32;
  private static CudaContext ctx;

  @BeforeAll
  static void open() {
    if (Cuda.available()) ctx = CudaContext.open(0);
  }

  @AfterAll
  static void close() {
    if (ctx != null) ctx.close();
  }

  @ParameterizedTest(name = "B={0} NH={1} T={2} HS={3}, emulator too: {4}")
  @CsvSource({"2, 2, 80, 32, true, 6e-3", "1, 3, 130, 64, true, 6e-3", "1, 1, 17, 16, true, 1.5e-2",
      "2, 3, 300, 48, false, 6e-3", "1, 2, 1030, 64, false, 6e-3"})
  void matchesFloat64AndTheEmulator(int B, int NH, int T, int HS, boolean emulate, double gradBound) {
    assumeTrue(ctx != null, Cuda.unavailableReason());
    long seed = System.nanoTime();
    String tag = "seed " + seed;
    Random rnd = new Random(seed);
    int D = NH * HS, bht = B * NH * T;
    float scale = Attention.scale(HS);
    float[] qkv = Bufs.input(B * T * 3 * D, rnd, 1.0);
    float[] dout = Bufs.input(B * T * D, rnd, 1.0);
    short[] qkv16 = FlashAttentionTest.bf16Copy(qkv, B * T * 3 * D);
    short[] dout16 = FlashAttentionTest.bf16Copy(dout, B * T * D);
    float[] out = new float[OFF + B * T * D], lse = new float[OFF + bht], dqkv = new float[OFF + B * T * 3 * D];
    short[] outCopy = FlashAttentionTest.bf16Copy(FlashAttentionTest.poisoned(B * T * D), B * T * D);
    short[] dqkvCopy = FlashAttentionTest.bf16Copy(FlashAttentionTest.poisoned(B * T * 3 * D), B * T * 3 * D);
    short[] doutCopy = FlashAttentionTest.bf16Copy(FlashAttentionTest.poisoned(B * T * D), B * T * D);
    try (CudaStream stream = ctx.createStream();
        DeviceBuffer dQkv = upload(qkv16); DeviceBuffer dDout = upload(dout); DeviceBuffer dDout16 = upload(dout16);
        DeviceBuffer dOut = poisoned(out.length); DeviceBuffer dLse = poisoned(lse.length);
        DeviceBuffer dSum = poisoned(lse.length); DeviceBuffer dDqkv = poisoned(dqkv.length);
        DeviceBuffer dOutCopy = upload(outCopy); DeviceBuffer dDqkvCopy = upload(dqkvCopy);
        DeviceBuffer dDoutCopy = upload(doutCopy)) {
      long o = 4L * OFF, o16 = 2L * FlashAttentionTest.OFF16; // every tensor where it is on the JVM
      Dim3 grid = Dim3.of(FlashAttention.blocks(B, NH, T)), block = Dim3.of(THREADS);
      ctx.kernel(LayerKernels.flash("flashForward", HS)).launch(grid, block, 0, stream, dOut.pointer() + o, 0,
          dOutCopy.pointer() + o16, 0, dLse.pointer() + o, 0, dQkv.pointer() + o16, 0, B, T, NH, scale);
      ctx.kernel(dev.taco.kernels.compiler.KernelRequest.of(FlashAttention.class, "flashBackwardDot")).launch(
          Dim3.of((bht + FlashAttention.WARPS - 1) / FlashAttention.WARPS), block, 0, stream, dSum.pointer() + o, 0,
          dDoutCopy.pointer() + o16, 0, dDout.pointer() + o, 0, dOut.pointer() + o, 0, B, T, NH, HS);
      for (String k : new String[] {"flashBackwardKeyValue", "flashBackwardQuery"}) {
        ctx.kernel(LayerKernels.flash(k, HS)).launch(grid, block, 0, stream, dDqkv.pointer() + o, 0,
            dDqkvCopy.pointer() + o16, 0, 1, dDout16.pointer() + o16, 0, dQkv.pointer() + o16, 0, dLse.pointer() + o, 0,
            dSum.pointer() + o, 0, B, T,
            NH, scale);
      }
      stream.synchronize();
      dOut.copyTo(out);
      dLse.copyTo(lse);
      dDqkv.copyTo(dqkv);
      dOutCopy.copyTo(outCopy);
      dDqkvCopy.copyTo(dqkvCopy);
      dDoutCopy.copyTo(doutCopy);
    }
    assertThat(doutCopy).as("the dot kernel's bf16 dO, %s", tag).isEqualTo(dout16);
    FlashAttentionTest.assertCopy("out", outCopy, out, B * T * D); // the hardware cvt, bit for bit Bf16.encode's
    FlashAttentionTest.assertCopy("dqkv", dqkvCopy, dqkv, B * T * 3 * D);
    FlashAttentionTest.Reference ref = FlashAttentionTest.reference(FlashAttentionTest.bf16(qkv),
        FlashAttentionTest.bf16(dout), B, T, NH, HS);
    double eOut = FlashAttentionTest.relL2(out, ref.out()), eLse = FlashAttentionTest.relL2(lse, ref.lse());
    double[] eGrad = new double[3];
    for (int part = 0; part < 3; part++) {
      eGrad[part] = FlashAttentionTest.relL2(FlashAttentionTest.part(dqkv, B, T, D, part),
          FlashAttentionTest.part(ref.dqkv(), B, T, D, part));
    }
    System.out.printf("flash on the GPU, B=%d NH=%d T=%d HS=%d vs float64: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e%n",
        B, NH, T, HS, eOut, eLse, eGrad[0], eGrad[1], eGrad[2]);
    assertThat(eOut).as("out, %s", tag).isLessThan(4e-3);
    assertThat(eLse).as("lse, %s", tag).isLessThan(1e-6);
    for (int part = 0; part < 3; part++) {
      assertThat(eGrad[part]).as("d%s, %s", "qkv".charAt(part), tag).isLessThan(gradBound);
    }
    if (!emulate) return;
    float[] eo = FlashAttentionTest.poisoned(B * T * D), el = FlashAttentionTest.poisoned(bht);
    float[] es = FlashAttentionTest.poisoned(bht), eg = FlashAttentionTest.poisoned(B * T * 3 * D);
    int o16 = FlashAttentionTest.OFF16;
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS,
        k -> FlashAttention.flashForward(k, eo, OFF, outCopy, o16, el, OFF, qkv16, o16, B, T, NH, HS, scale));
    SimtEmulator.launch((bht + FlashAttention.WARPS - 1) / FlashAttention.WARPS, THREADS,
        k -> FlashAttention.flashBackwardDot(k, es, OFF, doutCopy, o16, dout, OFF, eo, OFF, B, T, NH, HS));
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS, k -> FlashAttention.flashBackwardKeyValue(k, eg, OFF,
        dqkvCopy, o16, 1, dout16, o16, qkv16, o16, el, OFF, es, OFF, B, T, NH, HS, scale));
    SimtEmulator.launch(FlashAttention.blocks(B, NH, T), THREADS, k -> FlashAttention.flashBackwardQuery(k, eg, OFF,
        dqkvCopy, o16, 1, dout16, o16, qkv16, o16, el, OFF, es, OFF, B, T, NH, HS, scale));
    double dOut = relDiff(out, eo, B * T * D), dGrad = relDiff(dqkv, eg, B * T * 3 * D);
    System.out.printf("  GPU vs emulator: out %.2e, dqkv %.2e%n", dOut, dGrad);
    assertThat(dOut).as("out, GPU vs emulator, %s", tag).isLessThan(1e-3);
    assertThat(dGrad).as("dqkv, GPU vs emulator, %s", tag).isLessThan(2e-3);
  }

  /** The host array on the device, its NaN pads ({@link Bufs#input}) included: a read outside a tensor shows. */
  private static DeviceBuffer upload(float[] host) {
    DeviceBuffer d = ctx.alloc(4L * host.length);
    d.copyFrom(host);
    return d;
  }

  /** A bf16 copy ({@link FlashAttentionTest#bf16Copy}, NaN pads included) on the device. */
  private static DeviceBuffer upload(short[] host) {
    DeviceBuffer d = ctx.alloc(2L * host.length);
    d.copyFrom(host);
    return d;
  }

  /** A buffer of {@code n} NaNs: an element the kernels do not write stays NaN and fails every bound. */
  private static DeviceBuffer poisoned(int n) {
    float[] nan = new float[n];
    Arrays.fill(nan, Float.NaN);
    DeviceBuffer d = ctx.alloc(4L * n);
    d.copyFrom(nan);
    return d;
  }

  /** ‖a − b‖ / ‖b‖ over {@code n} elements at {@link Bufs#OFF}. */
  private static double relDiff(float[] a, float[] b, int n) {
    double num = 0, den = 0;
    for (int i = OFF; i < OFF + n; i++) {
      double d = (double) a[i] - b[i];
      num += d * d;
      den += (double) b[i] * b[i];
    }
    return Math.sqrt(num / den);
  }
}
