package dev.taco.kernels.gpu;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.compiler.KernelRequest;
import java.util.List;

/**
 * The device steps of the two-shot collectives for the absmax baselines without a transform, on fp32 tensors:
 * {@code int8-group} (Flash Communication's per-group INT8, {@code codec.Int8GroupCodec}: {@code kind} =
 * {@link GroupKernels#INT8}, G of 32..256) and {@code fp8-tensor} (one E4M3 scale per payload,
 * {@code codec.Fp8TensorCodec}: {@link GroupKernels#E4M3}, {@code groupSize} 0). Compress a chunk, decompress-reduce it
 * into rows, decompress every slot of a gathered buffer: the steps of {@link TwoShotGpuKernels}' for TACO, built from
 * {@link GroupKernels}' own code ({@link GroupKernels#encodeGroup}, {@link GroupKernels#quantise},
 * {@link GroupKernels#dequantise}), so payloads are the CPU codecs' bodies byte for byte and decoded, reduced values
 * their floats bit for bit (tested on the JVM, where these kernels are plain loops; the translator keeps Java's float
 * semantics, and a maximum does not depend on its order).
 *
 * <p>One caveat for {@code fp8-tensor}: its one scale belongs to a payload, and the device collectives send a large
 * chunk as several pipelined pieces ({@code collective.device.DeviceWire#pieceRows}, about 16 MiB each), so there a
 * scale covers a piece, where the host collectives (one payload per chunk) take one for the whole chunk; the two agree
 * bit for bit whenever a chunk is one piece. The per-group scales of {@code int8-group} do not depend on the pieces.
 *
 * <p>Payload of a {@code rows x cols} chunk (rows {@code row0 .. row0 + realRows} of the tensor, then zero rows): the
 * codec's body without its header, {@code nScales} float32 LE absmaxes ({@code rows * ceil(cols / G)}, or 1 for the
 * per-tensor codec, whose one group is the whole chunk), then {@code rows * cols} one-byte codes ({@link #bodyBytes}). A
 * payload buffer holds {@code world} slots of {@code slotBytes}, slot {@code q} at byte {@code q * slotBytes}.
 * Re-compressing a reduced chunk (the all-reduce's middle) is {@link #reduceGroups} into a scratch chunk, then a
 * compress of it.
 *
 * <p>Compress: per group, {@link #compressGroups} (one iteration per group, a serial scan of its G values); per
 * tensor, {@link #absmaxPartials}, {@link #absmaxFinish} (one thread) and {@link #encodeTensor} (one per element).
 * The others one per element, so consecutive threads read consecutive codes. Grid-stride {@code @Parallel} loops: any
 * grid covers them (e.g. {@code ceil(n / 256)} blocks of 256). Non-finite inputs are sent as the marker code and
 * decode to NaN ({@code nonfinite=propagate}): the GPU cannot refuse a tensor without a host wait.
 */
public final class GroupTwoShotKernels {
  private GroupTwoShotKernels() {}

  /**
   * Partial maxima of the per-tensor absmax's first level: enough threads to keep the memory busy (1024 threads had
   * each walk 3000 elements of a 4096 x 768 chunk, a latency-bound pass that made {@code fp8-tensor}'s collectives the
   * slowest on the GPU); {@link #absmaxPartials} again folds them into {@link #FOLDED} for the one finishing thread.
   */
  public static final int PARTS = 65536;

  /** Partial maxima of the absmax's second level, which {@link #absmaxFinish} reads in one thread. */
  public static final int FOLDED = 256;

  /** Scales of a {@code rows x cols} chunk: {@code rows * ceil(cols / G)}, or 1 when {@code groupSize == 0}. */
  static int scales(int rows, int cols, int groupSize) {
    return groupSize == 0 ? 1 : rows * TacoKernels.groupsPerRow(cols, groupSize);
  }

  /** The scale of element (r, c): its group's, or the chunk's one. */
  static int scaleOf(int r, int c, int cols, int groupSize) {
    return groupSize == 0 ? 0 : r * TacoKernels.groupsPerRow(cols, groupSize) + c / groupSize;
  }

  /** Bytes of the body of a {@code rows x cols} chunk ({@code groupSize} 0: one scale for the chunk). */
  public static long bodyBytes(int rows, int cols, int groupSize) {
    return 4L * scales(rows, cols, groupSize) + (long) rows * cols;
  }

  /**
   * Compress one chunk into {@code body} (one slot), per group: group {@code t} of chunk row {@code r} as
   * {@link GroupKernels#encodeGroup} writes it, zero rows ({@code r >= realRows}) as absmax +0 and codes 0 (what the
   * codec makes of zeros). One iteration per group, {@code rows * ng}.
   */
  @Kernel
  public static void compressGroups(float[] x, byte[] body, int row0, int realRows, int rows, int cols,
      int groupSize, int kind) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    float qm = GroupKernels.qmax(kind);
    int codeOff = 4 * rows * ng;
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      if (r < realRows) {
        GroupKernels.encodeGroup(x, (row0 + r) * cols + c0, len, qm, kind, 0f, body, 4 * t, codeOff,
            r * cols + c0);
      } else {
        Bytes.putFloat(body, 4 * t, 0f);
        for (int i = 0; i < len; i++) {
          body[codeOff + r * cols + c0 + i] = (byte) GroupKernels.quantise(0f, 0f, qm, kind);
        }
      }
    }
  }

  /**
   * Per-tensor compress, step 1: {@code partial[p]} = the maximum of {@code |x|} over the finite values of the chunk's
   * real rows at element indices {@code p, p + parts, ...} (+0 if none). One iteration per partial.
   */
  @Kernel
  public static void absmaxPartials(float[] x, float[] partial, int row0, int realRows, int cols, int parts) {
    for (@Parallel int p = 0; p < parts; p++) {
      float a = 0f;
      for (int i = p; i < realRows * cols; i += parts) {
        float e = Math.abs(x[row0 * cols + i]);
        if (e <= Float.MAX_VALUE) {
          a = Math.max(a, e);
        }
      }
      partial[p] = a;
    }
  }

  /** Per-tensor compress, step 2: the chunk's absmax (the maximum of the partials) as the body's one scale. */
  @Kernel
  public static void absmaxFinish(float[] partial, byte[] body, int parts) {
    for (@Parallel int once = 0; once < 1; once++) {
      float a = 0f;
      for (int p = 0; p < parts; p++) {
        a = Math.max(a, partial[p]);
      }
      Bytes.putFloat(body, 0, a);
    }
  }

  /**
   * Per-tensor compress, step 3: code of element (r, c) = {@code Q(x / a * qmax)} with the body's scale {@code a}
   * ({@link GroupKernels#quantise}; zero rows quantise +0). One iteration per element, {@code rows * cols}.
   */
  @Kernel
  public static void encodeTensor(float[] x, byte[] body, int row0, int realRows, int rows, int cols, int kind) {
    float qm = GroupKernels.qmax(kind);
    for (@Parallel int i = 0; i < rows * cols; i++) {
      float a = Bytes.getFloat(body, 0);
      float v = i < realRows * cols ? x[row0 * cols + i] : 0f;
      body[4 + i] = (byte) GroupKernels.quantise(v, a, qm, kind);
    }
  }

  /**
   * Decompress-reduce into rows {@code yRow0 .. yRow0 + writeRows} of {@code y}: element (r, c) = +0, plus each peer's
   * decoded value ({@code q != me}, ascending; {@code D(q) / qmax * a}), plus the chunk's own value (+0 on zero rows),
   * which is {@code AbstractCodec.decodeReduce}'s order. {@code writeRows}: the chunk's real rows (reduce-scatter) or
   * all {@code rows} (the scratch chunk that is re-compressed). One iteration per element, {@code writeRows * cols}.
   *
   * @param recv the received buffer ({@code world} slots of {@code slotBytes}, slot {@code me} not read)
   */
  @Kernel
  public static void reduceGroups(float[] x, byte[] recv, int slotBytes, int me, int world, float[] y, int row0,
      int realRows, int rows, int cols, int groupSize, int kind, int yRow0, int writeRows) {
    float qm = GroupKernels.qmax(kind);
    int codeOff = 4 * scales(rows, cols, groupSize);
    for (@Parallel int i = 0; i < writeRows * cols; i++) {
      int r = i / cols;
      int c = i - r * cols;
      int t = scaleOf(r, c, cols, groupSize);
      float s = 0f;
      for (int q = 0; q < world; q++) {
        if (q != me) {
          int base = q * slotBytes;
          s += GroupKernels.dequantise(recv[base + codeOff + r * cols + c], kind) / qm
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
      int pieceRow0, int pieceRows, int rows, int cols, int groupSize, int kind, int world) {
    float qm = GroupKernels.qmax(kind);
    int codeOff = 4 * scales(rows, cols, groupSize);
    for (@Parallel int i = 0; i < world * rows * cols; i++) {
      int q = i / (rows * cols);
      int e = i - q * rows * cols;
      int r = e / cols;
      int c = e - r * cols;
      int o = q * rowsPerRank + pieceRow0 + r;
      if (r < pieceRows && o < rowsTotal) {
        int base = q * slotBytes;
        out[o * cols + c] = GroupKernels.dequantise(body[base + codeOff + r * cols + c], kind) / qm
            * Bytes.getFloat(body, base + 4 * scaleOf(r, c, cols, groupSize));
      }
    }
  }

  /** The kernels, for pre-translation ({@code KernelSources}; no specialisations). */
  public static List<KernelRequest> kernels() {
    return List.of("compressGroups", "absmaxPartials", "absmaxFinish", "encodeTensor", "reduceGroups",
        "decompressGroups").stream().map(m -> KernelRequest.of(GroupTwoShotKernels.class, m)).toList();
  }
}
