package dev.taco.kernels;

import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntUnaryOperator;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Single-precision GEMM on the CPU for row-major {@code float[]} matrices, written with the Vector API
 * ({@code jdk.incubator.vector}; run with {@code --add-modules jdk.incubator.vector}).
 *
 * <h2>Algorithm</h2>
 * A register-blocked micro-kernel keeps an {@value #MR} × {@link #NR} (two vector lengths) block of C in 16 vector
 * accumulators and updates them with one FMA per (row, vector) per k, broadcasting A's elements and loading B's rows
 * as vectors. B is packed once per call into panels of {@link #NR} columns (row-interleaved, zero-padded; column
 * slabs of at most {@link #PACK_B_MAX} floats for very large B), shared by every thread of the call: for
 * {@link #matmulTransB} the packing is the transposition. The panels of a column of tiles are packed by the first
 * thread to reach one of its tiles, so the threads of a call pack B side by side, each just before it uses it (packed
 * all at once by the calling thread, B kept the other core idle for 3 % of a 1024³ product). Each tile packs its
 * rows of op(A) per K block into micro-panels of {@value #MR} rows (p-major, zero-padded), so that the micro-kernel
 * reads A at a constant step (see {@link #packA}). C is cut into tiles of at most {@link #MC} rows × {@link #NC} columns;
 * a tile walks K in blocks of {@link #KC} (the B block of one micro-panel stays in L1), each adding into C, except that
 * without accumulating the first block's micro-kernels start from zero instead of loading C (C is neither zeroed
 * first nor read). So the transposed forms cost the same as {@link #matmul} up to the packing passes, and a
 * call allocates nothing once its thread's buffers have grown to its sizes.
 *
 * <h2>Threading</h2>
 * The calling thread computes tiles itself, claiming them one at a time from an atomic counter. Helper threads
 * ({@link #CORES} - 1 daemon threads, {@code taco-gemm-N}, shared by every caller) join a call only while cores are
 * free: a call occupies one core until it returns, it offers its tiles to helpers only if fewer calls than cores are
 * running, and a helper leaves a call (after its current tile) as soon as calls and helpers together outnumber the
 * cores. So one caller uses every core, and two callers at once on two cores (two tensor-parallel ranks) each
 * compute their own product on their own core, without waiting for or handing work to another thread. Only GEMM work
 * is counted: a helper may share a core with other work of the process or the machine (the scheduler splits it), and
 * every wait polls with {@link Thread#yield} before it parks. Problems below {@value #PARALLEL_MIN_FLOPS} flops run
 * in the calling thread only. Each call returns when C is complete.
 *
 * <h2>Contract</h2>
 * Sizes must be {@code >= 0}; a zero size is allowed (with {@code k == 0} C is zeroed, or left as is when
 * accumulating). Offsets must be {@code >= 0} and every array must hold the whole matrix; otherwise an
 * {@link IllegalArgumentException} naming the argument is thrown before anything is written. Null arrays
 * give a {@link NullPointerException}. C must not overlap A or B. Results agree with a float64 reference to
 * float rounding: each element is C's value (0 unless accumulating) plus the k products in order of p, each added
 * with one fused multiply-add, so the bits do not depend on the threads, the tiles or the vector width
 * ({@link #matmulNaive} rounds each product and adds C last).
 */
public final class Gemm {
  private Gemm() {}

  private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
  private static final int L = S.length();
  /** {@link #MR} lanes: one p of an Aᵀ micro-panel. */
  private static final VectorSpecies<Float> S8 = FloatVector.SPECIES_256;
  /** Rows of the register block. */
  static final int MR = 8;
  /** Columns of the register block: two vectors. */
  static final int NR = 2 * L;
  /** Rows of C per tile at most (multiple of {@link #MR}). */
  static final int MC = MR * Integer.getInteger("taco.gemm.mcPanels", 16);
  /** Depth of one K block (the packed B block of one micro-panel, KC × NR floats, stays in L1). */
  static final int KC = Integer.getInteger("taco.gemm.kc", 256);
  /**
   * Columns of C per tile at most (multiple of {@link #NR}): the packed A block of a tile and K block serves nc
   * columns, so packing costs 1/(2nc) of the tile's flops (16 panels: 1024 x 512 x 768 A·B one core at 0.80 of
   * OpenBLAS against 0.77 with 8, in the same run).
   */
  static final int NC = NR * Integer.getInteger("taco.gemm.ncPanels", 16);
  /** Below this many flops (2mnk) a call runs in the calling thread only. */
  static final long PARALLEL_MIN_FLOPS = 1L << 22;
  /**
   * Floats between packed A micro-panels beyond their MR·kc: at kc = 256 the panels would start 8 KiB apart, and
   * the packing pass, which writes all of a tile's panels at once, would keep hitting one L1 set.
   */
  private static final int PANEL_PAD = 16;
  /** Rows of a B panel packed at a time from the columns of op(B) (8 KiB of the panel at NR = 32). */
  private static final int PACK_P = 64;
  /** Floats of packed B per call at most (4 MiB; at least one panel of k rows): wider B is done in slabs. */
  static final int PACK_B_MAX = 1 << 20;
  /**
   * A parallel call cuts C into at least this many tiles per core when it is big enough (load balance; 4 rather than 8
   * since fewer, larger tiles pack less of A and reuse each micro-panel of B more: see {@link Job#slab}).
   */
  private static final int TILES_PER_CORE = 4;
  /** A parallel call narrows its tiles to this many columns of C before it takes fewer rows. */
  private static final int SPLIT_COLUMNS = 4 * NR;
  /**
   * Waiting threads poll with {@link Thread#yield} (a spinning thread that the scheduler put on the core of the
   * thread it waits for would hold that thread off; one that yields lets it run) for this long before parking: a
   * caller waiting for helpers' last tiles (a helper completing the last one wakes it), and a helper after it was
   * woken or finished its tiles, which so catches a call whose B is still being packed, or the next GEMM of a
   * training step, without a wake-up (tens of microseconds, as long as a small product, and often late on a busy
   * machine). Polling costs a core only while nothing else wants it. A helper that left a call because no core was
   * free parks at once.
   */
  private static final long POLL_NANOS = 1_000_000;

  /**
   * Cores the GEMM may use: {@code availableProcessors()}, or the system property {@code taco.gemm.threads} (1: every
   * call in its caller's thread, no helpers).
   */
  static final int CORES = Math.max(1, Integer.getInteger("taco.gemm.threads",
      Runtime.getRuntime().availableProcessors()));
  /** Threads inside {@link #gemm} (each occupies a core until it returns). */
  private static final AtomicInteger CALLERS = new AtomicInteger();
  /**
   * Helpers inside a call. Counted apart from the callers: a helper still leaving the last call must not make the
   * caller's next call look as if no core were free.
   */
  private static final AtomicInteger HELPING = new AtomicInteger();
  /** Calls that offer tiles to helpers, one slot per core (a call finding none runs alone). */
  private static final AtomicReferenceArray<Job> OFFERS = new AtomicReferenceArray<>(CORES);
  private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);
  private static final Thread[] HELPERS = startHelpers(CORES - 1);

  /** Per-thread buffers, grown on demand and reused: the thread's own call and its packed B, edge buffers. */
  private static final class Scratch {
    final Job job = new Job(Thread.currentThread());
    float[] packB = new float[0];
    /** A tile's rows of op(A) for one K block, as micro-panels: panel q's (p, r) at q*(MR*kc + PANEL_PAD) + p*MR + r. */
    final float[] packA = new float[MC / MR * (MR * KC + PANEL_PAD)];
    /** A micro-tile of C at the right or bottom edge. */
    final float[] tile = new float[MR * NR];
  }

  // ------------------------------------------------------------------------------------------ public API

  /**
   * {@code C[m,n] (+)= A[m,k] · B[k,n]}, all row-major and dense: A at {@code a[aOff + i*k + p]}, B at
   * {@code b[bOff + p*n + j]}, C at {@code c[cOff + i*n + j]}.
   *
   * @param accumulate add into C when true; overwrite C when false
   * @throws IllegalArgumentException if a size or offset is negative or an array is too short (the message
   *     names the argument)
   * @throws NullPointerException if an array is null
   * @see Gemm class notes for threading
   */
  public static void matmul(float[] a, int aOff, float[] b, int bOff, float[] c, int cOff,
      int m, int n, int k, boolean accumulate) {
    gemm(false, false, m, n, k, a, aOff, k, b, bOff, n, c, cOff, n, accumulate);
  }

  /**
   * {@code C[m,n] (+)= A[m,k] · Bᵀ} where B is stored row-major as [n,k]: A at {@code a[aOff + i*k + p]},
   * B at {@code b[bOff + j*k + p]}, C at {@code c[cOff + i*n + j]} (the {@code x · Wᵀ} of a linear layer).
   *
   * @param accumulate add into C when true; overwrite C when false
   * @throws IllegalArgumentException if a size or offset is negative or an array is too short
   * @throws NullPointerException if an array is null
   */
  public static void matmulTransB(float[] a, int aOff, float[] b, int bOff, float[] c, int cOff,
      int m, int n, int k, boolean accumulate) {
    gemm(false, true, m, n, k, a, aOff, k, b, bOff, k, c, cOff, n, accumulate);
  }

  /**
   * {@code C[m,n] (+)= Aᵀ · B} where A is stored row-major as [k,m] and B as [k,n]: A at
   * {@code a[aOff + p*m + i]}, B at {@code b[bOff + p*n + j]}, C at {@code c[cOff + i*n + j]} (the weight
   * gradient {@code Xᵀ · dY}).
   *
   * @param accumulate add into C when true; overwrite C when false
   * @throws IllegalArgumentException if a size or offset is negative or an array is too short
   * @throws NullPointerException if an array is null
   */
  public static void matmulTransA(float[] a, int aOff, float[] b, int bOff, float[] c, int cOff,
      int m, int n, int k, boolean accumulate) {
    gemm(true, false, m, n, k, a, aOff, m, b, bOff, n, c, cOff, n, accumulate);
  }

  /**
   * General form with leading dimensions: {@code C (+)= op(A) · op(B)} where {@code op(A)} is m×k and
   * {@code op(B)} is k×n. Without transposition A is stored [m, lda] (element (i,p) at
   * {@code aOff + i*lda + p}, {@code lda >= k}); with {@code transA} it is stored [k, lda] (element (i,p)
   * at {@code aOff + p*lda + i}, {@code lda >= m}). Likewise B is [k, ldb] ({@code ldb >= n}) or, with
   * {@code transB}, [n, ldb] ({@code ldb >= k}). C is [m, ldc] with {@code ldc >= n}. Threading and errors
   * as in the class notes.
   */
  public static void gemm(boolean transA, boolean transB, int m, int n, int k,
      float[] a, int aOff, int lda, float[] b, int bOff, int ldb,
      float[] c, int cOff, int ldc, boolean accumulate) {
    Objects.requireNonNull(a, "a");
    Objects.requireNonNull(b, "b");
    Objects.requireNonNull(c, "c");
    nonNegative("m", m);
    nonNegative("n", n);
    nonNegative("k", k);
    nonNegative("aOff", aOff);
    nonNegative("bOff", bOff);
    nonNegative("cOff", cOff);
    checkMatrix("a", a.length, aOff, transA ? k : m, transA ? m : k, "lda", lda);
    checkMatrix("b", b.length, bOff, transB ? n : k, transB ? k : n, "ldb", ldb);
    checkMatrix("c", c.length, cOff, m, n, "ldc", ldc);
    if (m == 0 || n == 0) return;
    if (k == 0) {
      if (!accumulate) {
        for (int i = 0; i < m; i++) Arrays.fill(c, cOff + i * ldc, cOff + i * ldc + n, 0f);
      }
      return;
    }
    // element (i,p) of op(A) at aOff + i*ars + p*acs; element (p,j) of op(B) at bOff + p*brs + j*bcs
    int ars = transA ? 1 : lda, acs = transA ? lda : 1;
    int brs = transB ? 1 : ldb, bcs = transB ? ldb : 1;
    Scratch s = SCRATCH.get();
    Job job = s.job;
    job.set(a, aOff, ars, acs, c, cOff, ldc, m, k, accumulate);
    int free = CORES - CALLERS.incrementAndGet();
    int slot = 2L * m * n * k >= PARALLEL_MIN_FLOPS && free > 0 ? offer(job) : -1;
    try {
      int slab = (int) Math.min(n, Math.max(NR, (long) PACK_B_MAX / k / NR * NR));
      for (int j0 = 0; j0 < n; j0 += slab) {
        int ns = Math.min(slab, n - j0);
        if (slot >= 0) wake(free);
        int need = roundUp(ns, NR) * k;
        if (s.packB.length < need) s.packB = new float[need];
        int tiles = job.slab(s.packB, b, bOff, brs, bcs, j0, ns, slot >= 0);
        runTiles(job, s, false);
        job.await(tiles);
      }
    } finally {
      if (slot >= 0) OFFERS.set(slot, null);
      CALLERS.decrementAndGet();
    }
    job.rethrow();
  }

  /**
   * Baseline: the textbook triple loop {@code C[i,j] (+)= Σ_p A[i,p]·B[p,j]} (float sum, p innermost),
   * same arguments, layout and errors as {@link #matmul}; single-threaded, no vectorisation. For tests and
   * benchmarks only.
   */
  public static void matmulNaive(float[] a, int aOff, float[] b, int bOff, float[] c, int cOff,
      int m, int n, int k, boolean accumulate) {
    Objects.requireNonNull(a, "a");
    Objects.requireNonNull(b, "b");
    Objects.requireNonNull(c, "c");
    nonNegative("m", m);
    nonNegative("n", n);
    nonNegative("k", k);
    nonNegative("aOff", aOff);
    nonNegative("bOff", bOff);
    nonNegative("cOff", cOff);
    checkMatrix("a", a.length, aOff, m, k, "lda", k);
    checkMatrix("b", b.length, bOff, k, n, "ldb", n);
    checkMatrix("c", c.length, cOff, m, n, "ldc", n);
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < n; j++) {
        float s = 0f;
        for (int p = 0; p < k; p++) s += a[aOff + i * k + p] * b[bOff + p * n + j];
        int ci = cOff + i * n + j;
        c[ci] = accumulate ? c[ci] + s : s;
      }
    }
  }

  // ------------------------------------------------------------------------------------------ checks

  private static void nonNegative(String name, int v) {
    if (v < 0) throw new IllegalArgumentException(name + " must be >= 0, got " + v);
  }

  private static void checkMatrix(String name, int length, int off, int rows, int cols, String ldName, int ld) {
    if (ld < cols || ld < 0) {
      throw new IllegalArgumentException(ldName + " must be >= " + cols + " (columns of " + name + "), got " + ld);
    }
    if (rows == 0 || cols == 0) {
      if (off > length)
        throw new IllegalArgumentException(name + "Off " + off + " beyond " + name + ".length " + length);
      return;
    }
    long need = (long) off + (long) (rows - 1) * ld + cols;
    if (need > length) {
      throw new IllegalArgumentException(name + " too short: " + rows + "x" + cols + " with " + ldName + "=" + ld
          + " at offset " + off + " needs length " + need + ", got " + length);
    }
  }

  // ------------------------------------------------------------------------------------------ threads

  private static Thread[] startHelpers(int count) {
    Thread[] helpers = new Thread[count];
    for (int i = 0; i < count; i++) {
      helpers[i] = new Thread(Gemm::help, "taco-gemm-" + i);
      helpers[i].setDaemon(true);
      helpers[i].start();
    }
    return helpers;
  }

  /**
   * A helper's life: compute tiles of offered calls while no more threads than cores run GEMM work, park when
   * there is nothing to do or a core is not free.
   */
  private static void help() {
    Scratch s = SCRATCH.get();
    long idleSince = System.nanoTime();
    while (true) {
      Job job = offered();
      if (job != null) {
        boolean joined = HELPING.incrementAndGet() + CALLERS.get() <= CORES;
        if (joined) runTiles(job, s, true);
        HELPING.decrementAndGet();
        if (!joined) LockSupport.park();
        idleSince = System.nanoTime();
      } else if (System.nanoTime() - idleSince < POLL_NANOS) {
        Thread.yield();
      } else {
        LockSupport.park();
        idleSince = System.nanoTime();
      }
    }
  }

  /** A call offered to helpers that has a tile left to claim, or null. */
  private static Job offered() {
    for (int i = 0; i < CORES; i++) {
      Job job = OFFERS.get(i);
      if (job != null && job.claimable()) return job;
    }
    return null;
  }

  /** Offers {@code job} to helpers: its slot, or -1 when every slot is taken. */
  private static int offer(Job job) {
    for (int i = 0; i < CORES; i++) {
      if (OFFERS.compareAndSet(i, null, job)) return i;
    }
    return -1;
  }

  private static void wake(int helpers) {
    for (int i = 0; i < helpers && i < HELPERS.length; i++) LockSupport.unpark(HELPERS[i]);
  }

  /**
   * Claims and computes tiles of {@code job} until none is left; a helper also stops when more threads than cores
   * are running GEMM work. A helper completing a call's last tile wakes the call's thread.
   */
  private static void runTiles(Job job, Scratch s, boolean helper) {
    while (!helper || HELPING.get() + CALLERS.get() <= CORES) {
      long w = job.work.getAndIncrement();
      int t = (int) w, tiles = (int) (w >>> 32);
      if (t >= tiles) return;
      try {
        job.tile(t, s);
      } catch (Throwable e) {
        job.failure = e;
      }
      if (job.done.incrementAndGet() == tiles && helper) LockSupport.unpark(job.owner);
    }
  }

  // ------------------------------------------------------------------------------------------ work

  /**
   * One thread's GEMM call, reused by its next call. The owner writes the operands, then publishes the tiles in
   * {@link #work}; a thread that claims tile t < tiles from it (its atomic increment orders the reads after the
   * owner's writes) reads the operands of that call, which the owner keeps until every tile is {@link #done}.
   */
  private static final class Job {
    final Thread owner;
    /** (tiles of the current slab) << 32 | next tile to claim; claims past the end are harmless. */
    final AtomicLong work = new AtomicLong();
    /** Tiles of the current slab completed. */
    final AtomicInteger done = new AtomicInteger();
    volatile Throwable failure;
    float[] a, b, pb, c;
    int aOff, ars, acs, bOff, brs, bcs, cOff, ldc, m, k;
    boolean accumulate;
    /** The slab: columns [j0, j0 + ns) of C, B packed in pb; tiles of mc rows × nc columns, tilesM per column. */
    int j0, ns, mc, nc, tilesM;
    /** Tiles of the slab, and the runs of them that the threads of a parallel call each work down (1 otherwise). */
    int tiles, parts;
    /** Per column of tiles of the slab, its panels of B: {@link #UNPACKED}, {@link #PACKING} or {@link #PACKED}. */
    AtomicIntegerArray panels = new AtomicIntegerArray(0);
    static final int UNPACKED = 0, PACKING = 1, PACKED = 2;

    Job(Thread owner) {
      this.owner = owner;
    }

    void set(float[] a, int aOff, int ars, int acs, float[] c, int cOff, int ldc, int m, int k, boolean accumulate) {
      this.a = a;
      this.aOff = aOff;
      this.ars = ars;
      this.acs = acs;
      this.c = c;
      this.cOff = cOff;
      this.ldc = ldc;
      this.m = m;
      this.k = k;
      this.accumulate = accumulate;
      failure = null;
    }

    /**
     * Starts the slab of columns [j0, j0 + ns) of op(B) (element (p, j) at b[bOff + p*brs + j*bcs]), to be packed
     * into {@code pb} (large enough) as its tiles need it: picks the tiles and publishes them. Returns the number
     * of tiles. A parallel call takes smaller ones until there are {@link #TILES_PER_CORE} per core: fewer columns
     * first down to {@link #SPLIT_COLUMNS}, then fewer rows down to one micro-panel, and only then fewer columns
     * again. Fewer rows alone made the weight gradients' Aᵀ·B, whose C is short and wide (256 x 512, k = 1024),
     * tiles of 16 rows: one thread packed all of B (2 MiB) while the other waited, and each micro-panel of B served
     * two of A between trips to L3. Columns first, and 4 tiles per core instead of 8: one call on both cores 1.10x
     * (64 x 1024 x 128), 1.24x (256 x 1024 x 128), 1.27x (256 x 1024 x 512), 0.98-1.05x on the other shapes
     * (alternated in one JVM, 40 rounds of 50 ms). Tiles side by side share a cache line of C where they meet, in
     * every row; the first version, which split columns all the way and dealt adjacent tiles to the threads in
     * turn, ran two threads at the speed of one, but the threads now take runs of tiles down the columns.
     */
    int slab(float[] pb, float[] b, int bOff, int brs, int bcs, int j0, int ns, boolean parallel) {
      this.pb = pb;
      this.b = b;
      this.bOff = bOff;
      this.brs = brs;
      this.bcs = bcs;
      this.j0 = j0;
      this.ns = ns;
      mc = Math.min(MC, roundUp(m, MR));
      nc = Math.min(NC, roundUp(ns, NR));
      while (parallel && tiles(mc, m) * tiles(nc, ns) < TILES_PER_CORE * CORES && (mc > MR || nc > NR)) {
        if (nc > SPLIT_COLUMNS) nc = roundUp(nc / 2, NR);
        else if (mc > MR) mc = roundUp(mc / 2, MR);
        else nc = roundUp(nc / 2, NR);
      }
      tilesM = tiles(mc, m);
      tiles = tilesM * tiles(nc, ns);
      parts = parallel ? Math.min(CORES, tiles) : 1;
      int columns = tiles(nc, ns);
      if (panels.length() < columns) panels = new AtomicIntegerArray(columns);
      for (int i = 0; i < columns; i++) panels.set(i, UNPACKED);
      done.set(0);
      work.set((long) tiles << 32);
      return tiles;
    }

    boolean claimable() {
      long w = work.get();
      return (int) w < (int) (w >>> 32);
    }

    /** Waits until all {@code tiles} of the slab are done: polls a while, then parks (the last helper wakes it). */
    void await(int tiles) {
      long start = System.nanoTime();
      while (done.get() < tiles) {
        if (System.nanoTime() - start < POLL_NANOS) Thread.yield();
        else LockSupport.park(this);
      }
    }

    void rethrow() {
      Throwable e = failure;
      if (e instanceof RuntimeException r) throw r;
      if (e instanceof Error r) throw r;
      if (e != null) throw new IllegalStateException(e);
    }

    /**
     * Computes the tile of claim t of the slab, all of K: zeroes the tile first unless accumulating, then adds one
     * K block after the other. Tiles go down a column of tiles first (GotoBLAS's order), and a parallel call's
     * claims are dealt out over {@link #parts} runs of that order, one run per thread claiming in turn.
     */
    void tile(int t, Scratch s) {
      // claim t is tile u of run t % parts: the runs are contiguous in the tile order (down a column of tiles,
      // then the next column), so threads claiming in turn work on different columns of C and blocks of packed
      // B. Adjacent tiles of one column for each thread in turn ran one product on two cores at 1.45x one core;
      // runs of their own, 1.75x (1024^3)
      int per = tiles / parts, extra = tiles % parts, part = t % parts, j = t / parts;
      int u = part * per + Math.min(part, extra) + j;
      int i0 = (u % tilesM) * mc, jt = (u / tilesM) * nc;
      int i1 = Math.min(i0 + mc, m), jt1 = Math.min(jt + nc, ns);
      // op(A) is packed per tile and K block into micro-panels, (p, r) at p*MR + r, so that the micro-kernel reads
      // its eight values of one p side by side at a constant step: with the step a parameter (A read in place, row
      // or column stride), C2 keeps eight range checks and eight index sums in the loop, and the kernel ran at 0.77-0.83
      // of the packed one (8x32 on AVX-512, 2026-12-02). Read in place, Aᵀ's p's also lie m floats apart and fall
      // into a few L1 sets. Packing costs about 0.4 ns per element of A, once per K block for the tile's nc columns
      packed(u / tilesM, jt, jt1);
      for (int p0 = 0; p0 < k; p0 += KC) {
        int kc = Math.min(KC, k - p0);
        // the first K block of a product that overwrites C starts from zero accumulators: C neither zeroed first
        // nor loaded (the same bits: 0 + a*b in one FMA; 1024^3 one core 1.03-1.08x, alternated in one JVM)
        boolean load = accumulate || p0 > 0;
        packA(s.packA, a, aOff + i0 * ars + p0 * acs, ars, acs, i1 - i0, kc);
        for (int jr = jt; jr < jt1; jr += NR) {
          int nr = Math.min(NR, ns - jr);
          int bi = (jr / NR) * k * NR + p0 * NR;
          for (int ir = i0; ir < i1; ir += MR) {
            int mr = Math.min(MR, m - ir);
            int ci = cOff + ir * ldc + j0 + jr;
            int ai = (ir - i0) / MR * (MR * kc + PANEL_PAD);
            if (mr == MR && nr == NR) {
              kernel(s.packA, ai, pb, bi, kc, c, ci, ldc, load);
            } else { // through a zero-padded copy of the C block: the same sums as in the interior
              float[] tt = s.tile;
              if (load) {
                Arrays.fill(tt, 0f);
                for (int r = 0; r < mr; r++) System.arraycopy(c, ci + r * ldc, tt, r * NR, nr);
              }
              kernel(s.packA, ai, pb, bi, kc, tt, 0, NR, load);
              for (int r = 0; r < mr; r++) System.arraycopy(tt, r * NR, c, ci + r * ldc, nr);
            }
          }
        }
      }
    }

    /**
     * Returns once the panels of B of columns [jt, jt1) of the slab, column of tiles {@code column}, are packed:
     * packs them if no thread has begun to, else waits for the thread that has.
     */
    private void packed(int column, int jt, int jt1) {
      if (panels.get(column) == PACKED) return;
      if (panels.compareAndSet(column, UNPACKED, PACKING)) {
        try {
          packB(jt, jt1);
        } finally {
          panels.set(column, PACKED); // a failure is the tile's: rethrown by the call
        }
        return;
      }
      while (panels.get(column) != PACKED) Thread.yield();
    }

    /**
     * Packs columns [jt, jt1) (jt a multiple of NR) of the slab's op(B), all k rows, into panels of NR columns:
     * the slab's panel q holds (p, j) at pb[q*k*NR + p*NR + j], zero-padded past the slab's last column.
     */
    private void packB(int jt, int jt1) {
      int jr = jt;
      if (bcs == 1) { // the whole panels one row of B at a time, read along the row (one panel at a time, each row
        // read 2 lines 4 KiB from the last: 5 % of a 1024³ product, most of it waiting for them)
        int whole = jt + (jt1 - jt) / NR * NR;
        for (int p = 0; p < k; p++) {
          int src = bOff + j0 + p * brs, dst = p * NR;
          for (int j = jt; j < whole; j += NR) {
            FloatVector.fromArray(S, b, src + j).intoArray(pb, j * k + dst);
            FloatVector.fromArray(S, b, src + j + L).intoArray(pb, j * k + dst + L);
          }
        }
        jr = whole;
      }
      for (; jr < jt1; jr += NR) {
        int base = jr * k, cols = Math.min(NR, ns - jr);
        // one column of op(B) at a time (for Bᵀ, brs == 1, a contiguous row of the stored B), in blocks of
        // PACK_P rows of the panel, so that the block being written (PACK_P x NR floats) stays in L1
        for (int p0 = 0; p0 < k; p0 += PACK_P) {
          int p1 = Math.min(k, p0 + PACK_P);
          for (int j = 0; j < NR; j++) {
            int src = bOff + (j0 + jr + j) * bcs;
            if (j < cols) {
              for (int p = p0; p < p1; p++) pb[base + p * NR + j] = b[src + p * brs];
            } else {
              for (int p = p0; p < p1; p++) pb[base + p * NR + j] = 0f;
            }
          }
        }
      }
    }
  }

  /**
   * Packs {@code rows} rows of op(A), kc columns, element (i, p) at a[ai + i*ars + p*acs] (one of the strides is 1),
   * into micro-panels of MR rows: panel q's (p, r) at dst[q*(MR*kc + PANEL_PAD) + p*MR + r], rows past {@code rows}
   * zero. Aᵀ (ars == 1) one p at a time: its rows lie side by side in A, so each line of A is read once, whole. A
   * (acs == 1) with 16 lanes by {@link #transpose8}, L columns of the eight rows at a time (0.31-0.48 ns per element
   * against 0.66-1.05 for the scalar loop, 128 x 256 from A with 1024 columns, alternated in one JVM; 1024^3 one core
   * 1.02-1.03x); with fewer lanes one row at a time, read along the row and written at a step of MR (the eight-lane
   * transposition ran 1024^3 at 0.94x of it with -XX:UseAVX=2; 0.42 ns per element against 1.25 one p at a time
   * across the eight rows, and no slower than an eight-lane gather).
   */
  private static void packA(float[] dst, float[] a, int ai, int ars, int acs, int rows, int kc) {
    int stride = MR * kc + PANEL_PAD, whole = rows / MR;
    if (ars == 1) {
      for (int p = 0; p < kc; p++) {
        int src = ai + p * acs;
        for (int q = 0; q < whole; q++) {
          FloatVector.fromArray(S8, a, src + q * MR).intoArray(dst, q * stride + p * MR);
        }
      }
    } else if (TRANSPOSE_ON_LANES) {
      for (int q = 0; q < whole; q++) {
        int src = ai + q * MR * ars, d = q * stride, p = 0;
        for (; p + L <= kc; p += L) transpose8(a, src + p, ars, dst, d + p * MR);
        for (; p < kc; p++) {
          for (int r = 0; r < MR; r++) dst[d + p * MR + r] = a[src + r * ars + p];
        }
      }
    } else {
      for (int i = 0; i < whole * MR; i++) {
        int src = ai + i * ars, d = i / MR * stride + i % MR;
        for (int p = 0; p < kc; p++) dst[d + p * MR] = a[src + p];
      }
    }
    if (whole * MR < rows) {
      for (int p = 0; p < kc; p++) {
        int d = whole * stride + p * MR;
        for (int r = 0; r < MR; r++) {
          int i = whole * MR + r;
          dst[d + r] = i < rows ? a[ai + i * ars + p * acs] : 0f;
        }
      }
    }
  }

  /** {@link #packA} transposes on lanes where that was measured faster: 16 lanes (AVX-512). */
  private static final boolean TRANSPOSE_ON_LANES = L == 16;

  /** Lane indexes for a two-vector select: lane l takes {@code index(l)}, below L from the first vector. */
  private static FloatVector selection(IntUnaryOperator index) {
    float[] v = new float[L];
    for (int l = 0; l < L; l++) v[l] = index.applyAsInt(l);
    return FloatVector.fromArray(S, v, 0);
  }

  /** The three interleavings of {@link #transpose8}, each of single lanes, pairs and quads: low and high halves. */
  private static final FloatVector ZIP1_LO = selection(l -> (l % 2) * L + l / 2),
      ZIP1_HI = selection(l -> (l % 2) * L + L / 2 + l / 2),
      ZIP2_LO = selection(l -> (l / 2 % 2) * L + l / 4 * 2 + l % 2),
      ZIP2_HI = selection(l -> (l / 2 % 2) * L + L / 2 + l / 4 * 2 + l % 2),
      ZIP4_LO = selection(l -> (l / 4 % 2) * L + l / 8 * 4 + l % 4),
      ZIP4_HI = selection(l -> (l / 4 % 2) * L + L / 2 + l / 8 * 4 + l % 4);

  /**
   * Writes the 8 x L block of A at a[s + r*ars + p] (rows r < 8, columns p < L) p-major to dst[o + p*8 + r]: rows
   * interleaved by single lanes, then pairs, then quads (24 two-vector selects, vpermt2ps on AVX-512). Needs L >= 8.
   */
  private static void transpose8(float[] a, int s, int ars, float[] dst, int o) {
    FloatVector r0 = FloatVector.fromArray(S, a, s), r1 = FloatVector.fromArray(S, a, s + ars);
    FloatVector r2 = FloatVector.fromArray(S, a, s + 2 * ars), r3 = FloatVector.fromArray(S, a, s + 3 * ars);
    FloatVector r4 = FloatVector.fromArray(S, a, s + 4 * ars), r5 = FloatVector.fromArray(S, a, s + 5 * ars);
    FloatVector r6 = FloatVector.fromArray(S, a, s + 6 * ars), r7 = FloatVector.fromArray(S, a, s + 7 * ars);
    // rows 2i, 2i+1 by lanes: t(2i) their columns 0..L/2-1, t(2i+1) the rest
    FloatVector t0 = ZIP1_LO.selectFrom(r0, r1), t1 = ZIP1_HI.selectFrom(r0, r1);
    FloatVector t2 = ZIP1_LO.selectFrom(r2, r3), t3 = ZIP1_HI.selectFrom(r2, r3);
    FloatVector t4 = ZIP1_LO.selectFrom(r4, r5), t5 = ZIP1_HI.selectFrom(r4, r5);
    FloatVector t6 = ZIP1_LO.selectFrom(r6, r7), t7 = ZIP1_HI.selectFrom(r6, r7);
    // rows 0-3 and 4-7 by pairs: four rows per column, L/4 columns per vector
    FloatVector u0 = ZIP2_LO.selectFrom(t0, t2), u1 = ZIP2_HI.selectFrom(t0, t2);
    FloatVector u2 = ZIP2_LO.selectFrom(t1, t3), u3 = ZIP2_HI.selectFrom(t1, t3);
    FloatVector u4 = ZIP2_LO.selectFrom(t4, t6), u5 = ZIP2_HI.selectFrom(t4, t6);
    FloatVector u6 = ZIP2_LO.selectFrom(t5, t7), u7 = ZIP2_HI.selectFrom(t5, t7);
    // all eight rows by quads: L/8 columns per vector, in column order
    ZIP4_LO.selectFrom(u0, u4).intoArray(dst, o);
    ZIP4_HI.selectFrom(u0, u4).intoArray(dst, o + L);
    ZIP4_LO.selectFrom(u1, u5).intoArray(dst, o + 2 * L);
    ZIP4_HI.selectFrom(u1, u5).intoArray(dst, o + 3 * L);
    ZIP4_LO.selectFrom(u2, u6).intoArray(dst, o + 4 * L);
    ZIP4_HI.selectFrom(u2, u6).intoArray(dst, o + 5 * L);
    ZIP4_LO.selectFrom(u3, u7).intoArray(dst, o + 6 * L);
    ZIP4_HI.selectFrom(u3, u7).intoArray(dst, o + 7 * L);
  }

  private static int tiles(int size, int total) {
    return (total + size - 1) / size;
  }

  private static int roundUp(int x, int multiple) {
    return (x + multiple - 1) / multiple * multiple;
  }

  /**
   * MR × NR micro-kernel: C[8, 2L] (+)= A[8, kc] · Bpanel[kc, 2L], A a packed micro-panel (element (r, p) at
   * a[ai + p*MR + r]), row p of the packed B panel at pb[bi + p*NR], row r of C at c[ci + r*ldc]. Sixteen accumulators
   * in registers, loaded from C ({@code load}) or zero, and stored to C; 2 vector loads + 8 broadcasts + 16 FMAs per
   * k. Unrolled by hand over the eight rows (the accumulators must be locals to stay in registers), and written
   * without branches or helper calls: C2 stops inlining in a method this size, and a Vector API call it does not
   * inline boxes its vectors (about ten times slower). A's step is the constant MR, so that C2 proves the eight reads
   * in range before the loop and addresses them from one register.
   */
  private static void kernel(float[] a, int ai, float[] pb, int bi, int kc, float[] c, int ci, int ldc,
      boolean load) {
    FloatVector z = FloatVector.zero(S);
    int c1 = ci + ldc, c2 = c1 + ldc, c3 = c2 + ldc, c4 = c3 + ldc, c5 = c4 + ldc, c6 = c5 + ldc, c7 = c6 + ldc;
    FloatVector c00 = load ? FloatVector.fromArray(S, c, ci) : z, c01 = load ? FloatVector.fromArray(S, c, ci + L) : z;
    FloatVector c10 = load ? FloatVector.fromArray(S, c, c1) : z, c11 = load ? FloatVector.fromArray(S, c, c1 + L) : z;
    FloatVector c20 = load ? FloatVector.fromArray(S, c, c2) : z, c21 = load ? FloatVector.fromArray(S, c, c2 + L) : z;
    FloatVector c30 = load ? FloatVector.fromArray(S, c, c3) : z, c31 = load ? FloatVector.fromArray(S, c, c3 + L) : z;
    FloatVector c40 = load ? FloatVector.fromArray(S, c, c4) : z, c41 = load ? FloatVector.fromArray(S, c, c4 + L) : z;
    FloatVector c50 = load ? FloatVector.fromArray(S, c, c5) : z, c51 = load ? FloatVector.fromArray(S, c, c5 + L) : z;
    FloatVector c60 = load ? FloatVector.fromArray(S, c, c6) : z, c61 = load ? FloatVector.fromArray(S, c, c6 + L) : z;
    FloatVector c70 = load ? FloatVector.fromArray(S, c, c7) : z, c71 = load ? FloatVector.fromArray(S, c, c7 + L) : z;
    for (int p = 0; p < kc; p++) {
      int o = ai + p * MR, q = bi + p * NR;
      FloatVector b0 = FloatVector.fromArray(S, pb, q);
      FloatVector b1 = FloatVector.fromArray(S, pb, q + L);
      FloatVector x = FloatVector.broadcast(S, a[o]);
      c00 = b0.fma(x, c00);
      c01 = b1.fma(x, c01);
      x = FloatVector.broadcast(S, a[o + 1]);
      c10 = b0.fma(x, c10);
      c11 = b1.fma(x, c11);
      x = FloatVector.broadcast(S, a[o + 2]);
      c20 = b0.fma(x, c20);
      c21 = b1.fma(x, c21);
      x = FloatVector.broadcast(S, a[o + 3]);
      c30 = b0.fma(x, c30);
      c31 = b1.fma(x, c31);
      x = FloatVector.broadcast(S, a[o + 4]);
      c40 = b0.fma(x, c40);
      c41 = b1.fma(x, c41);
      x = FloatVector.broadcast(S, a[o + 5]);
      c50 = b0.fma(x, c50);
      c51 = b1.fma(x, c51);
      x = FloatVector.broadcast(S, a[o + 6]);
      c60 = b0.fma(x, c60);
      c61 = b1.fma(x, c61);
      x = FloatVector.broadcast(S, a[o + 7]);
      c70 = b0.fma(x, c70);
      c71 = b1.fma(x, c71);
    }
    c00.intoArray(c, ci);
    c01.intoArray(c, ci + L);
    c10.intoArray(c, c1);
    c11.intoArray(c, c1 + L);
    c20.intoArray(c, c2);
    c21.intoArray(c, c2 + L);
    c30.intoArray(c, c3);
    c31.intoArray(c, c3 + L);
    c40.intoArray(c, c4);
    c41.intoArray(c, c4 + L);
    c50.intoArray(c, c5);
    c51.intoArray(c, c5 + L);
    c60.intoArray(c, c6);
    c61.intoArray(c, c6 + L);
    c70.intoArray(c, c7);
    c71.intoArray(c, c7 + L);
  }
}
