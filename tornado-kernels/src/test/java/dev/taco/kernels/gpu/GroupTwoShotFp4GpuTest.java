package dev.taco.kernels.gpu;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Codecs;
import dev.taco.codec.PayloadHeader;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import dev.taco.kernels.cuda.Launcher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link GroupTwoShotKernels}' E2M1 kernels on a GPU against the CPU codecs ({@code mxfp4}, {@code nvfp4}, Hadamard
 * on and off, fp32 and bf16 tensors): compressed bodies byte for byte, decoded values bit for bit (bf16: the CPU's
 * rounded to nearest even), decompress-reduce into rows and its re-compression against {@code decodeReduce}, for
 * shapes with and without the 8-byte code path ({@code cols} multiples of 16 and not), a NaN/Inf chunk sent as under
 * {@code nonfinite=propagate} (NaN positions compared, not their bits). What {@link GroupTwoShotFp4Test} checks on the
 * emulator, on the hardware. Skipped, with the reason, where there is no GPU; the seed is printed
 * ({@code -Dtaco.seed=N} repeats it).
 */
@Tag("gpu")
class GroupTwoShotFp4GpuTest {
  private static final long SEED = Long.getLong("taco.seed", System.nanoTime());

  /** rows x cols (rows a multiple of 8, as the device collectives pad them); realRows below them. */
  static final int[][] SHAPES = {{8, 4096, 8}, {16, 768, 13}, {8, 100, 5}, {24, 333, 24}, {8, 16384, 3}};

  static float[] input(SplittableRandom r, int rows, int cols, boolean bf16) {
    float[] x = new float[rows * cols];
    for (int i = 0; i < x.length; i++) {
      double v = r.nextGaussian() * Math.exp(r.nextGaussian()) * (i % cols % 37 == 3 ? 300 : 1);
      x[i] = bf16 ? Bf16.decode(Bf16.encode((float) v)) : (float) v;
    }
    return x;
  }

  static DeviceBuffer upload(CudaContext ctx, float[] x, boolean bf16) {
    DeviceBuffer b = ctx.alloc(Math.max(16, (long) x.length * (bf16 ? 2 : 4)));
    if (bf16) {
      b.copyFrom(TwoShotGpuKernelsTest.bf16(x));
    } else {
      b.copyFrom(x);
    }
    return b;
  }

  static float[] download(DeviceBuffer b, int n, boolean bf16) {
    float[] out = new float[n];
    if (bf16) {
      short[] s = new short[n];
      b.copyToHost(s, 0, n, 0);
      for (int i = 0; i < n; i++) out[i] = Bf16.decode(s[i]);
    } else {
      b.copyToHost(out, 0, n, 0);
    }
    return out;
  }

  static byte[] bytes(DeviceBuffer b, int n) {
    byte[] out = new byte[n];
    b.copyToHost(out, 0, n, 0);
    return out;
  }

  /** Mismatches between two float arrays: bits, any NaN matching any NaN; for bf16 the expected values rounded. */
  static long mismatches(float[] got, float[] want, boolean bf16) {
    long bad = 0;
    for (int i = 0; i < want.length; i++) {
      float w = bf16 ? Bf16.decode(Bf16.encode(want[i])) : want[i];
      boolean same = Float.isNaN(w) ? Float.isNaN(got[i])
          : Float.floatToRawIntBits(got[i]) == Float.floatToRawIntBits(w);
      bad += same ? 0 : 1;
    }
    return bad;
  }

  static long differ(byte[] a, byte[] b) {
    long n = 0;
    for (int i = 0; i < b.length; i++) {
      n += a[i] == b[i] ? 0 : 1;
    }
    return n;
  }

  static float[] chunk(float[] x, int rows, int realRows, int cols) {
    float[] c = new float[rows * cols];
    System.arraycopy(x, 0, c, 0, realRows * cols);
    return c;
  }

  static byte[] payload(AbstractCodec c, float[] chunk, int rows, int cols) {
    byte[] p = new byte[c.encodedSize(rows, cols)];
    c.encode(chunk, 0, rows, cols, p, 0);
    return p;
  }

  @Test
  void theKernelsGiveTheCodecsBytesAndFloats() {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
    System.out.println("GroupTwoShotFp4GpuTest seed = " + SEED);
    SplittableRandom r = new SplittableRandom(SEED);
    List<String> failures = new ArrayList<>();
    int checked = 0;
    try (CudaContext ctx = CudaContext.open(0); CudaStream stream = ctx.createStream()) {
      Launcher launch = new Launcher(ctx);
      for (int kind : new int[] {GroupKernels.MXFP4, GroupKernels.NVFP4}) {
        for (boolean h : new boolean[] {true, false}) {
          AbstractCodec codec = Codecs.byName((kind == GroupKernels.MXFP4 ? "mxfp4" : "nvfp4") + ":hadamard="
              + (h ? "on" : "off") + ",nonfinite=propagate");
          for (int[] s : SHAPES) {
            for (boolean bf16 : new boolean[] {false, true}) {
              int rows = s[0], cols = s[1], real = s[2], world = 2 + r.nextInt(3), me = r.nextInt(world);
              String at = codec + " " + rows + "x" + cols + " real " + real + (bf16 ? " bf16" : " fp32") + " world "
                  + world + " me " + me + ", seed " + SEED;
              int bodyBytes = (int) GroupTwoShotKernels.fp4BodyBytes(rows, cols, kind, h);
              int slot = (bodyBytes + 15) / 16 * 16;
              Dim3 grid = Dim3.of(rows);
              Dim3 block = Dim3.of(GroupTwoShotKernels.fp4Threads(cols, kind));
              float[] x = input(r, rows, cols, bf16);
              if (kind == GroupKernels.NVFP4 && !h && cols == 100) {
                x[3] = Float.NaN; // a chunk as nonfinite=propagate sends it
                x[cols + 7] = Float.NEGATIVE_INFINITY;
              }
              float[][] peers = new float[world][];
              byte[][] payloads = new byte[world][];
              byte[] recvHost = new byte[world * slot];
              for (int q = 0; q < world; q++) {
                if (q != me) {
                  peers[q] = chunk(input(r, rows, cols, bf16), rows, real, cols);
                  payloads[q] = payload(codec, peers[q], rows, cols);
                  System.arraycopy(payloads[q], PayloadHeader.SIZE, recvHost, q * slot, bodyBytes);
                }
              }
              float[] own = chunk(x, rows, real, cols);
              byte[] want = Arrays.copyOfRange(payload(codec, own, rows, cols), PayloadHeader.SIZE,
                  PayloadHeader.SIZE + bodyBytes);
              float[] reduced = new float[rows * cols];
              codec.decodeReduce(payloads, rows, cols, own, 0, reduced, 0);
              byte[] wantReduced = Arrays.copyOfRange(payload(codec, reduced, rows, cols), PayloadHeader.SIZE,
                  PayloadHeader.SIZE + bodyBytes);
              float[] decoded = new float[rows * cols];
              byte[] p = payload(codec, own, rows, cols);
              codec.decode(p, 0, p.length, decoded, 0, false);
              try (DeviceBuffer dx = upload(ctx, x, bf16); DeviceBuffer body = ctx.alloc(slot);
                  DeviceBuffer recv = ctx.alloc(world * (long) slot); DeviceBuffer y = ctx.alloc(4L * rows * cols);
                  DeviceBuffer out = ctx.alloc(4L * rows * cols)) {
                recv.copyFromHost(recvHost, 0, recvHost.length, 0);
                launch.on(grid, block, stream).task("compressFp4", GroupTwoShotKernels::compressFp4, KERNEL_CONTEXT,
                    dx, dx, body, 0, real, rows, cols, kind, h, bf16);
                stream.synchronize();
                long bad = differ(bytes(body, bodyBytes), want);
                failures.add(bad == 0 ? null : at + ": compress, " + bad + " of " + bodyBytes + " bytes differ");
                launch.on(Dim3.of(rows), block, stream).task("decompressFp4", GroupTwoShotKernels::decompressFp4,
                    KERNEL_CONTEXT, body, slot, out, out, rows, rows, 0, rows, rows, cols, kind, h, bf16);
                stream.synchronize();
                bad = mismatches(download(out, rows * cols, bf16), decoded, bf16);
                failures.add(bad == 0 ? null : at + ": decompress, " + bad + " values differ");
                launch.on(grid, block, stream).task("reduceCompressFp4", GroupTwoShotKernels::reduceCompressFp4,
                    KERNEL_CONTEXT, dx, dx, recv, slot, me, world, body, 0, real, rows, cols, kind, h, bf16);
                stream.synchronize();
                bad = differ(bytes(body, bodyBytes), wantReduced);
                failures.add(bad == 0 ? null : at + ": reduce-compress, " + bad + " bytes differ");
                launch.on(grid, block, stream).task("reduceFp4Rows", GroupTwoShotKernels::reduceFp4Rows,
                    KERNEL_CONTEXT, dx, dx, recv, slot, me, world, y, y, 0, real, rows, cols, 0, kind, h, bf16);
                stream.synchronize();
                bad = mismatches(Arrays.copyOf(download(y, rows * cols, bf16), real * cols),
                    Arrays.copyOf(reduced, real * cols), bf16);
                failures.add(bad == 0 ? null : at + ": reduce into rows, " + bad + " values differ");
                checked += 4;
              }
            }
          }
        }
      }
    }
    failures.removeIf(f -> f == null);
    System.out.println(checked + " kernel results compared with the CPU codecs, " + failures.size() + " differ");
    assertThat(failures).isEmpty();
  }
}
