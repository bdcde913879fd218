package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.taco.collective.CollectiveException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The watchdog against a fake target: deadlines, async errors, external failures, waiters; one abort at most. */
class WatchdogTest {
  private static final Duration FAST = Duration.ofSeconds(5);

  /** Counts aborts and can report an async error. */
  static final class FakeTarget implements Watchdog.Target {
    final List<String> aborts = new CopyOnWriteArrayList<>();
    volatile String asyncError;

    @Override
    public String asyncError() {
      return asyncError;
    }

    @Override
    public void abort(String reason) {
      aborts.add(reason);
    }
  }

  private final FakeTarget target = new FakeTarget();
  private Watchdog watchdog;

  @AfterEach
  void close() {
    if (watchdog != null) watchdog.close();
  }

  private Watchdog start(String label, Duration timeout) {
    watchdog = new Watchdog(label, target, timeout, Duration.ofMillis(5));
    return watchdog;
  }

  private static void eventually(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) throw new AssertionError("not within 2 s: " + what);
      Thread.sleep(2);
    }
  }

  @Test
  void workCompletedBeforeItsDeadlineIsRetiredWithoutAbort() throws Exception {
    Watchdog w = start("rank 0", Duration.ofMillis(300));
    AtomicBoolean done = new AtomicBoolean();
    AtomicInteger retired = new AtomicInteger();
    w.watch("allReduce(count=8, fp32)", done::get, retired::incrementAndGet);
    assertThat(w.pending()).isEqualTo(1);
    Thread.sleep(50);
    done.set(true);
    eventually(() -> w.pending() == 0, "the completed item is retired");
    Thread.sleep(400); // past the deadline the item would have had
    assertThat(retired).hasValue(1);
    assertThat(target.aborts).isEmpty();
    assertThat(w.failure()).isNull();
    w.check();
  }

  @Test
  void workPastItsDeadlineAbortsExactlyOnceNamingTheOpAndTheTimeout() throws Exception {
    Watchdog w = start("rank 1", Duration.ofMillis(200));
    AtomicInteger retired = new AtomicInteger();
    w.watch("allReduce(count=8, bf16)", () -> false, retired::incrementAndGet);
    w.watch("allGather(sendCount=4, fp32)", () -> false, retired::incrementAndGet);
    String expected = "rank 1: allReduce(count=8, bf16) not complete after 0.2 s: communicator aborted (watchdog)";
    eventually(() -> !target.aborts.isEmpty(), "the abort");
    Thread.sleep(200); // more polls, the second item overdue too: still one abort
    assertThat(target.aborts).containsExactly(expected);
    assertThat(w.failure()).isEqualTo(expected);
    assertThatThrownBy(w::check).isInstanceOf(CollectiveException.class).hasMessage(expected);
    w.close();
    assertThat(retired).as("pending items are retired at close").hasValue(2);
    assertThat(target.aborts).hasSize(1);
  }

  @Test
  void anAsyncErrorAborts() throws Exception {
    Watchdog w = start("rank 0", Duration.ofSeconds(60));
    Thread.sleep(30);
    assertThat(target.aborts).isEmpty();
    target.asyncError = "NCCL async error ncclRemoteError (6): remote process exited or there was a network error";
    eventually(() -> !target.aborts.isEmpty(), "the abort");
    String expected = "rank 0: NCCL async error ncclRemoteError (6): remote process exited or there was a network "
        + "error: communicator aborted";
    Thread.sleep(50);
    assertThat(target.aborts).containsExactly(expected);
    assertThat(w.failure()).isEqualTo(expected);
  }

  @Test
  void aProbeThatThrowsAborts() throws Exception {
    Watchdog w = start("rank 2", Duration.ofSeconds(60));
    w.watch("broadcast(count=1, uint8, root=0)", () -> {
      throw new IllegalStateException("CUDA_ERROR_ILLEGAL_ADDRESS");
    }, () -> {});
    eventually(() -> !target.aborts.isEmpty(), "the abort");
    assertThat(w.failure()).isEqualTo(
        "rank 2: broadcast(count=1, uint8, root=0) failed: CUDA_ERROR_ILLEGAL_ADDRESS: communicator aborted");
  }

  @Test
  void aWaiterThrowsTheReasonWhenAnotherItemTimesOut() {
    Watchdog w = start("rank 3", Duration.ofMillis(300));
    w.watch("reduceScatter(recvCount=2, fp32)", () -> false, () -> {});
    assertTimeoutPreemptively(FAST, () -> {
      Thread.sleep(150); // the waiter's own deadline comes 150 ms after the item's
      CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> w.await("synchronize", () -> false));
      assertThatThrownBy(waiter::get).isInstanceOf(ExecutionException.class).cause()
          .isInstanceOf(CollectiveException.class)
          .hasMessage("rank 3: reduceScatter(recvCount=2, fp32) not complete after 0.3 s: communicator aborted "
              + "(watchdog)");
    });
    assertThat(target.aborts).hasSize(1);
  }

  @Test
  void aWaiterPastItsOwnDeadlineAborts() {
    Watchdog w = start("rank 0", Duration.ofMillis(200));
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> w.await("synchronize", () -> false))
        .isInstanceOf(CollectiveException.class)
        .hasMessage("rank 0: synchronize not complete after 0.2 s: communicator aborted (watchdog)"));
    w.awaitAbort();
    assertThat(target.aborts).hasSize(1);
  }

  @Test
  void aWaiterReturnsWhenDone() {
    Watchdog w = start("rank 0", Duration.ofSeconds(60));
    long t0 = System.nanoTime();
    w.await("synchronize", () -> System.nanoTime() - t0 > 20_000_000);
    assertThat(target.aborts).isEmpty();
  }

  @Test
  void failFromOutsideAbortsOnceAndWakesWaiters() throws Exception {
    Watchdog w = start("rank 1", Duration.ofSeconds(60));
    assertTimeoutPreemptively(FAST, () -> {
      CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> w.await("synchronize", () -> false));
      Thread.sleep(50);
      w.fail("rendezvous: rank 2 died (its connection to rank 0 closed without goodbye: end of stream)");
      w.fail("a second reason is ignored");
      w.awaitAbort();
      assertThatThrownBy(waiter::get).cause().isInstanceOf(CollectiveException.class)
          .hasMessage("rank 1: rendezvous: rank 2 died (its connection to rank 0 closed without goodbye: end of "
              + "stream): communicator aborted");
    });
    w.watch("allReduce(count=1, fp32)", () -> false, () -> {});
    Thread.sleep(50);
    assertThat(target.aborts).hasSize(1);
    assertThat(w.failure()).contains("rank 2 died").doesNotContain("second");
  }

  @Test
  void failAfterCloseStillAbortsOnce() {
    Watchdog w = start("rank 0", Duration.ofSeconds(60));
    w.close();
    w.fail("late");
    w.fail("later");
    w.awaitAbort();
    assertThat(target.aborts).containsExactly("rank 0: late: communicator aborted");
  }

  @Test
  void awaitAbortReturnsAtOnceWhileHealthy() {
    Watchdog w = start("rank 0", Duration.ofSeconds(60));
    assertTimeoutPreemptively(Duration.ofMillis(500), w::awaitAbort);
    assertThat(target.aborts).isEmpty();
  }

  @Test
  void rejectsNonPositiveDurations() {
    assertThatThrownBy(() -> new Watchdog("rank 0", target, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("timeout");
    assertThatThrownBy(() -> new Watchdog("rank 0", target, Duration.ofSeconds(1), Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pollInterval");
  }
}
