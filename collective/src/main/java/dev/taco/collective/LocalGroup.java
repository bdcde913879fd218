package dev.taco.collective;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The {@code local} transport of docs/design.md §4: a group of R ranks that are threads of this JVM. Each rank owns its
 * buffers; every payload that crosses ranks is copied, so no rank ever sees another rank's array.
 *
 * <p>The state the ranks share is a mailbox of byte payloads and a barrier. The barrier never waits forever: it
 * gives up after the group's timeout ({@link #DEFAULT_TIMEOUT} unless set), and it wakes every waiting rank as
 * soon as the group is aborted (a rank failed, timed out, was interrupted or closed while others wait for it).
 * After an abort every collective on every rank throws {@link CollectiveException} with the reason.
 *
 * <p>Use {@link #run} to run one task per rank, each on its own thread, with failure propagation; or
 * {@link #create} to get the communicators and drive the threads yourself.
 */
public final class LocalGroup {

  /** Timeout of one collective when none is given: 120 s. */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(120);

  /**
   * The longest timeout a collective takes, here and in the NCCL transport: 100 years, in effect none (a deadline of
   * {@code System.nanoTime()} plus a few hundred years overflows a long).
   */
  public static final Duration MAX_TIMEOUT = Duration.ofDays(36_500);

  /**
   * The body one rank runs in {@link #run}.
   *
   * @param <T> the rank's result type
   */
  @FunctionalInterface
  public interface RankTask<T> {
    /**
     * @param comm this rank's communicator ({@code comm.rank()} tells which rank)
     * @return the rank's result, collected in rank order by {@link #run}
     * @throws Exception any failure; it aborts the group
     */
    T run(Communicator comm) throws Exception;
  }

  private final int worldSize;
  private final long timeoutNanos;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  /** Mailboxes by round parity, [parity][from][to]; see {@link #exchange}. */
  private final byte[][][][] mailbox;
  private final boolean[] arrived;
  /** What each rank that has arrived in the current round called (every rank must call the same). */
  private final String[] arrivedOp;
  private final boolean[] closed;
  private int arrivedCount;
  private long generation;
  private String abortReason;
  private int abortOrigin = -1;

  private LocalGroup(int worldSize, Duration timeout) {
    if (worldSize < 1) {
      throw new IllegalArgumentException("worldSize must be >= 1, got " + worldSize);
    }
    if (timeout == null || timeout.isNegative() || timeout.isZero() || timeout.compareTo(MAX_TIMEOUT) > 0) {
      throw new IllegalArgumentException("timeout must be positive and at most " + MAX_TIMEOUT.toDays() + " days, got "
          + timeout);
    }
    this.worldSize = worldSize;
    this.timeoutNanos = timeout.toNanos();
    this.mailbox = new byte[2][worldSize][worldSize][];
    this.arrived = new boolean[worldSize];
    this.arrivedOp = new String[worldSize];
    this.closed = new boolean[worldSize];
  }

  /**
   * Creates a group of {@code worldSize} ranks with the {@link #DEFAULT_TIMEOUT}.
   *
   * @return the communicators of ranks {@code 0..worldSize-1}, in rank order; each must be used by one thread at
   *     a time
   * @throws IllegalArgumentException if {@code worldSize < 1}
   */
  public static List<LocalCommunicator> create(int worldSize) {
    return create(worldSize, DEFAULT_TIMEOUT);
  }

  /**
   * Creates a group of {@code worldSize} ranks whose collectives give up after {@code timeout}.
   *
   * @param timeout how long one rank waits in one collective for the others before the group is aborted
   * @return the communicators of ranks {@code 0..worldSize-1}, in rank order
   * @throws IllegalArgumentException if {@code worldSize < 1} or the timeout is not positive or over {@link #MAX_TIMEOUT}
   */
  public static List<LocalCommunicator> create(int worldSize, Duration timeout) {
    LocalGroup group = new LocalGroup(worldSize, timeout);
    List<LocalCommunicator> comms = new ArrayList<>(worldSize);
    for (int r = 0; r < worldSize; r++) {
      comms.add(new LocalCommunicator(group, r));
    }
    return List.copyOf(comms);
  }

  /** {@link #run(int, Duration, RankTask)} with the {@link #DEFAULT_TIMEOUT}. */
  public static <T> List<T> run(int worldSize, RankTask<T> task) {
    return run(worldSize, DEFAULT_TIMEOUT, task);
  }

  /**
   * Runs {@code task} once per rank of a fresh group, each on its own thread, waits for all of them and closes
   * the communicators.
   *
   * <p>If a rank throws, the group is aborted at once: ranks blocked in (or later entering) a collective get a
   * {@link CollectiveException} naming the failed rank and their operation, so nothing hangs. Then the failure
   * that aborted the group (the first one) is rethrown, with the other ranks' failures attached as suppressed
   * exceptions (a rank still running one timeout after the abort, stuck outside any collective, is left running on its
   * daemon thread and reported as a {@link CollectiveException}): a {@link RuntimeException} or {@link Error} as is, a checked exception wrapped in a
   * {@link CollectiveException}.
   *
   * @return the ranks' results, in rank order
   * @throws IllegalArgumentException if {@code worldSize < 1} or the timeout is not positive or over {@link #MAX_TIMEOUT}
   */
  public static <T> List<T> run(int worldSize, Duration timeout, RankTask<T> task) {
    Objects.requireNonNull(task, "task");
    List<LocalCommunicator> comms = create(worldSize, timeout);
    LocalGroup group = comms.get(0).group();
    List<T> results = new ArrayList<>(java.util.Collections.nCopies(worldSize, null));
    Throwable[] failures = new Throwable[worldSize];
    Thread[] threads = new Thread[worldSize];
    for (int r = 0; r < worldSize; r++) {
      int rank = r;
      threads[r] = Thread.ofPlatform().name("taco-local-rank-" + r).daemon().unstarted(() -> {
        LocalCommunicator comm = comms.get(rank);
        try {
          results.set(rank, task.run(comm));
        } catch (Throwable t) {
          failures[rank] = t;
          group.abort(rank, "rank " + rank + " failed: " + t);
        } finally {
          comm.close(); // after the abort, so that waiting ranks learn the real cause
        }
      });
    }
    for (Thread t : threads) {
      t.start();
    }
    boolean interrupted = false;
    long abortedAt = 0;
    List<Integer> stuck = new ArrayList<>();
    for (int r = 0; r < worldSize; r++) {
      Thread t = threads[r];
      while (t.isAlive()) {
        try {
          // once the group is aborted, a rank gets one more timeout to finish; a rank stuck outside any collective
          // (the daemon thread goes on) must not hold the caller forever
          if (abortedAt == 0 && group.aborted()) {
            abortedAt = System.nanoTime();
          }
          t.join(abortedAt == 0 ? 100 : Math.max(1, (timeout.toNanos() - (System.nanoTime() - abortedAt)) / 1_000_000));
          if (abortedAt != 0 && t.isAlive() && System.nanoTime() - abortedAt >= timeout.toNanos()) {
            stuck.add(r);
            break;
          }
        } catch (InterruptedException e) {
          interrupted = true;
          group.abort(-1, "the thread running LocalGroup.run was interrupted");
        }
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    for (int r : stuck) {
      if (failures[r] == null) {
        failures[r] = new CollectiveException("rank " + r + " did not finish within " + seconds(timeout.toNanos())
            + " after the group was aborted (its thread is left running)");
      }
    }
    rethrowFirst(failures, group.abortOrigin());
    return results;
  }

  private static void rethrowFirst(Throwable[] failures, int origin) {
    int first = origin >= 0 && failures[origin] != null ? origin : -1;
    for (int r = 0; first < 0 && r < failures.length; r++) {
      if (failures[r] != null) {
        first = r;
      }
    }
    if (first < 0) {
      return;
    }
    Throwable main = failures[first];
    RuntimeException checkedWrapper = null;
    if (!(main instanceof RuntimeException) && !(main instanceof Error)) {
      checkedWrapper = new CollectiveException("rank " + first + " failed: " + main, main);
    }
    Throwable thrown = checkedWrapper != null ? checkedWrapper : main;
    for (int r = 0; r < failures.length; r++) {
      if (r != first && failures[r] != null) {
        thrown.addSuppressed(failures[r]);
      }
    }
    if (thrown instanceof Error e) {
      throw e;
    }
    throw (RuntimeException) thrown;
  }

  int worldSize() {
    return worldSize;
  }

  /**
   * The all-to-all exchange of {@code from}'s payloads: stores a copy of {@code send[p]} for every peer p, waits
   * for all ranks, then takes what the peers left for {@code from}. Mailboxes alternate by round parity, so a rank
   * that runs ahead into round k+1 cannot overwrite round k before every rank has read it (it must pass the
   * barrier of round k+1 first, which needs every rank to have finished round k).
   *
   * @return the received payloads by source rank, {@code send[from]} itself at {@code from}
   */
  byte[][] exchange(int from, long round, byte[][] send, String op) {
    byte[][][] box = mailbox[(int) (round & 1)];
    for (int p = 0; p < worldSize; p++) {
      if (p != from) {
        box[from][p] = send[p].clone();
      }
    }
    await(from, op);
    byte[][] recv = new byte[worldSize][];
    for (int q = 0; q < worldSize; q++) {
      recv[q] = q == from ? send[from] : box[q][from];
      box[q][from] = null;
    }
    return recv;
  }

  /**
   * Blocks until every rank has called {@code await}, the group is aborted or the timeout passes. Every rank must
   * call it with the same {@code op} (a barrier, an exchange of payloads and an exchange of control messages are told
   * apart); the last rank to arrive checks that they did.
   *
   * @throws CollectiveException naming {@code rank}, {@code op} and the reason, if the group was or gets aborted,
   *     this rank times out (which aborts the group) or the ranks called different operations (which aborts it too)
   */
  void await(int rank, String op) {
    lock.lock();
    try {
      checkAlive(rank, op);
      for (int r = 0; r < worldSize; r++) {
        if (closed[r]) {
          throw fail(rank, op, abortLocked(rank, "rank " + r + " is closed but rank " + rank + " entered " + op));
        }
      }
      arrived[rank] = true;
      arrivedOp[rank] = op;
      if (++arrivedCount == worldSize) {
        for (int r = 0; r < worldSize; r++) {
          if (!arrivedOp[r].equals(op)) {
            throw fail(rank, op, abortLocked(rank, "the ranks called different collectives at once: rank " + r + " "
                + arrivedOp[r] + ", rank " + rank + " " + op + " (every rank must call the same collectives in the"
                + " same order)"));
          }
        }
        arrivedCount = 0;
        Arrays.fill(arrived, false);
        generation++;
        changed.signalAll();
        return;
      }
      long gen = generation;
      long left = timeoutNanos;
      while (generation == gen) {
        checkAlive(rank, op);
        if (left <= 0) {
          String reason = "rank " + rank + " timed out after " + seconds(timeoutNanos) + " in " + op
              + " waiting for ranks " + ranksArrivedLocked(false);
          throw fail(rank, op, abortLocked(rank, reason));
        }
        try {
          left = changed.awaitNanos(left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw fail(rank, op, abortLocked(rank, "rank " + rank + " was interrupted in " + op));
        }
      }
    } finally {
      lock.unlock();
    }
  }

  /** Aborts the group (first reason wins) and wakes every waiting rank; {@code origin} is -1 if no rank. */
  void abort(int origin, String reason) {
    lock.lock();
    try {
      abortLocked(origin, reason);
    } finally {
      lock.unlock();
    }
  }

  /** Marks {@code rank} closed; aborts the group if other ranks are waiting in a collective it will never join. */
  void close(int rank) {
    lock.lock();
    try {
      closed[rank] = true;
      if (arrivedCount > 0 && !arrived[rank]) {
        abortLocked(rank,
            "rank " + rank + " was closed while ranks " + ranksArrivedLocked(true) + " wait in a collective");
      }
    } finally {
      lock.unlock();
    }
  }

  /** Whether the group has been aborted. */
  private boolean aborted() {
    lock.lock();
    try {
      return abortReason != null;
    } finally {
      lock.unlock();
    }
  }

  private int abortOrigin() {
    lock.lock();
    try {
      return abortOrigin;
    } finally {
      lock.unlock();
    }
  }

  private String abortLocked(int origin, String reason) {
    if (abortReason == null) {
      abortReason = reason;
      abortOrigin = origin;
      changed.signalAll();
    }
    return abortReason;
  }

  private void checkAlive(int rank, String op) {
    if (abortReason != null) {
      throw fail(rank, op, abortReason);
    }
  }

  private static CollectiveException fail(int rank, String op, String reason) {
    return new CollectiveException(op + " on rank " + rank + " aborted: " + reason);
  }

  /** The ranks whose arrival flag in the current barrier round equals {@code value}. */
  private List<Integer> ranksArrivedLocked(boolean value) {
    List<Integer> out = new ArrayList<>();
    for (int r = 0; r < worldSize; r++) {
      if (arrived[r] == value) {
        out.add(r);
      }
    }
    return out;
  }

  private static String seconds(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(nanos) / 1000.0 + " s";
  }
}
