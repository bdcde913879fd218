package dev.taco.kernels.gpu;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import dev.taco.kernels.cuda.KernelTasks;
import dev.taco.kernels.cuda.Launcher;

/**
 * The TACO codec on the GPU (docs/design.md §3-§5): {@link TacoGpuKernels} launched by method reference, specialised
 * by their {@code @Constant}s (the set {@link TacoCudaSources} lists) and loaded at first use of each specialisation
 * by {@link CudaContext#kernel} (CUDA C
 * from {@code KernelSources}, NVRTC through the PTX cache, modules cached by the context). Every method only enqueues
 * work on the given stream: no host synchronisation inside.
 *
 * <p>Shapes: a {@code rows x cols} row-major tensor, bf16 ({@code short}) or fp32; {@code cols} a multiple of 1024
 * and at most {@link #MAX_COLS} (16384), {@code G} in {64, 128, 256}, {@code rows * (4 + cols/G)} a multiple of 8 (keeps the FP8 codes
 * 8-byte aligned; e.g. any even {@code rows} when {@code cols/G} is a multiple of 4); others are rejected with
 * {@link IllegalArgumentException}. The body ({@link #bodyBytes}) is byte-identical to the body of
 * {@code new TacoCodec(G, format, 1, hadamard)} (after its 28-byte header) for the same (finite) input; the
 * header is the caller's. Buffers must start 16-byte aligned (device allocations and 16-byte multiple slices).
 */
public final class GpuTacoCodec implements AutoCloseable {
  /**
   * Largest {@code cols}: 512 threads per block, since the decompress kernel needs 72 registers a thread and a block
   * gets at most 64 K (1024 threads would ask for 73,728: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, seen on an H200).
   */
  public static final int MAX_COLS = 512 * TacoGpuKernels.V;

  private final Launcher kernels;
  private final int groupSize;
  private final boolean hadamard;
  private final int format;

  /**
   * @param format {@link Fp8#E4M3} or {@link Fp8#E5M2}
   * @throws IllegalArgumentException for an unsupported G or format
   */
  public GpuTacoCodec(CudaContext ctx, int groupSize, boolean hadamard, int format) {
    if (!TacoCudaSources.GROUP_SIZES.contains(groupSize)) {
      throw new IllegalArgumentException(
          "GPU taco: G must be one of " + TacoCudaSources.GROUP_SIZES + ", got " + groupSize);
    }
    if (format != Fp8.E4M3 && format != Fp8.E5M2) {
      throw new IllegalArgumentException("GPU taco: format must be E4M3 (1) or E5M2 (2), got " + format);
    }
    this.kernels = new Launcher(ctx);
    this.groupSize = groupSize;
    this.hadamard = hadamard;
    this.format = format;
  }

  /** Body bytes of a {@code rows x cols} tensor: {@code 4 rows + rows*cols/G + rows*cols}. */
  public static long bodyBytes(int rows, int cols, int groupSize) {
    return 4L * rows + (long) rows * (cols / groupSize) + (long) rows * cols;
  }

  /** Scratch bytes {@link #compressUnfused} needs: group maxima (fp32, rounded up to 256 B) + the fp32 intermediate. */
  public static long unfusedScratchBytes(int rows, int cols, int groupSize) {
    return groupMaxBytes(rows, cols, groupSize) + 4L * rows * cols;
  }

  private static long groupMaxBytes(int rows, int cols, int groupSize) {
    return (4L * rows * (cols / groupSize) + 255) / 256 * 256;
  }

  /**
   * Checks a shape against the class doc's constraints.
   *
   * @throws IllegalArgumentException naming the violated constraint
   */
  public static void checkShape(int rows, int cols, int groupSize) {
    int perWarp = KernelContext.WARP_SIZE * TacoGpuKernels.V;
    if (!TacoCudaSources.GROUP_SIZES.contains(groupSize)) {
      throw new IllegalArgumentException(
          "GPU taco: G must be one of " + TacoCudaSources.GROUP_SIZES + ", got " + groupSize);
    }
    if (rows <= 0) {
      throw new IllegalArgumentException("GPU taco: rows must be positive, got " + rows);
    }
    if (cols <= 0 || cols % perWarp != 0 || cols > MAX_COLS) {
      throw new IllegalArgumentException("GPU taco: cols = " + cols + " unsupported: cols must be a multiple of "
          + perWarp + " in " + perWarp + ".." + MAX_COLS + " (one block of cols/" + TacoGpuKernels.V
          + " threads per row)");
    }
    if ((long) rows * cols > 1L << 30) {
      throw new IllegalArgumentException("GPU taco: " + rows + " x " + cols + " is more than 2^30 elements (the "
          + "kernels index with int)");
    }
    if ((4L * rows + (long) rows * (cols / groupSize)) % 8 != 0) {
      throw new IllegalArgumentException("GPU taco: rows * (4 + cols/G) = " + rows * (4 + cols / groupSize)
          + " must be a multiple of 8 so that the FP8 codes are 8-byte aligned (pad rows to an even count)");
    }
  }

  /**
   * Fused compress (one launch): {@code x} ({@code rows x cols}, bf16 or fp32) to the body.
   *
   * @throws IllegalArgumentException for an unsupported shape or a buffer too small
   */
  public void compress(DeviceBuffer x, boolean bf16, int rows, int cols, DeviceBuffer body, CudaStream stream) {
    check(rows, cols, x, (bf16 ? 2L : 4L) * rows * cols, body, bodyBytes(rows, cols, groupSize));
    on(rows, cols, stream).task("compress", TacoGpuKernels::compress, KERNEL_CONTEXT, x, x, body, rows, cols,
        groupSize, hadamard, format, bf16);
  }

  /**
   * Unfused compress, the ablation (three launches: statistics, transform to an fp32 intermediate in
   * {@code scratch}, encode); same body as {@link #compress}.
   *
   * @param scratch at least {@link #unfusedScratchBytes} bytes
   */
  public void compressUnfused(DeviceBuffer x, boolean bf16, int rows, int cols, DeviceBuffer body,
      DeviceBuffer scratch, CudaStream stream) {
    check(rows, cols, x, (bf16 ? 2L : 4L) * rows * cols, body, bodyBytes(rows, cols, groupSize));
    need(scratch, unfusedScratchBytes(rows, cols, groupSize), "scratch");
    long gm = groupMaxBytes(rows, cols, groupSize);
    DeviceBuffer groupMax = scratch.slice(0, gm);
    DeviceBuffer work = scratch.slice(gm, 4L * rows * cols);
    on(rows, cols, stream).task("unfusedStats", TacoGpuKernels::unfusedStats, KERNEL_CONTEXT, x, x, body, groupMax,
        rows, cols, groupSize, hadamard, format, bf16);
    on(rows, cols, stream).task("unfusedTransform", TacoGpuKernels::unfusedTransform, KERNEL_CONTEXT, x, x, groupMax,
        work, cols, groupSize, hadamard, bf16);
    on(rows, cols, stream).task("unfusedEncode", TacoGpuKernels::unfusedEncode, KERNEL_CONTEXT, work, groupMax, body,
        rows, cols, groupSize, format);
  }

  /** Decompress the body into {@code out} ({@code rows x cols}, bf16 (rounded to nearest even) or fp32). */
  public void decompress(DeviceBuffer body, int rows, int cols, DeviceBuffer out, boolean bf16, CudaStream stream) {
    check(rows, cols, out, (bf16 ? 2L : 4L) * rows * cols, body, bodyBytes(rows, cols, groupSize));
    on(rows, cols, stream).task("decompress", TacoGpuKernels::decompress, KERNEL_CONTEXT, body, out, out, rows, cols,
        groupSize, hadamard, format, bf16, false);
  }

  /** Decompress-reduce (docs/design.md §4): {@code out += decoded body}, {@code out} fp32 {@code rows x cols}. */
  public void decompressReduce(DeviceBuffer body, int rows, int cols, DeviceBuffer out, CudaStream stream) {
    check(rows, cols, out, 4L * rows * cols, body, bodyBytes(rows, cols, groupSize));
    on(rows, cols, stream).task("decompressReduce", TacoGpuKernels::decompress, KERNEL_CONTEXT, body, out, out, rows,
        cols, groupSize, hadamard, format, false, true);
  }

  private void check(int rows, int cols, DeviceBuffer data, long dataBytes, DeviceBuffer body, long bodyBytes) {
    checkShape(rows, cols, groupSize);
    need(data, dataBytes, "tensor");
    need(body, bodyBytes, "body");
  }

  private static void need(DeviceBuffer b, long bytes, String what) {
    if (b.bytes() < bytes) {
      throw new IllegalArgumentException("GPU taco: " + what + " buffer has " + b.bytes() + " bytes, needs " + bytes);
    }
  }

  /** The launches of a kernel with a block per row and {@link TacoGpuKernels#V} values per thread. */
  private KernelTasks<Void> on(int rows, int cols, CudaStream stream) {
    return kernels.on(Dim3.of(rows), Dim3.of(cols / TacoGpuKernels.V), stream);
  }

  /**
   * Nothing to release: the kernels' modules belong to the context ({@link CudaContext#kernel}), which unloads them
   * when it closes. Kept so a codec can sit in try-with-resources next to the buffers it works on.
   */
  @Override
  public void close() {}
}
