package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Fp8TensorCodec;
import dev.taco.codec.Int8GroupCodec;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.codec.PayloadHeader;
import dev.taco.kernels.cuda.KernelSources;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link GroupTwoShotKernels} run on the JVM (plain loops: the code the GPU runs, translated with Java's float
 * semantics) against {@link Int8GroupCodec} and {@link Fp8TensorCodec} on the same chunks, fresh random shapes and
 * values (seed printed), group sizes 32..256, widths that do not divide into groups, zero padding rows and 2..4
 * ranks: bodies byte for byte, the
 * decompress-reduce ({@code decodeReduce}), its re-compression, and the decompression of every gathered slot bit for bit.
 * And the three kernels translate to CUDA C that {@code nvcc --ptx -arch=sm_90} compiles (skipped without nvcc).
 */
class GroupTwoShotKernelsTest {
  @TempDir
  Path dir;

  @Test
  void theKernelsTranslateAndCompileWithNvcc() throws Exception {
    // the absmax kernels (the E2M1 ones, specialised, are TwoShotGpuCudaTest's)
    List<KernelRequest> absmax = GroupTwoShotKernels.kernels().stream().filter(r -> r.constants().isEmpty()).toList();
    assertThat(absmax).hasSize(6);
    translateAndCompile(dir, absmax, "the int8-group and fp8-tensor kernels");
  }

  /** Translates {@code kernels} into {@code dir} and compiles each with {@code nvcc --ptx -arch=sm_90} (if on PATH). */
  static void translateAndCompile(Path dir, List<KernelRequest> kernels, String what) throws Exception {
    List<Path> files = new KernelSources(dir, List.of(Path.of("src/main/java"))).pretranslate(kernels);
    assertThat(files).hasSize(kernels.size());
    Path nvcc = null;
    for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      if (Files.isExecutable(Path.of(d, "nvcc"))) nvcc = Path.of(d, "nvcc");
    }
    assumeTrue(nvcc != null, "nvcc is not on PATH: the CUDA compile check of " + what + " is skipped");
    for (Path cu : files) {
      Process p = new ProcessBuilder(nvcc.toString(), "--ptx", "-arch=sm_90", "-o", dir.resolve("k.ptx").toString(),
          cu.toString()).redirectErrorStream(true).start();
      String log = new String(p.getInputStream().readAllBytes());
      assertThat(p.waitFor(300, TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as("%s:%n%s", cu, log).isZero();
    }
  }

  /** The device compress of a chunk, as {@code collective.device.DeviceWire} sequences the kernels. */
  static void compress(float[] x, byte[] body, int row0, int realRows, int rows, int cols, int g, int kind) {
    if (g > 0) {
      GroupTwoShotKernels.compressGroups(x, body, row0, realRows, rows, cols, g, kind);
    } else {
      float[] partial = new float[GroupTwoShotKernels.PARTS], second = new float[GroupTwoShotKernels.FOLDED];
      GroupTwoShotKernels.absmaxPartials(x, partial, row0, realRows, cols, partial.length);
      GroupTwoShotKernels.absmaxPartials(partial, second, 0, 1, partial.length, second.length);
      GroupTwoShotKernels.absmaxFinish(second, body, second.length);
      GroupTwoShotKernels.encodeTensor(x, body, row0, realRows, rows, cols, kind);
    }
  }

  /** The codec's body for rows {@code row0 .. row0 + realRows} of {@code x} and {@code rows - realRows} zero rows. */
  static byte[] cpuPayload(AbstractCodec codec, float[] x, int row0, int realRows, int rows, int cols) {
    float[] chunk = new float[rows * cols];
    System.arraycopy(x, row0 * cols, chunk, 0, realRows * cols);
    byte[] out = new byte[codec.encodedSize(rows, cols)];
    codec.encode(chunk, 0, rows, cols, out, 0);
    return out;
  }

  static byte[] body(byte[] payload) {
    return Arrays.copyOfRange(payload, PayloadHeader.SIZE, payload.length);
  }

  static float[] random(Random r, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) (r.nextGaussian() * Math.exp(r.nextGaussian()));
    return a;
  }

  static void assertBits(float[] got, float[] want, String what) {
    for (int i = 0; i < want.length; i++) {
      if (Float.floatToRawIntBits(got[i]) != Float.floatToRawIntBits(want[i])) {
        throw new AssertionError(what + ": element " + i + " is " + got[i] + ", the codec gives " + want[i]);
      }
    }
  }

  @Test
  void theTwoShotStepsAreTheCodecsBytesAndBits() {
    long seed = System.nanoTime();
    System.out.println("GroupTwoShotKernelsTest seed " + seed);
    Random rnd = new Random(seed);
    for (int round = 0; round < 16; round++) {
      boolean perTensor = round % 2 == 1;
      int g = perTensor ? 0 : 32 << rnd.nextInt(4), cols = 1 + rnd.nextInt(600), world = 2 + rnd.nextInt(3);
      int kind = perTensor ? GroupKernels.E4M3 : GroupKernels.INT8;
      int rows = 8 * (1 + rnd.nextInt(3)), realRows = 1 + rnd.nextInt(rows), row0 = rnd.nextInt(5);
      AbstractCodec codec = perTensor ? new Fp8TensorCodec() : new Int8GroupCodec(g);
      String at = "seed " + seed + " round " + round + ": " + codec.name() + " G=" + g + " cols=" + cols + " rows="
          + rows + " real=" + realRows + " world=" + world;
      long bytes = GroupTwoShotKernels.bodyBytes(rows, cols, g);
      assertThat((long) codec.encodedSize(rows, cols)).as(at).isEqualTo(PayloadHeader.SIZE + bytes);
      int slot = (int) ((bytes + 15) / 16 * 16);

      // compress: every rank's chunk into its slot
      float[][] x = new float[world][];
      byte[] recv = new byte[world * slot];
      byte[][] payloads = new byte[world][];
      for (int q = 0; q < world; q++) {
        x[q] = random(rnd, (row0 + rows) * cols);
        byte[] dev = new byte[slot];
        compress(x[q], dev, row0, realRows, rows, cols, g, kind);
        payloads[q] = cpuPayload(codec, x[q], row0, realRows, rows, cols);
        assertThat(Arrays.copyOf(dev, (int) bytes)).as("%s: rank %d's body", at, q).isEqualTo(body(payloads[q]));
        System.arraycopy(dev, 0, recv, q * slot, slot);
      }

      // decompress-reduce at rank me, into rows (reduce-scatter) and into a padded scratch chunk (all-reduce)
      int me = rnd.nextInt(world);
      byte[][] peers = payloads.clone();
      peers[me] = null;
      float[] own = new float[rows * cols];
      System.arraycopy(x[me], row0 * cols, own, 0, realRows * cols);
      float[] want = new float[rows * cols];
      codec.decodeReduce(peers, rows, cols, own, 0, want, 0);
      int yRow0 = rnd.nextInt(3);
      float[] y = new float[(yRow0 + rows) * cols];
      GroupTwoShotKernels.reduceGroups(x[me], recv, slot, me, world, y, row0, realRows, rows, cols, g, kind, yRow0,
          realRows);
      assertBits(Arrays.copyOfRange(y, yRow0 * cols, (yRow0 + realRows) * cols),
          Arrays.copyOf(want, realRows * cols), at + ": reduced rows");
      float[] scratch = new float[rows * cols];
      GroupTwoShotKernels.reduceGroups(x[me], recv, slot, me, world, scratch, row0, realRows, rows, cols, g, kind, 0,
          rows);
      assertBits(scratch, want, at + ": reduced chunk with its zero rows");
      byte[] again = new byte[slot];
      compress(scratch, again, 0, rows, rows, cols, g, kind);
      byte[] reencoded = new byte[codec.encodedSize(rows, cols)];
      codec.encode(want, 0, rows, cols, reencoded, 0);
      assertThat(Arrays.copyOf(again, (int) bytes)).as("%s: re-compressed", at).isEqualTo(body(reencoded));

      // decompress every slot of the gathered buffer into its rows
      int rowsPerRank = rows + rnd.nextInt(2), rowsTotal = world * rowsPerRank - rnd.nextInt(rowsPerRank);
      int pieceRows = 1 + rnd.nextInt(rows);
      float[] out = new float[rowsTotal * cols];
      Arrays.fill(out, Float.NaN);
      GroupTwoShotKernels.decompressGroups(recv, slot, out, rowsTotal, rowsPerRank, 0, pieceRows, rows, cols, g, kind,
          world);
      int checked = 0;
      for (int q = 0; q < world; q++) {
        float[] dec = new float[rows * cols];
        codec.decode(payloads[q], 0, payloads[q].length, dec, 0, false);
        for (int r = 0; r < rows; r++) {
          int o = q * rowsPerRank + r;
          if (r < pieceRows && o < rowsTotal) {
            assertBits(Arrays.copyOfRange(out, o * cols, (o + 1) * cols), Arrays.copyOfRange(dec, r * cols,
                (r + 1) * cols), at + ": slot " + q + " row " + r);
            checked++;
          }
        }
      }
      assertThat(checked).as("%s: rows decoded", at).isPositive();
    }
  }
}
