package dev.taco.kernels.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.codec.Fp8Format;
import dev.taco.codec.NcclFp8Codec;
import dev.taco.codec.PayloadHeader;
import dev.taco.kernels.Bytes;
import dev.taco.kernels.NcclFp8;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NcclFp8Kernels} run on the JVM (plain loops: the code the GPU runs) against {@link NcclFp8Codec} on the same
 * chunks, fresh random shapes and values (seed printed), both formats, 2..8 ranks and zero padding rows: the cast's
 * bodies byte for byte, the ring's sum as codes and as values, and the cast back of every slot bit for bit. And the
 * kernels translate to CUDA C that {@code nvcc --ptx -arch=sm_90} compiles (skipped without nvcc).
 */
class NcclFp8KernelsTest {
  @TempDir
  Path dir;

  @Test
  void theKernelsTranslateAndCompileWithNvcc() throws Exception {
    GroupTwoShotKernelsTest.translateAndCompile(dir, NcclFp8Kernels.kernels(), "the nccl-fp8 kernels");
  }

  @Test
  void theKernelsAreTheCodecsBytesAndTheRingsSum() {
    long seed = System.nanoTime();
    System.out.println("NcclFp8KernelsTest seed " + seed);
    Random rnd = new Random(seed);
    for (int round = 0; round < 16; round++) {
      Fp8Format format = round % 2 == 0 ? Fp8Format.E4M3 : Fp8Format.E5M2;
      int f = format.code(), world = 2 + rnd.nextInt(7), cols = 1 + rnd.nextInt(300);
      int rows = 8 * (1 + rnd.nextInt(3)), realRows = 1 + rnd.nextInt(rows), row0 = rnd.nextInt(5);
      NcclFp8Codec base = new NcclFp8Codec(format, NcclFp8Codec.ScaleRule.values()[rnd.nextInt(2)],
          NcclFp8Codec.NonFinite.REFUSE);
      String at = "seed " + seed + " round " + round + ": " + base + " world=" + world + " " + rows + " x " + cols
          + " real=" + realRows;
      float[][] x = new float[world][];
      float amax = 0f;
      for (int q = 0; q < world; q++) {
        x[q] = GroupTwoShotKernelsTest.random(rnd, (row0 + rows) * cols);
        for (int i = row0 * cols; i < (row0 + realRows) * cols; i++) amax = Math.max(amax, Math.abs(x[q][i]));
      }
      byte[] amaxes = new byte[16 * world];
      for (int q = 0; q < world; q++) Bytes.putFloat(amaxes, 16 * q, q == world - 1 ? amax : amax / 2);
      byte[] scale = new byte[NcclFp8.HEADER];
      NcclFp8Kernels.groupScale(amaxes, 16, world, base.divisor(world), scale);
      assertThat(Bytes.getFloat(scale, 0)).as(at).isEqualTo(amax);
      NcclFp8Codec codec = base.withScale(amax, base.divisor(world));

      // cast: every rank's chunk into its slot, the codec's body
      int body = NcclFp8.HEADER + rows * cols, slot = (body + 15) / 16 * 16;
      byte[] slots = new byte[world * slot];
      byte[][] payloads = new byte[world][];
      for (int q = 0; q < world; q++) {
        byte[] head = new byte[NcclFp8.HEADER], codes = new byte[rows * cols];
        NcclFp8Kernels.cast(x[q], scale, head, codes, row0, realRows, rows, cols, f);
        payloads[q] = GroupTwoShotKernelsTest.cpuPayload(codec, x[q], row0, realRows, rows, cols);
        byte[] dev = new byte[body];
        System.arraycopy(head, 0, dev, 0, head.length);
        System.arraycopy(codes, 0, dev, head.length, codes.length);
        assertThat(dev).as("%s: rank %d's body", at, q).isEqualTo(GroupTwoShotKernelsTest.body(payloads[q]));
        System.arraycopy(dev, 0, slots, q * slot, body);
      }

      // the ring's sum at rank me, as codes (a body to send on) and as the values of its real rows
      int me = rnd.nextInt(world);
      byte[] head = new byte[NcclFp8.HEADER], codes = new byte[rows * cols];
      NcclFp8Kernels.ringReduce(slots, slot, me, world, scale, head, codes, null, 0, realRows, rows, cols, f, true);
      assertThat(head).as(at).isEqualTo(scale);
      int yRow0 = rnd.nextInt(3);
      float[] y = new float[(yRow0 + rows) * cols];
      NcclFp8Kernels.ringReduce(slots, slot, me, world, scale, null, null, y, yRow0, realRows, rows, cols, f, false);
      float top = NcclFp8.top(base.divisor(world), f);
      for (int i = 0; i < rows * cols; i++) {
        int q = (me + 1) % world, acc = payloads[q][PayloadHeader.SIZE + NcclFp8.HEADER + i] & 0xFF;
        for (int k = 2; k <= world; k++) {
          q = (q + 1) % world;
          acc = NcclFp8.add(acc, payloads[q][PayloadHeader.SIZE + NcclFp8.HEADER + i] & 0xFF, f);
        }
        assertThat(codes[i] & 0xFF).as("%s: code %d", at, i).isEqualTo(acc);
        if (i < realRows * cols) {
          assertThat(y[yRow0 * cols + i]).as("%s: value %d", at, i).isEqualTo(NcclFp8.decode(acc, amax, top, f));
        }
      }

      // the cast back of every slot into its rows
      int rowsPerRank = rows + rnd.nextInt(2), rowsTotal = world * rowsPerRank - rnd.nextInt(rowsPerRank);
      int pieceRows = 1 + rnd.nextInt(rows);
      float[] out = new float[rowsTotal * cols];
      Arrays.fill(out, Float.NaN);
      NcclFp8Kernels.decodeSlots(slots, slot, NcclFp8.HEADER, scale, out, rowsTotal, rowsPerRank, 0, pieceRows, rows,
          cols, f, world);
      for (int q = 0; q < world; q++) {
        float[] dec = new float[rows * cols];
        codec.decode(payloads[q], 0, payloads[q].length, dec, 0, false);
        for (int r = 0; r < Math.min(pieceRows, rowsTotal - q * rowsPerRank); r++) {
          int o = q * rowsPerRank + r;
          GroupTwoShotKernelsTest.assertBits(Arrays.copyOfRange(out, o * cols, (o + 1) * cols),
              Arrays.copyOfRange(dec, r * cols, (r + 1) * cols), at + ": slot " + q + " row " + r);
        }
      }
    }
  }
}
