package dev.taco.collective.device;

import dev.taco.collective.CollectiveException;
import dev.taco.collective.Communicator;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Objects;

/**
 * The {@code device-local} transport (docs/design.md §4): R ranks as threads of this JVM sharing ONE GPU, each rank owning its
 * buffers and streams; a peer's payload is moved by a device-to-device copy ({@code cuMemcpyDtoDAsync}) ordered with
 * events. It exists so the device collectives can be tested at R = 2, 4, 8 and TP runs can use a single GPU; it is
 * never presented as a real link (its "bytes on the wire" cross no link, and its speed says nothing about one).
 *
 * <p>One exchange, on each rank's stream: record a <em>ready</em> event (everything this rank enqueued before, its
 * payloads included, is done when it completes); swap (event, buffer address) with every rank over the host transport
 * ({@link Communicator#allToAllBytes}, the {@code local} transport's rendezvous: a rank that fails or never comes makes
 * the others fail with its reason or a timeout); wait on each peer's ready event and copy (pull) the peer's slot into
 * this rank's buffer; record a <em>pulled</em> event and swap those too; wait on every peer's pulled event, so that no
 * rank overwrites a payload before its peers have copied it. The host never waits for the GPU.
 *
 * <p>Every exchange call uses fresh events from a pool per call site; events are reused only after both swaps of
 * their exchange, which every rank has passed before any rank can record them again.
 */
public final class DeviceLocalTransport implements DeviceTransport {
  private final CudaContext ctx;
  private final Communicator host;
  private final Deque<CudaEvent> free = new ArrayDeque<>();
  private final Deque<CudaEvent> used = new ArrayDeque<>();
  private long bytesSent;
  private boolean closed;

  /**
   * @param ctx the GPU every rank of the group shares
   * @param host this rank's communicator of a {@link dev.taco.collective.LocalGroup} (rank and world size come from it)
   */
  public DeviceLocalTransport(CudaContext ctx, Communicator host) {
    this.ctx = Objects.requireNonNull(ctx, "ctx");
    this.host = Objects.requireNonNull(host, "host");
  }

  @Override
  public int rank() {
    return host.rank();
  }

  @Override
  public int worldSize() {
    return host.worldSize();
  }

  @Override
  public CudaContext context() {
    return ctx;
  }

  @Override
  public void allToAll(DeviceBuffer send, DeviceBuffer recv, long slotBytes, CudaStream stream) {
    exchange(send, recv, slotBytes, stream, false);
  }

  @Override
  public void allGather(DeviceBuffer buf, long slotBytes, CudaStream stream) {
    exchange(buf, buf, slotBytes, stream, true);
  }

  /**
   * Pulls, for every peer {@code p}, the slot it sends here: its slot {@link #rank()} ({@code allToAll}) or its slot
   * {@code p} ({@code allGather}) into this rank's slot {@code p}.
   */
  private void exchange(DeviceBuffer src, DeviceBuffer dst, long slotBytes, CudaStream stream, boolean gather) {
    check(src, slotBytes, "send");
    check(dst, slotBytes, "receive");
    int world = worldSize();
    int me = rank();
    CudaEvent ready = event();
    ready.record(stream);
    long[][] peers = swap(ready.handle(), src.pointer(), slotBytes);
    for (int p = 0; p < world; p++) {
      if (peers[p][2] != slotBytes) { // every rank sees every size: all of them fail here, none copies
        throw new CollectiveException("device-local " + (gather ? "all-gather" : "all-to-all") + " on rank " + me
            + ": rank " + p + " exchanges payload slots of " + peers[p][2] + " bytes, this rank of " + slotBytes
            + ": the ranks called the collective with different shapes or plans");
      }
    }
    ctx.makeCurrent();
    for (int p = 0; p < world; p++) {
      if (p == me) {
        continue;
      }
      ctx.driver().streamWaitEvent(stream.handle(), peers[p][0]);
      long from = peers[p][1] + (gather ? p : me) * slotBytes;
      ctx.driver().memcpyDtoDAsync(dst.pointer() + p * slotBytes, from, slotBytes, stream.handle());
    }
    CudaEvent pulled = event();
    pulled.record(stream);
    long[][] done = swap(pulled.handle(), 0, slotBytes);
    for (int p = 0; p < world; p++) {
      if (p != me) {
        ctx.driver().streamWaitEvent(stream.handle(), done[p][0]);
      }
    }
    bytesSent += (world - 1) * slotBytes;
    recycle();
  }

  /** Gives every rank this rank's (event, address, slot size); returns every rank's, by rank. */
  private long[][] swap(long event, long address, long slotBytes) {
    return swapLongs(event, address, slotBytes);
  }

  private long[][] swapLongs(long... values) {
    int world = worldSize();
    byte[][] out = new byte[world][];
    ByteBuffer mine = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    for (long v : values) {
      mine.putLong(v);
    }
    java.util.Arrays.fill(out, mine.array());
    byte[][] in = host.allToAllBytes(out);
    long[][] got = new long[world][values.length];
    for (int q = 0; q < world; q++) {
      ByteBuffer b = ByteBuffer.wrap(in[q]).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < values.length; i++) {
        got[q][i] = b.getLong();
      }
    }
    return got;
  }

  @Override
  public void agree(String what, long fingerprint) {
    long[][] all = swapLongs(fingerprint);
    for (int q = 0; q < all.length; q++) {
      if (all[q][0] != fingerprint) {
        throw new CollectiveException("device-local: rank " + q + " and rank " + rank() + " disagree on " + what);
      }
    }
  }

  private CudaEvent event() {
    if (closed) {
      throw new IllegalStateException("device-local transport of rank " + rank() + " is closed");
    }
    CudaEvent e = free.isEmpty() ? ctx.createSyncEvent() : free.pop();
    used.push(e);
    return e;
  }

  /** Both swaps of the exchange are done on every rank: its events may be recorded again by the next one. */
  private void recycle() {
    while (!used.isEmpty()) {
      free.push(used.pop());
    }
  }

  private void check(DeviceBuffer b, long slotBytes, String what) {
    if (slotBytes <= 0 || b.bytes() < slotBytes * worldSize()) {
      throw new IllegalArgumentException("device-local: " + what + " buffer of " + b.bytes() + " bytes cannot hold "
          + worldSize() + " slots of " + slotBytes + " bytes");
    }
    if (b.context() != ctx) {
      throw new IllegalArgumentException("device-local: " + what + " buffer belongs to another CUDA context");
    }
  }

  @Override
  public boolean capturable() {
    return false;
  }

  /** True: the agreement is a host exchange among threads, cheap enough for every call. */
  @Override
  public boolean cheapAgreement() {
    return true;
  }

  @Override
  public long bytesSent() {
    return bytesSent;
  }

  /**
   * Destroys this rank's events once every rank has come to close too (a barrier on the host transport: a peer may
   * still be enqueueing a wait on this rank's last event); if the group is already aborted, at once. Idempotent. The
   * host communicator is the caller's.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      host.barrier();
    } catch (CollectiveException e) {
      // the group failed: the peers are failing too, and no longer need these events
    }
    recycle();
    free.forEach(CudaEvent::close);
    free.clear();
  }
}
