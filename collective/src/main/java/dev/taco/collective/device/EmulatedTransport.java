package dev.taco.collective.device;

import dev.taco.collective.link.LinkProfile;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * An emulated link (docs/design.md §9): rank 0 of a group of R on one GPU, whose every exchange is a {@link WireKernel}
 * that holds the communication stream for the time the {@link LinkProfile} gives the phase's bytes and occupies the
 * SMs the profile says NCCL's kernels would. The compress, reduce and decompress kernels around the exchanges run for
 * real, on the real streams; only the bytes' flight is replaced. The peers' slots receive this rank's own payloads, so
 * the step's cost is right and its values are not: the loss of an emulated run means nothing, and every output of one
 * says "emulated link" with the profile ({@link LinkProfile#emulated}).
 *
 * <p>A phase of an all-to-all or an all-gather of R slots of {@code s} bytes is priced as the link model prices a
 * message of {@code R·s} bytes at R ranks ({@link LinkProfile#phaseSeconds}: {@code ·s} bytes cross the link).
 * The phases' times live in device memory, one per slot size, so a captured collective follows {@link #link(LinkProfile)}
 * changing the profile. Capturable; one thread at a time.
 */
public final class EmulatedTransport implements DeviceTransport {
  /** Distinct slot sizes one transport can time (a model's collectives use a few dozen). */
  static final int MAX_PHASES = 4096;

  private final CudaContext ctx;
  private final int world;
  private final WireKernel wire;
  private final DeviceBuffer nanos;
  private final long[] hostNanos = new long[MAX_PHASES];
  private final Map<Long, Integer> phases = new HashMap<>();
  private final java.util.List<Long> exchanged = new java.util.ArrayList<>();
  private LinkProfile link;
  private long bytesSent;
  private boolean closed;

  /**
   * @param worldSize R, the TP group this rank emulates (at least 2)
   * @param link the link model
   * @throws IllegalArgumentException for fewer than 2 ranks
   */
  public EmulatedTransport(CudaContext ctx, int worldSize, LinkProfile link) {
    if (worldSize < 2) {
      throw new IllegalArgumentException("an emulated TP group has at least 2 ranks, got " + worldSize);
    }
    this.ctx = Objects.requireNonNull(ctx, "ctx");
    this.world = worldSize;
    this.link = Objects.requireNonNull(link, "link");
    this.wire = new WireKernel(ctx);
    this.nanos = ctx.alloc(8L * MAX_PHASES);
  }

  /**
   * Prices every phase with {@code next} from now on, also in collectives captured before (the times are read from
   * device memory); waits for the work enqueued on the context so far.
   */
  public void link(LinkProfile next) {
    link = Objects.requireNonNull(next, "link");
    for (Map.Entry<Long, Integer> e : phases.entrySet()) hostNanos[e.getValue()] = phaseNanos(e.getKey());
    ctx.synchronize();
    nanos.copyFromHost(hostNanos, 0, phases.size(), 0);
  }

  /** The time the link model gives a phase of R slots of {@code slotBytes}, in nanoseconds. */
  public long phaseNanos(long slotBytes) {
    return Math.round(link.phaseSeconds(world * slotBytes, world) * 1e9);
  }

  @Override
  public int rank() {
    return 0;
  }

  @Override
  public int worldSize() {
    return world;
  }

  @Override
  public CudaContext context() {
    return ctx;
  }

  /** Slot {@code p} of {@code send} into slot {@code p} of {@code recv} for every peer p, then the link's time. */
  @Override
  public void allToAll(DeviceBuffer send, DeviceBuffer recv, long slotBytes, CudaStream stream) {
    wire.enqueue(send, slotBytes, recv, slotBytes, world, 0, phase(slotBytes), link.sms(), stream);
    bytesSent += (world - 1) * slotBytes;
    exchanged.add(slotBytes);
  }

  /** Slot 0 of {@code buf} into every other slot, then the link's time. */
  @Override
  public void allGather(DeviceBuffer buf, long slotBytes, CudaStream stream) {
    wire.enqueue(buf, 0, buf, slotBytes, world, 0, phase(slotBytes), link.sms(), stream);
    bytesSent += (world - 1) * slotBytes;
    exchanged.add(slotBytes);
  }

  /** Writes the time of a phase of {@code slotBytes} into device memory (outside any capture: this waits). */
  @Override
  public void prepare(long slotBytes) {
    phase(slotBytes);
  }

  /**
   * The device slot of a phase of {@code slotBytes}, its time written there the first time (which waits for the device:
   * the device collectives ask at recording time, {@link #prepare}, never while a stream is captured).
   */
  private DeviceBuffer phase(long slotBytes) {
    if (closed) throw new IllegalStateException("the emulated transport is closed");
    Integer i = phases.get(slotBytes);
    if (i == null) {
      if (phases.size() == MAX_PHASES) {
        throw new IllegalStateException("more than " + MAX_PHASES + " slot sizes on one emulated link");
      }
      i = phases.size();
      phases.put(slotBytes, i);
      hostNanos[i] = phaseNanos(slotBytes);
      nanos.copyFromHost(hostNanos, i, 1, 8L * i); // a new slot: no enqueued kernel reads it yet
    }
    return nanos.slice(8L * i, 8);
  }

  /** The slot size of every exchange enqueued so far (each a phase of R such slots), in order. */
  public java.util.List<Long> exchanged() {
    return java.util.Collections.unmodifiableList(exchanged);
  }

  /** One process: nothing to agree on with the peers it emulates. */
  @Override
  public void agree(String what, long fingerprint) {}

  @Override
  public boolean capturable() {
    return true;
  }

  @Override
  public long bytesSent() {
    return bytesSent;
  }

  /** Frees the phases' times (the kernel's module belongs to the context). Idempotent. */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    nanos.close();
  }
}
