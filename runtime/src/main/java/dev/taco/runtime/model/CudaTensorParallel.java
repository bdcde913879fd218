package dev.taco.runtime.model;

import dev.taco.collective.Site;
import dev.taco.collective.device.DeviceSiteCollectives;
import dev.taco.collective.device.DeviceTensor;
import dev.taco.kernels.cuda.DeviceBuffer;

/**
 * The tensor-parallel collectives of one GPU rank: views of its {@link CudaOps} arenas handed as {@link DeviceTensor}s
 * to its {@link DeviceSiteCollectives} ({@code device-local} ranks sharing one GPU, or NCCL with a GPU per rank), which
 * take each site's plan and move the data on the backend's stream; alone (TP = 1) the sequence-parallel gather and
 * scatter are device copies and the all-reduces nothing. A collective writes a tensor its backend may hold a fresh bf16
 * copy of, so each one tells the backend's {@link Bf16Copies} so.
 */
public final class CudaTensorParallel implements TensorParallel<DeviceBuffer> {
  private final CudaOps ops;
  private final DeviceSiteCollectives tp;
  private final boolean comm;

  private CudaTensorParallel(CudaOps ops, DeviceSiteCollectives tp, boolean comm) {
    this.ops = java.util.Objects.requireNonNull(ops, "ops");
    this.tp = tp;
    this.comm = comm;
  }

  /** One rank alone (TP = 1): the all-reduces move nothing, the gather and the scatter copy. */
  public static CudaTensorParallel alone(CudaOps ops) {
    return new CudaTensorParallel(ops, null, true);
  }

  /**
   * One rank of a TP group.
   *
   * @param ops the rank's backend, built on {@code tp}'s stream ({@link CudaOps#CudaOps(dev.taco.kernels.cuda.CudaContext,
   *     dev.taco.kernels.cuda.CudaStream, CudaOps.Precision)}), so that every collective sits between the layers that
   *     write and read its tensors
   * @param comm false replaces every TP collective by a no-op ({@code --no-tp-comm}: the step's time without its
   *     communication; the numbers are then wrong, each rank keeping its partial sums)
   * @throws IllegalArgumentException if {@code ops} works on another stream than the collectives
   */
  public static CudaTensorParallel of(CudaOps ops, DeviceSiteCollectives tp, boolean comm) {
    if (ops.stream() != tp.device().stream()) {
      throw new IllegalArgumentException("the backend and its TP collectives must share a stream (build the backend "
          + "on the collectives' stream)");
    }
    return new CudaTensorParallel(ops, tp, comm);
  }

  @Override
  public void allReduce(Site site, View<DeviceBuffer> x, int rows, int cols) {
    ops.collectiveWrote();
    DeviceBuffer t = DeviceStream.slice(site.name(), x, (long) rows * cols);
    if (tp == null || !comm) return;
    tp.allReduce(site, new DeviceTensor(t, false), rows, cols);
  }

  @Override
  public void allGather(Site site, View<DeviceBuffer> out, View<DeviceBuffer> shard, int shardRows, int cols) {
    ops.collectiveWrote();
    long n = (long) shardRows * cols;
    DeviceBuffer in = DeviceStream.slice(site.name(), shard, n);
    if (tp == null) {
      DeviceStream.slice(site.name(), out, n).copyFromAsync(in, 4 * n, ops.stream());
      return;
    }
    DeviceBuffer all = DeviceStream.slice(site.name(), out, n * tp.worldSize());
    if (!comm) return;
    tp.allGather(site, new DeviceTensor(in, false), shardRows, cols, new DeviceTensor(all, false));
  }

  @Override
  public void reduceScatter(Site site, View<DeviceBuffer> shard, View<DeviceBuffer> x, int rows, int cols) {
    ops.collectiveWrote();
    long n = (long) rows * cols;
    DeviceBuffer in = DeviceStream.slice(site.name(), x, n);
    int world = tp == null ? 1 : tp.worldSize();
    DeviceBuffer part = DeviceStream.slice(site.name(), shard, n / world);
    if (tp == null) {
      part.copyFromAsync(in, 4 * n, ops.stream());
      return;
    }
    if (!comm) return;
    tp.reduceScatter(site, new DeviceTensor(in, false), rows, cols, new DeviceTensor(part, false));
  }

  @Override
  public void allReduceExact(View<DeviceBuffer> x, int n) {
    ops.collectiveWrote();
    DeviceBuffer t = DeviceStream.slice("gradients", x, n);
    if (tp == null || !comm) return;
    tp.allReduceExact(new DeviceTensor(t, false), n);
  }

  @Override
  public long bytesSent() {
    return tp == null ? 0 : tp.bytesSent();
  }

  /**
   * Device milliseconds of the kernels of the last collective (quantise, reduce, dequantise), once it has finished
   * (this waits for the stream): the collectives' share that is compression rather than moving bytes. 0 alone or
   * without TP communication; NaN where the collectives run as CUDA graphs (NCCL). For {@link OpTimes}'
   * {@code compression} category.
   */
  public double lastKernelMillis() {
    return tp == null || !comm ? 0 : tp.lastKernelMillis();
  }
}
