package dev.taco.collective.nccl;

import dev.taco.collective.CollectiveException;
import java.time.Duration;
import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A watchdog thread for one communicator, after PyTorch {@code ProcessGroupNCCL}'s: it tracks the pending work
 * items (an operation, a completion probe, a deadline = enqueue time + {@link #timeout()}), and every poll interval
 * asks the target for an asynchronous error and each item whether it has completed. A work item past its deadline,
 * a probe that throws, an asynchronous error, or an external {@link #fail(String)} (e.g. the rendezvous reporting a
 * dead peer) records a failure and ABORTS the target exactly once, on the watchdog thread.
 *
 * <p>The failure message names the rank and the reason, e.g.
 * {@code rank 1: allReduce(count=1024, bf16) not complete after 120.0 s: communicator aborted (watchdog)} or
 * {@code rank 0: NCCL async error ncclRemoteError (6): ...: communicator aborted}. From then on {@link #check()} and
 * {@link #await(String, BooleanSupplier)} throw {@link CollectiveException} with that message, and the target is no
 * longer polled.
 *
 * <p>The watchdog never sees a dead peer itself: like PyTorch's it sees a collective past its deadline or an error
 * NCCL reports, and aborts (docs/design.md §4). It knows nothing of NCCL: the {@link Target} does.
 *
 * <p>Thread-safe. The thread is a daemon; {@link #close()} stops it.
 */
public final class Watchdog implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Watchdog.class);

  /** Default deadline of a work item: 120 s, as a collective's default timeout in PyTorch (NCCL backend 10 min). */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(120);
  /** Default poll interval: 10 ms. */
  public static final Duration DEFAULT_POLL = Duration.ofMillis(10);
  /** How much later than the timeout {@link #await} gives up on its own (the awaited work's own deadline is first). */
  static final Duration GRACE = Duration.ofMillis(300);

  /** What the watchdog guards: a communicator, seen through two calls. */
  public interface Target {
    /**
     * Polled every interval until a failure is recorded; must not block for long.
     *
     * @return null while healthy (or still in progress), else a description of the asynchronous error, e.g.
     *         {@code "NCCL async error ncclRemoteError (6): remote process exited or there was a network error"}
     */
    String asyncError();

    /**
     * Aborts the target (for NCCL, {@code ncclCommAbort}); called exactly once, on the watchdog thread.
     *
     * @param reason the recorded failure message
     */
    void abort(String reason);
  }

  private record Work(String op, BooleanSupplier done, Runnable retire, long deadline) {}

  private final String label;
  private final Target target;
  private final Duration timeout;
  private final long pollNanos;
  private final Queue<Work> pending = new ConcurrentLinkedQueue<>();
  private final AtomicReference<String> failure = new AtomicReference<>();
  private final AtomicBoolean abortStarted = new AtomicBoolean();
  private final CountDownLatch abortDone = new CountDownLatch(1);
  private final Thread thread;
  private volatile boolean closed;

  /**
   * Starts a watchdog with the {@link #DEFAULT_POLL} interval.
   *
   * @param label   prefix of every failure message, e.g. {@code "rank 1"}
   * @param target  what to poll and abort
   * @param timeout deadline of each work item after it is enqueued, &gt; 0
   */
  public Watchdog(String label, Target target, Duration timeout) {
    this(label, target, timeout, DEFAULT_POLL);
  }

  /**
   * Starts a watchdog.
   *
   * @param label        prefix of every failure message, e.g. {@code "rank 1"}
   * @param target       what to poll and abort
   * @param timeout      deadline of each work item after it is enqueued, &gt; 0
   * @param pollInterval time between two polls, &gt; 0 (a few ms to 100 ms)
   * @throws IllegalArgumentException if a duration is not positive
   */
  public Watchdog(String label, Target target, Duration timeout, Duration pollInterval) {
    this.label = Objects.requireNonNull(label, "label");
    this.target = Objects.requireNonNull(target, "target");
    this.timeout = Time.positive(timeout, "timeout");
    this.pollNanos = Time.positive(pollInterval, "pollInterval").toNanos();
    this.thread = Thread.ofPlatform().daemon().name("taco-watchdog " + label).start(this::run);
  }

  /** @return the deadline of each work item after it is enqueued */
  public Duration timeout() {
    return timeout;
  }

  /**
   * Tracks a work item until {@code done} answers true (then {@code retire} runs), its deadline passes, or the
   * watchdog fails or closes ({@code retire} runs at {@link #close()}).
   *
   * @param op     what it is, for the message, e.g. {@code "allReduce(count=1024, bf16)"}
   * @param done   non-blocking completion probe, polled on the watchdog thread; throwing is a failure
   * @param retire run once when the item leaves the watchdog (e.g. returns its CUDA event to a pool)
   */
  public void watch(String op, BooleanSupplier done, Runnable retire) {
    pending.add(new Work(op, done, retire, System.nanoTime() + timeout.toNanos()));
  }

  /** @return the number of work items not yet completed */
  public int pending() {
    return pending.size();
  }

  /**
   * Records an external failure and aborts the target (asynchronously, on the watchdog thread; see
   * {@link #awaitAbort()}). Only the first failure counts.
   *
   * @param reason why, e.g. {@code "rendezvous: rank 2 died (...)"}; the message becomes
   *               {@code "<label>: <reason>: communicator aborted"}
   */
  public void fail(String reason) {
    record(reason + ": communicator aborted");
  }

  /**
   * Records that {@code op} missed its deadline, as the watchdog does for a work item, and aborts the target.
   *
   * @param op the operation, e.g. {@code "synchronize"}
   */
  public void expire(String op) {
    record(op + " not complete after " + Time.seconds(timeout) + ": communicator aborted (watchdog)");
  }

  /** @return the failure message, or null while healthy */
  public String failure() {
    return failure.get();
  }

  /**
   * @throws CollectiveException with the failure message, once a failure has been recorded
   */
  public void check() {
    String f = failure.get();
    if (f != null) throw new CollectiveException(f);
  }

  /**
   * Waits, polling {@code done} with a short back-off, until it answers true; bounded by {@link #timeout()} (past it
   * the target is aborted as for a late work item).
   *
   * @param op   what is awaited, for the message, e.g. {@code "synchronize"}
   * @param done non-blocking completion probe (e.g. {@code CudaEvent::query})
   * @throws CollectiveException with the failure message if a failure is recorded before or while waiting, or if
   *                             {@code done} throws (then with it as the cause)
   */
  public void await(String op, BooleanSupplier done) {
    // a little later than the timeout: work items awaited here have their own deadline, which should fire first and
    // name the stuck collective; this one is the backstop for work nobody registered
    long deadline = System.nanoTime() + timeout.toNanos() + GRACE.toNanos();
    Backoff backoff = new Backoff();
    while (true) {
      check();
      boolean complete;
      try {
        complete = done.getAsBoolean();
      } catch (RuntimeException e) {
        record(op + " failed: " + e.getMessage() + ": communicator aborted");
        throw new CollectiveException(failure.get(), e);
      }
      if (complete) {
        check();
        return;
      }
      if (System.nanoTime() - deadline > 0) {
        expire(op);
        check();
      }
      backoff.pause();
    }
  }

  /**
   * Blocks until the target's abort has returned; returns at once while healthy.
   */
  public void awaitAbort() {
    if (failure.get() == null) return;
    if (closed && !thread.isAlive()) abortOnce();
    boolean interrupted = false;
    while (true) {
      try {
        abortDone.await();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) Thread.currentThread().interrupt();
  }

  /**
   * Stops the thread (after it has run a pending abort) and retires the pending work items; idempotent.
   */
  @Override
  public void close() {
    closed = true;
    LockSupport.unpark(thread);
    boolean interrupted = false;
    while (thread.isAlive()) {
      try {
        thread.join();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) Thread.currentThread().interrupt();
  }

  private void record(String body) {
    String message = label + ": " + body;
    if (!failure.compareAndSet(null, message)) return;
    LOG.error(message);
    if (closed) abortOnce();
    else LockSupport.unpark(thread);
  }

  private void run() {
    while (!closed) {
      if (failure.get() == null) poll();
      if (failure.get() != null) abortOnce();
      LockSupport.parkNanos(this, pollNanos);
    }
    abortOnce();
    for (Work w; (w = pending.poll()) != null;) retire(w);
  }

  private void poll() {
    String error;
    try {
      error = target.asyncError();
    } catch (RuntimeException e) {
      error = "async error probe failed: " + e.getMessage();
    }
    if (error != null) {
      record(error + ": communicator aborted");
      return;
    }
    long now = System.nanoTime();
    for (var it = pending.iterator(); it.hasNext();) {
      Work w = it.next();
      boolean done;
      try {
        done = w.done().getAsBoolean();
      } catch (RuntimeException e) {
        record(w.op() + " failed: " + e.getMessage() + ": communicator aborted");
        return;
      }
      if (done) {
        it.remove();
        retire(w);
      } else if (now - w.deadline() > 0) {
        expire(w.op());
        return;
      }
    }
  }

  private void abortOnce() {
    String reason = failure.get();
    if (reason == null || !abortStarted.compareAndSet(false, true)) return;
    long t0 = System.nanoTime();
    try {
      target.abort(reason);
      LOG.warn("{}: aborted in {} ms", label, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
    } catch (RuntimeException e) {
      LOG.error("{}: abort failed", label, e);
    } finally {
      abortDone.countDown();
    }
  }

  private void retire(Work w) {
    try {
      w.retire().run();
    } catch (RuntimeException e) {
      LOG.warn("{}: retiring {} failed", label, w.op(), e);
    }
  }
}
