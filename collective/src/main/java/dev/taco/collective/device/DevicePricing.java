package dev.taco.collective.device;

import dev.taco.collective.CollectiveKind;
import dev.taco.collective.Plan;
import dev.taco.collective.Pricing;
import dev.taco.collective.link.LinkProfile;
import dev.taco.collective.link.LinkProfiles;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * {@link Pricing} on a GPU: a collective's kernels (compress, decompress-reduce, re-compress, decompress, or the raw
 * packing of {@code none}) timed on this GPU by CUDA events, as the device collectives run them at R ranks on an
 * infinitely fast emulated link (median of 5 after a warm-up; cached per plan, kind and shape, so the sites of one
 * shape share one measurement), plus the phases of the slots it exchanged on the link model. The measurement waits for
 * the GPU: it is part of calibration, a start-up cost.
 */
public final class DevicePricing implements Pricing {
  private final CudaContext ctx;
  private final int ranks;
  private final LinkProfile link;
  private final Map<String, double[]> measured;

  /**
   * @param ranks R, at least 2
   * @param link the link model of the phases
   */
  public DevicePricing(CudaContext ctx, int ranks, LinkProfile link) {
    this(ctx, ranks, link, new HashMap<>());
  }

  private DevicePricing(CudaContext ctx, int ranks, LinkProfile link, Map<String, double[]> measured) {
    this.ctx = Objects.requireNonNull(ctx, "ctx");
    this.ranks = ranks;
    this.link = Objects.requireNonNull(link, "link");
    this.measured = measured;
  }

  /** The same kernel measurements priced on another link. */
  public DevicePricing withLink(LinkProfile other) {
    return new DevicePricing(ctx, ranks, other, measured);
  }

  @Override
  public double seconds(Plan plan, CollectiveKind kind, int rows, int cols) {
    double[] m = measured.computeIfAbsent(plan.codecAndLayout() + " " + kind + " " + rows + "x" + cols,
        k -> measure(plan, kind, rows, cols));
    double wire = 0;
    for (int i = 1; i < m.length; i++) wire += link.phaseSeconds(ranks * (long) m[i], ranks);
    return m[0] + wire;
  }

  /** {kernel seconds, then the slot bytes of each exchange} of one collective, on an infinitely fast link. */
  private double[] measure(Plan plan, CollectiveKind kind, int rows, int cols) {
    long in = 4L * rows * cols, out = kind.messageBytes(in, ranks);
    try (EmulatedTransport t = new EmulatedTransport(ctx, ranks, LinkProfiles.byName("inf"));
        DeviceCollectives dc = new DeviceCollectives(t, DeviceCollectives.DEFAULT_PIECE_BYTES, false, false);
        DeviceBuffer x = ctx.alloc(in); DeviceBuffer y = ctx.alloc(out); CudaEvent a = ctx.createEvent();
        CudaEvent z = ctx.createEvent()) {
      x.memset((byte) 0);
      double[] ms = new double[5];
      List<Long> slots = new ArrayList<>();
      for (int i = -1; i < ms.length; i++) {
        a.record(dc.stream());
        run(dc, plan, kind, new DeviceTensor(x, false), new DeviceTensor(y, false), rows, cols);
        z.record(dc.stream());
        z.synchronize();
        if (i >= 0) ms[i] = a.elapsedMillisTo(z);
        if (i == -1) slots.addAll(t.exchanged()); // one collective's exchanges
      }
      java.util.Arrays.sort(ms);
      double[] m = new double[1 + slots.size()];
      m[0] = ms[ms.length / 2] / 1e3;
      for (int i = 0; i < slots.size(); i++) m[1 + i] = slots.get(i);
      return m;
    }
  }

  private static void run(DeviceCollectives dc, Plan plan, CollectiveKind kind, DeviceTensor x, DeviceTensor y,
      int rows, int cols) {
    switch (kind) {
      case ALL_REDUCE -> dc.allReduce(plan, x, rows, cols);
      case ALL_GATHER -> dc.allGather(plan, x, rows, cols, y);
      case REDUCE_SCATTER -> dc.reduceScatter(plan, x, rows, cols, y);
    }
  }
}
