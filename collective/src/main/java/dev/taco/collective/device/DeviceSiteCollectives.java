package dev.taco.collective.device;

import dev.taco.collective.CollectiveKind;
import dev.taco.collective.CollectiveSites;
import dev.taco.collective.Plan;
import dev.taco.collective.Site;
import java.util.Map;
import java.util.Objects;

/**
 * One rank's collectives at named sites on device tensors (docs/design.md §4): each call takes its site's plan from
 * {@link CollectiveSites#planAt} (calibration and codec-error samples read a host copy of a block of its rows, made only
 * when they need it) and runs it through {@link DeviceCollectives}; plans that no site uses any more are released there. Or
 * every site with one fixed plan. A refusal names the collective and the site.
 *
 * <p>Work is ordered on {@link DeviceCollectives#stream()}: a caller that enqueues its layers there gets each collective
 * between the layer that writes its input and the one that reads its output, with no host synchronisation (except the
 * host copies of calibration and sampling).
 */
public final class DeviceSiteCollectives {
  private final DeviceCollectives device;
  private final CollectiveSites sites;
  private final Plan fixed;

  /**
   * Every site's plan from {@code sites} (this rank's, over the group's exact host communicator).
   *
   * @throws IllegalArgumentException if the two groups' sizes differ
   */
  public DeviceSiteCollectives(DeviceCollectives device, CollectiveSites sites) {
    this(device, Objects.requireNonNull(sites, "sites"), null);
    sites.onRelease(device::release);
  }

  /** Every site with {@code plan} (refused at the first collective if the GPU cannot run it). */
  public DeviceSiteCollectives(DeviceCollectives device, Plan plan) {
    this(device, null, Objects.requireNonNull(plan, "plan"));
  }

  private DeviceSiteCollectives(DeviceCollectives device, CollectiveSites sites, Plan fixed) {
    this.device = Objects.requireNonNull(device, "device");
    this.sites = sites;
    this.fixed = fixed;
    if (sites != null && sites.worldSize() != device.worldSize()) {
      throw new IllegalArgumentException("the collective sites are of " + sites.worldSize() + " ranks, the device "
          + "collectives of " + device.worldSize());
    }
  }

  /** The device collectives the data moves through. */
  public DeviceCollectives device() {
    return device;
  }

  /** R, the group's size. */
  public int worldSize() {
    return device.worldSize();
  }

  /** Bytes this rank has put on the wire. */
  public long bytesSent() {
    return device.bytesSent();
  }

  /**
   * Enqueues the sum all-reduce of the fp32 {@code rows x cols} tensor {@code x} at {@code site}, in place.
   *
   * @throws IllegalArgumentException naming the collective and site: a plan without GPU kernels, a bad shape, a
   *     tensor a calibration's codec refuses (NaN/Inf)
   */
  public void allReduce(Site site, DeviceTensor x, int rows, int cols) {
    Plan p = plan(site, x, rows, cols, CollectiveKind.ALL_REDUCE);
    named(CollectiveKind.ALL_REDUCE, site, () -> device.allReduce(p, x, rows, cols));
  }

  /**
   * Enqueues the all-gather at {@code site} of every rank's {@code shardRows x cols} shard into {@code out} ({@code
   * R·shardRows x cols}).
   *
   * @throws IllegalArgumentException as {@link #allReduce}
   */
  public void allGather(Site site, DeviceTensor shard, int shardRows, int cols, DeviceTensor out) {
    Plan p = plan(site, shard, shardRows, cols, CollectiveKind.ALL_GATHER);
    named(CollectiveKind.ALL_GATHER, site, () -> device.allGather(p, shard, shardRows, cols, out));
  }

  /**
   * Enqueues the sum reduce-scatter at {@code site} of the {@code rows x cols} tensor {@code x} into {@code shard}
   * ({@code rows/R x cols}).
   *
   * @throws IllegalArgumentException as {@link #allReduce}, or if R does not divide rows
   */
  public void reduceScatter(Site site, DeviceTensor x, int rows, int cols, DeviceTensor shard) {
    Plan p = plan(site, x, rows, cols, CollectiveKind.REDUCE_SCATTER);
    named(CollectiveKind.REDUCE_SCATTER, site, () -> device.reduceScatter(p, x, rows, cols, shard));
  }

  /**
   * Enqueues the exact (fp32) all-reduce of the {@code n} elements of {@code x}, outside any site (the replicated
   * parameter gradients that sequence parallelism leaves partial).
   */
  public void allReduceExact(DeviceTensor x, int n) {
    long before = device.bytesSent();
    device.allReduce(Plan.EXACT, x, n, 1);
    if (sites != null) sites.countExactGradientBytes(device.bytesSent() - before);
  }

  /**
   * Device milliseconds of the kernels of the collective run last (quantise, reduce, dequantise; pack and unpack for
   * the raw plans), waiting for them: the share of a collective that is compression rather than moving bytes. NaN
   * where the collectives run as CUDA graphs (NCCL), which record no per-task times, or before any collective.
   */
  public double lastKernelMillis() {
    device.synchronize();
    try {
      double ms = 0;
      for (Map.Entry<String, Float> e : device.lastTaskMillis().entrySet()) {
        String n = e.getKey();
        if (!n.startsWith("all-to-all") && !n.startsWith("all-gather")) ms += e.getValue();
      }
      return ms;
    } catch (IllegalStateException e) {
      return Double.NaN;
    }
  }

  /** The plan of this collective at {@code site}: the fixed one, or the site's ({@link CollectiveSites#planAt}). */
  private Plan plan(Site site, DeviceTensor x, int rows, int cols, CollectiveKind kind) {
    if (sites == null) return fixed;
    return sites.planAt(site, hostRows(x, cols), rows, cols, kind);
  }

  /** Rows of the fp32 tensor {@code x} as host arrays, each copied after the work enqueued before has finished. */
  private CollectiveSites.Rows hostRows(DeviceTensor x, int cols) {
    return (first, count) -> {
      if (x.bf16()) throw new IllegalArgumentException("calibration reads fp32 tensors; this one is bf16");
      long n = (long) count * cols;
      if (n > Integer.MAX_VALUE) throw new IllegalArgumentException(n + " elements do not fit a host array");
      device.synchronize();
      float[] host = new float[(int) n];
      x.buffer().copyToHost(host, 0, host.length, 4L * first * cols);
      return host;
    };
  }

  /**
   * Runs {@code op}, the collective of {@code kind} at {@code site}, naming both in a refusal's message, and counts the
   * bytes it put on the wire into the sites' training bytes by kind ({@link CollectiveSites#countTrainingBytes}).
   */
  private void named(CollectiveKind kind, Site site, Runnable op) {
    long before = device.bytesSent();
    try {
      op.run();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(kind + " at " + site.name() + ": " + e.getMessage(), e);
    }
    if (sites != null) sites.countTrainingBytes(kind, site.direction(), device.bytesSent() - before);
  }
}
