package dev.taco.collective.nccl;

import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reusable CUDA events of one context, so that marking each collective's completion costs a {@code cuEventRecord}
 * rather than a {@code cuEventCreate}. Thread-safe: events are taken on the enqueueing thread and given back on the
 * watchdog thread.
 */
final class EventPool implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(EventPool.class);

  private final CudaContext ctx;
  private final Queue<CudaEvent> free = new ConcurrentLinkedQueue<>();
  private final Queue<CudaEvent> all = new ConcurrentLinkedQueue<>();

  EventPool(CudaContext ctx) {
    this.ctx = ctx;
  }

  /** @return a free event, created if none is */
  CudaEvent take() {
    CudaEvent e = free.poll();
    if (e != null) return e;
    e = ctx.createEvent();
    all.add(e);
    return e;
  }

  /** @param e an event from {@link #take()} that no one polls any more */
  void give(CudaEvent e) {
    free.add(e);
  }

  /** Destroys every event made (completed or not: the driver frees an event's resources once it completes). */
  @Override
  public void close() {
    free.clear();
    for (CudaEvent e; (e = all.poll()) != null;) {
      try {
        e.close();
      } catch (RuntimeException ex) {
        LOG.warn("could not destroy a CUDA event: {}", ex.getMessage());
      }
    }
  }
}
