package dev.taco.collective.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.codec.Codecs;
import dev.taco.collective.Plan;
import dev.taco.collective.link.LinkProfile;
import dev.taco.collective.link.LinkProfiles;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.SpinKernel;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The emulated link on a GPU: the wire kernel holds the stream for its target time (within 5 % for phases of 100 µs
 * and more, by CUDA events), lands this rank's slots where the peers' would land, counts the bytes a real rank would
 * send, and a collective captured as a CUDA graph follows a changed profile. Skipped, with the reason, where there is
 * no GPU. The seed is printed; {@code -Dtaco.seed=N} repeats it.
 */
@Tag("gpu")
class EmulatedTransportGpuTest {
  private static final long SEED = Long.getLong("taco.seed", System.nanoTime());
  private static CudaContext ctx;

  @BeforeAll
  static void open() {
    System.out.println("EmulatedTransportGpuTest seed = " + SEED);
    if (Cuda.available()) ctx = CudaContext.open(0);
  }

  @AfterAll
  static void close() {
    if (ctx != null) ctx.close();
  }

  private static void assumeGpu() {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
  }

  /**
   * Median ms of {@code n} exchanges of R slots of {@code slot} bytes, one at a time on a stream, each behind a 1 ms
   * spin so that the host has enqueued it before the GPU reaches it (the events time the kernel, not the launch).
   */
  private static double time(EmulatedTransport t, long slot, boolean gather) {
    SpinKernel spin = new SpinKernel(ctx);
    try (CudaStream s = ctx.createStream(); CudaEvent a = ctx.createEvent(); CudaEvent z = ctx.createEvent();
        DeviceBuffer send = ctx.alloc(t.worldSize() * slot); DeviceBuffer recv = ctx.alloc(t.worldSize() * slot)) {
      double[] ms = new double[7];
      for (int i = -1; i < ms.length; i++) {
        spin.enqueue(s, 1_000_000);
        a.record(s);
        if (gather) t.allGather(recv, slot, s);
        else t.allToAll(send, recv, slot, s);
        z.record(s);
        z.synchronize();
        if (i >= 0) ms[i] = a.elapsedMillisTo(z);
      }
      Arrays.sort(ms);
      return ms[ms.length / 2];
    }
  }

  @Test
  void theWireKernelHoldsTheStreamForItsTargetTime() {
    assumeGpu();
    for (String name : new String[] {"h200-nopeer-2", "pcie5-8", "ib-ndr", "h100-nvlink-8"}) {
      for (int r : new int[] {2, 8}) {
        try (EmulatedTransport t = new EmulatedTransport(ctx, r, LinkProfiles.byName(name))) {
          for (long slot : new long[] {256L << 10, 2L << 20, 16L << 20}) {
            double target = t.phaseNanos(slot) / 1e6;
            for (boolean gather : new boolean[] {false, true}) {
              double got = time(t, slot, gather);
              System.out.printf("%s R=%d %s of %d B slots: target %.4f ms, measured %.4f ms (%+.1f %%)%n", name, r,
                  gather ? "all-gather" : "all-to-all", slot, target, got, 100 * (got / target - 1));
              if (target >= 0.1)
                assertThat(got / target - 1).as("%s R=%d slot %d", name, r, slot).isBetween(-0.05, 0.05);
            }
          }
        }
      }
    }
  }

  @Test
  void peersSlotsHoldThisRanksPayloadAndTheBytesAreARanksShare() {
    assumeGpu();
    SplittableRandom rnd = new SplittableRandom(SEED);
    int r = 4, slotFloats = 1024;
    float[] send = new float[r * slotFloats];
    for (int i = 0; i < send.length; i++) send[i] = (float) rnd.nextGaussian();
    try (EmulatedTransport t = new EmulatedTransport(ctx, r, LinkProfiles.byName("100,5"));
        CudaStream s = ctx.createStream(); DeviceBuffer d = ctx.alloc(4L * send.length);
        DeviceBuffer recv = ctx.alloc(4L * send.length)) {
      d.copyFrom(send);
      recv.memset((byte) 0);
      t.allToAll(d, recv, 4L * slotFloats, s);
      s.synchronize();
      float[] got = new float[send.length];
      recv.copyTo(got);
      for (int i = slotFloats; i < send.length; i++) assertThat(got[i]).as("seed %d, %d", SEED, i).isEqualTo(send[i]);
      for (int i = 0; i < slotFloats; i++) assertThat(got[i]).as("own slot not written").isZero();
      t.allGather(d, 4L * slotFloats, s);
      s.synchronize();
      d.copyTo(got);
      for (int i = 0; i < send.length; i++) assertThat(got[i]).isEqualTo(send[i % slotFloats]);
      assertThat(t.bytesSent()).isEqualTo(2L * (r - 1) * 4 * slotFloats);
    }
  }

  @Test
  void aCapturedAllReduceFollowsTheLinkItIsGiven() {
    assumeGpu();
    LinkProfile slow = LinkProfiles.byName("5"), fast = LinkProfiles.byName("500");
    int rows = 2048, cols = 1024;
    try (EmulatedTransport t = new EmulatedTransport(ctx, 2, slow); DeviceCollectives dc = new DeviceCollectives(t);
        DeviceBuffer x = ctx.alloc(4L * rows * cols); CudaEvent a = ctx.createEvent();
        CudaEvent z = ctx.createEvent()) {
      x.memset((byte) 0);
      Plan none = Plan.of(Codecs.byName("none"));
      double[] ms = new double[2];
      for (int k = 0; k < 2; k++) {
        t.link(k == 0 ? slow : fast);
        for (int i = 0; i < 3; i++) {
          a.record(dc.stream());
          dc.allReduce(none, new DeviceTensor(x, false), rows, cols);
          z.record(dc.stream());
          z.synchronize();
        }
        ms[k] = a.elapsedMillisTo(z);
      }
      double slowWire = 2 * slow.phaseSeconds(2L * rows * cols, 2) * 1e3; // bf16: 2 bytes a value
      System.out.printf("captured bf16 all-reduce of %d x %d: %.3f ms at 5 GB/s (wire %.3f), %.3f ms at 500%n", rows,
          cols, ms[0], slowWire, ms[1]);
      assertThat(ms[0]).isGreaterThan(0.9 * slowWire);
      assertThat(ms[1]).isLessThan(ms[0] / 10);
    }
  }

  @Test
  void badGroupsAndSlotsAreRefused() {
    assumeGpu();
    assertThatThrownBy(() -> new EmulatedTransport(ctx, 1, LinkProfiles.byName("inf")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 2 ranks, got 1");
    try (EmulatedTransport t = new EmulatedTransport(ctx, 2, LinkProfiles.byName("50"));
        CudaStream s = ctx.createStream(); DeviceBuffer b = ctx.alloc(64)) {
      assertThatThrownBy(() -> t.allGather(b, 24, s)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("16-byte multiples");
    }
  }
}
