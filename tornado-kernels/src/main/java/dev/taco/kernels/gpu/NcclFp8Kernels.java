package dev.taco.kernels.gpu;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.NcclFp8;
import dev.taco.kernels.Parallel;
import dev.taco.kernels.compiler.KernelRequest;
import java.util.List;

/**
 * The device steps of {@code nccl-fp8} (docs/design.md §4.1), NCCL's own FP8 all-reduce and reduce-scatter with one
 * scale for the group, on fp32 tensors: the group scale from every rank's absmax, the cast, the ring's FP8 sum
 * ({@link NcclFp8}) where NCCL does not do it itself ({@code device-local}, the emulated link: the two-shot
 * collectives' exchanges carry the codes and these kernels add them in NCCL's order), and the cast back.
 * Grid-stride {@code @Parallel} loops (any grid covers them), which on the JVM are plain loops: the host collectives
 * call {@link #ringReduce} as it is, so host and device sum alike.
 *
 * <p>Buffers: {@code scale} holds the group's {@code amax} (float32 LE) and divisor (int32 LE), {@link NcclFp8#HEADER}
 * bytes; a <em>body</em> is that header, then one code per element ({@code codec.NcclFp8Codec}'s body); a slot buffer
 * holds {@code world} bodies, {@code slotBytes} apart. A chunk is {@code rows x cols}: rows {@code row0 .. row0 +
 * realRows} of the tensor, then zero rows.
 */
public final class NcclFp8Kernels {
  private NcclFp8Kernels() {}

  /**
   * {@code scale} = the largest of the {@code world} absmaxes (a float32 at the start of each slot of {@code amaxes})
   * and {@code divisor}. One iteration.
   */
  @Kernel
  public static void groupScale(byte[] amaxes, int slotBytes, int world, int divisor, byte[] scale) {
    for (@Parallel int once = 0; once < 1; once++) {
      float a = 0f;
      for (int q = 0; q < world; q++) {
        a = Math.max(a, Bytes.getFloat(amaxes, q * slotBytes));
      }
      Bytes.putFloat(scale, 0, a);
      Bytes.putInt(scale, 4, divisor);
    }
  }

  /**
   * Cast a chunk: {@code codes[i]} = the code of element {@code i} ({@link NcclFp8#encode}, zero rows +0) and the
   * scale copied to {@code head} (a body's header, which may lie just before {@code codes} in one buffer). One iteration
   * per element, {@code rows * cols}.
   */
  @Kernel
  public static void cast(float[] x, byte[] scale, byte[] head, byte[] codes, int row0, int realRows, int rows,
      int cols, int format) {
    for (@Parallel int i = 0; i < rows * cols; i++) {
      float amax = Bytes.getFloat(scale, 0);
      int divisor = Bytes.getInt(scale, 4);
      if (i == 0) {
        Bytes.putFloat(head, 0, amax);
        Bytes.putInt(head, 4, divisor);
      }
      float v = i < realRows * cols ? x[row0 * cols + i] : 0f;
      codes[i] = (byte) NcclFp8.encode(v, amax, NcclFp8.top(divisor, format), format);
    }
  }

  /**
   * The ring's FP8 sum of the chunk owned by rank {@code me} ({@link NcclFp8#ringSum}) over the {@code world} bodies
   * of {@code slots} (the peers' received ones and this rank's own cast): with {@code toCodes}, its codes for all
   * {@code rows} into {@code codes} and the scale into {@code head} (a body to send on); else its values
   * ({@link NcclFp8#decode}) for the {@code realRows} real rows into {@code y} from row {@code yRow0}. One iteration per
   * element written.
   */
  @Kernel
  public static void ringReduce(byte[] slots, int slotBytes, int me, int world, byte[] scale, byte[] head,
      byte[] codes, float[] y, int yRow0, int realRows, int rows, int cols, int format, boolean toCodes) {
    for (@Parallel int i = 0; i < (toCodes ? rows : realRows) * cols; i++) {
      float amax = Bytes.getFloat(scale, 0);
      int divisor = Bytes.getInt(scale, 4);
      int c = NcclFp8.ringSum(slots, slotBytes, NcclFp8.HEADER + i, me, world, format);
      if (toCodes) {
        if (i == 0) {
          Bytes.putFloat(head, 0, amax);
          Bytes.putInt(head, 4, divisor);
        }
        codes[i] = (byte) c;
      } else {
        y[yRow0 * cols + i] = NcclFp8.decode(c, amax, NcclFp8.top(divisor, format), format);
      }
    }
  }

  /**
   * Cast back every slot of {@code buf} (codes from byte {@code codeOff} of each): element (r, c) of slot {@code q} to
   * output row {@code o = q * rowsPerRank + pieceRow0 + r}, written only if {@code r < pieceRows} and {@code o <
   * rowsTotal} (the two-shot collectives' mapping). One iteration per element, {@code world * rows * cols}.
   */
  @Kernel
  public static void decodeSlots(byte[] buf, int slotBytes, int codeOff, byte[] scale, float[] out, int rowsTotal,
      int rowsPerRank, int pieceRow0, int pieceRows, int rows, int cols, int format, int world) {
    for (@Parallel int i = 0; i < world * rows * cols; i++) {
      int q = i / (rows * cols);
      int e = i - q * rows * cols;
      int r = e / cols;
      int o = q * rowsPerRank + pieceRow0 + r;
      if (r < pieceRows && o < rowsTotal) {
        float amax = Bytes.getFloat(scale, 0);
        int divisor = Bytes.getInt(scale, 4);
        out[o * cols + e - r * cols] = NcclFp8.decode(buf[q * slotBytes + codeOff + e] & 0xFF, amax,
            NcclFp8.top(divisor, format), format);
      }
    }
  }

  /** The kernels, for pre-translation ({@code KernelSources}; no specialisations). */
  public static List<KernelRequest> kernels() {
    return List.of("groupScale", "cast", "ringReduce", "decodeSlots").stream()
        .map(m -> KernelRequest.of(NcclFp8Kernels.class, m)).toList();
  }
}
