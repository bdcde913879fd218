package dev.taco.kernels.gpu;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.compiler.KernelRequest;
import java.util.List;

/**
 * The device steps of the two-shot collectives for the {@code int8-group} plans (Flash Communication's per-group INT8,
 * {@code codec.Int8GroupCodec}), on fp32 tensors: compress a chunk, decompress-reduce it into rows, decompress every
 * slot of a gathered buffer. The same steps as {@link TwoShotGpuKernels}' for TACO, built from {@link GroupKernels}' own
 * per-group code ({@link GroupKernels#encodeGroup}, {@link GroupKernels#dequantise}), so payloads are the CPU codec's
 * bodies byte for byte and decoded, reduced values its floats bit for bit (tested on the JVM, where these kernels are
 * plain loops, against the codec; the translator keeps Java's float semantics).
 *
 * <p>Payload of a {@code rows x cols} chunk (rows {@code row0 .. row0 + realRows} of the tensor, then zero rows): the
 * body of {@code new Int8GroupCodec(G)} without its header, {@code rows * ng} float32 LE absmaxes ({@code ng =
 * ceil(cols / G)}), then {@code rows * cols} int8 codes ({@link #bodyBytes}). A payload buffer holds {@code world} slots
 * of {@code slotBytes}, slot {@code q} at byte {@code q * slotBytes}. Re-compressing a reduced chunk (the all-reduce's
 * middle) is {@link #reduceGroups} into a scratch chunk, then {@link #compressGroups} of it.
 *
 * <p>Thread mapping: {@link #compressGroups} one iteration per group (its absmax is a serial scan of G values); the
 * others one per element, so consecutive threads read consecutive codes. Grid-stride {@code @Parallel} loops: any grid
 * covers them (e.g. {@code ceil(n / 256)} blocks of 256). Non-finite inputs are sent as the marker code and decode to
 * NaN ({@code nonfinite=propagate}): the GPU cannot refuse a tensor without a host wait.
 */
public final class GroupTwoShotKernels {
  private GroupTwoShotKernels() {}

  /** Bytes of the int8-group body of a {@code rows x cols} chunk with group size {@code groupSize}. */
  public static long bodyBytes(int rows, int cols, int groupSize) {
    return 4L * rows * TacoKernels.groupsPerRow(cols, groupSize) + (long) rows * cols;
  }

  /**
   * Compress one chunk into {@code body} (one slot): group {@code t} of chunk row {@code r} as
   * {@link GroupKernels#encodeGroup} writes it, zero rows ({@code r >= realRows}) as absmax +0 and codes 0 (what the
   * codec makes of zeros). One iteration per group, {@code rows * ng}.
   */
  @Kernel
  public static void compressGroups(float[] x, byte[] body, int row0, int realRows, int rows, int cols,
      int groupSize) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    float qm = GroupKernels.qmax(GroupKernels.INT8);
    int codeOff = 4 * rows * ng;
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      if (r < realRows) {
        GroupKernels.encodeGroup(x, (row0 + r) * cols + c0, len, qm, GroupKernels.INT8, body, 4 * t, codeOff,
            r * cols + c0);
      } else {
        Bytes.putFloat(body, 4 * t, 0f);
        for (int i = 0; i < len; i++) {
          body[codeOff + r * cols + c0 + i] = 0;
        }
      }
    }
  }

  /**
   * Decompress-reduce into rows {@code yRow0 .. yRow0 + writeRows} of {@code y}: element (r, c) = +0, plus each peer's
   * decoded value ({@code q != me}, ascending; {@code D(q) / 127 * a}), plus the chunk's own value (+0 on zero rows),
   * which is {@code AbstractCodec.decodeReduce}'s order. {@code writeRows}: the chunk's real rows (reduce-scatter) or
   * all {@code rows} (the scratch chunk that is re-compressed). One iteration per element, {@code writeRows * cols}.
   *
   * @param recv the received buffer ({@code world} slots of {@code slotBytes}, slot {@code me} not read)
   */
  @Kernel
  public static void reduceGroups(float[] x, byte[] recv, int slotBytes, int me, int world, float[] y, int row0,
      int realRows, int rows, int cols, int groupSize, int yRow0, int writeRows) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    float qm = GroupKernels.qmax(GroupKernels.INT8);
    int codeOff = 4 * rows * ng;
    for (@Parallel int i = 0; i < writeRows * cols; i++) {
      int r = i / cols;
      int c = i - r * cols;
      int t = r * ng + c / groupSize;
      float s = 0f;
      for (int q = 0; q < world; q++) {
        if (q != me) {
          int base = q * slotBytes;
          s += GroupKernels.dequantise(recv[base + codeOff + r * cols + c], GroupKernels.INT8) / qm
              * Bytes.getFloat(recv, base + 4 * t);
        }
      }
      y[(yRow0 + r) * cols + c] = s + (r < realRows ? x[(row0 + r) * cols + c] : 0f);
    }
  }

  /**
   * Decompress every slot of a gathered buffer (the all-gather's last step): element (r, c) of slot {@code q} to
   * output row {@code o = q * rowsPerRank + pieceRow0 + r}, written only if {@code r < pieceRows} and
   * {@code o < rowsTotal} (the mapping of {@link TwoShotGpuKernels#decompressRows}). One iteration per element,
   * {@code world * rows * cols}.
   */
  @Kernel
  public static void decompressGroups(byte[] body, int slotBytes, float[] out, int rowsTotal, int rowsPerRank,
      int pieceRow0, int pieceRows, int rows, int cols, int groupSize, int world) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    float qm = GroupKernels.qmax(GroupKernels.INT8);
    int codeOff = 4 * rows * ng;
    for (@Parallel int i = 0; i < world * rows * cols; i++) {
      int q = i / (rows * cols);
      int e = i - q * rows * cols;
      int r = e / cols;
      int c = e - r * cols;
      int o = q * rowsPerRank + pieceRow0 + r;
      if (r < pieceRows && o < rowsTotal) {
        int base = q * slotBytes;
        out[o * cols + c] = GroupKernels.dequantise(body[base + codeOff + r * cols + c], GroupKernels.INT8) / qm
            * Bytes.getFloat(body, base + 4 * (r * ng + c / groupSize));
      }
    }
  }

  /** The three kernels, for pre-translation ({@code KernelSources}; no specialisations). */
  public static List<KernelRequest> kernels() {
    return List.of(KernelRequest.of(GroupTwoShotKernels.class, "compressGroups"),
        KernelRequest.of(GroupTwoShotKernels.class, "reduceGroups"),
        KernelRequest.of(GroupTwoShotKernels.class, "decompressGroups"));
  }
}
