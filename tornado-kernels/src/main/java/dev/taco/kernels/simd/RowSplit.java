package dev.taco.kernels.simd;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinTask;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.function.Supplier;

/**
 * Runs a row-wise codec kernel over blocks of rows on several cores when one call is large: contiguous blocks of at
 * least {@value #MIN_BLOCK} values, at most one per thread, on one shared pool of daemon workers (several callers at
 * once, e.g. tensor-parallel ranks on threads, queue their blocks on the same workers instead of oversubscribing the
 * cores); the caller waits. Rows are independent in every codec body, so the result is the one-thread result.
 *
 * <p>Off (one thread, the caller's) unless the system property {@code taco.codec.threads} asks for more, or a block
 * of code runs inside {@link #withThreads}. Chosen by measurement (2 cores, 1024 x 1024 floats, one caller,
 * 2026-12-02, JMH): two threads took {@code taco} encode from 642-748 to 382-391 us and decode from 446 to 321-379 us,
 * {@code int8-group} encode from 222-255 to 188-203 us, and slowed its memory-bound decode from 157-160 to 188-189 us.
 * So {@code taco analyze}, which codes one tensor at a time on otherwise idle cores, turns it on; {@code ./taco train}
 * does not: its ranks are already threads on the cores, and at the default model a TP tensor (1024 x 128) is below
 * two blocks anyway.
 */
public final class RowSplit {
  private RowSplit() {}

  /** Values a block must hold at least (by default): below, a thread's hand-off costs more than it saves. */
  public static final int MIN_BLOCK = 1 << 18;

  private static final int CORES = Runtime.getRuntime().availableProcessors();
  private static final int THREADS = Math.max(1, Math.min(CORES, Integer.getInteger("taco.codec.threads", 1)));
  private static final ScopedValue<int[]> HERE = ScopedValue.newInstance(); // {threads, min block}

  /** The pool, started on first use: as many workers as cores, at least two. */
  private static final class Pool {
    static final ForkJoinPool POOL = new ForkJoinPool(Math.max(2, CORES), pool -> {
      ForkJoinWorkerThread t = ForkJoinPool.defaultForkJoinWorkerThreadFactory.newThread(pool);
      t.setName("taco-codec-" + t.getPoolIndex());
      t.setDaemon(true);
      return t;
    }, null, false);
  }

  /** A kernel over rows {@code [r0, r1)}, returning a count (with {@link Lanes#NON_FINITE} as a flag). */
  @FunctionalInterface
  public interface Rows {
    /** Runs rows {@code [r0, r1)}. */
    long run(int r0, int r1);
  }

  /**
   * Runs {@code op} in the calling thread with codec calls split over up to {@code threads} threads into blocks of
   * at least {@code minBlock} values.
   *
   * @return what {@code op} returns; its exceptions pass through
   */
  public static <T> T withThreads(int threads, int minBlock, Supplier<T> op) {
    return ScopedValue.where(HERE, new int[] {Math.max(1, threads), Math.max(1, minBlock)}).call(op::get);
  }

  /**
   * {@code body} over rows {@code [0, rows)} of {@code cols} values, split when large; the blocks' counts summed and
   * their {@link Lanes#NON_FINITE} flags or-ed.
   */
  public static long run(int rows, int cols, Rows body) {
    int threads = HERE.isBound() ? HERE.get()[0] : THREADS;
    int minBlock = HERE.isBound() ? HERE.get()[1] : MIN_BLOCK;
    int blocks = (int) Math.min(threads, Math.min(rows, (long) rows * cols / minBlock));
    if (blocks <= 1) {
      return body.run(0, rows);
    }
    List<ForkJoinTask<Long>> tasks = new ArrayList<>(blocks);
    for (int b = 0; b < blocks; b++) {
      int r0 = (int) ((long) rows * b / blocks);
      int r1 = (int) ((long) rows * (b + 1) / blocks);
      tasks.add(Pool.POOL.submit(() -> body.run(r0, r1)));
    }
    long count = 0;
    long flags = 0;
    for (ForkJoinTask<Long> t : tasks) {
      long c = t.join();
      count += c & ~Lanes.NON_FINITE;
      flags |= c & Lanes.NON_FINITE;
    }
    return count | flags;
  }
}
