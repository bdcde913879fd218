package dev.taco.kernels;

import java.util.Objects;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinTask;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.concurrent.RecursiveAction;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Single-precision GEMM on the CPU for row-major {@code float[]} matrices, written with the Vector API
 * ({@code jdk.incubator.vector}; run with {@code --add-modules jdk.incubator.vector}).
 *
 * <h2>Algorithm</h2>
 * GotoBLAS-style: C is cut into tiles of {@link #MC} rows × {@link #NC} columns, one task per tile. A task
 * walks K in blocks of {@link #KC}; for each block it packs its slice of A into panels of {@value #MR} rows
 * (column-interleaved, zero-padded) and its slice of B into panels of {@link #NR} = 3 vector lengths
 * (row-interleaved, zero-padded), then runs a register-blocked micro-kernel that keeps the {@value #MR} ×
 * {@link #NR} block of C in 12 vector accumulators and updates them with one FMA per (row, vector) per k.
 * The transposed forms differ only in how the packing routines read A and B, so they run at the same speed
 * as {@link #matmul} (no separate transpose pass).
 *
 * <h2>Threading</h2>
 * Tiles run on one dedicated {@link ForkJoinPool} with parallelism = {@code availableProcessors()}, shared
 * by every caller: several threads (e.g. two tensor-parallel ranks) may call at once and their tiles are
 * interleaved on the same workers instead of oversubscribing the cores. A call from inside that pool runs
 * its tiles by fork/join in the calling worker. Problems below {@value #PARALLEL_MIN_FLOPS} flops, or with a
 * single tile, run single-threaded in the calling thread. Each call blocks until C is complete. Packing
 * buffers are per thread and reused.
 *
 * <h2>Contract</h2>
 * Sizes must be {@code >= 0}; a zero size is allowed (with {@code k == 0} C is zeroed, or left as is when
 * accumulating). Offsets must be {@code >= 0} and every array must hold the whole matrix; otherwise an
 * {@link IllegalArgumentException} naming the argument is thrown before anything is written. Null arrays
 * give a {@link NullPointerException}. C must not overlap A or B. Results agree with a float64 reference to
 * float rounding (summation order differs from {@link #matmulNaive}).
 */
public final class Gemm {
    private Gemm() {}

    private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
    private static final int L = S.length();
    /** Rows of the register block. */
    static final int MR = 4;
    /** Columns of the register block: three vectors. */
    static final int NR = 3 * L;
    /** Rows of C per task tile (multiple of {@link #MR}). */
    static final int MC = MR * Integer.getInteger("taco.gemm.mcPanels", 32);
    /** Depth of one K block (packed B micro-panel of KC × NR floats stays in L1). */
    static final int KC = Integer.getInteger("taco.gemm.kc", 256);
    /** Columns of C per task tile (multiple of {@link #NR}). */
    static final int NC = NR * Integer.getInteger("taco.gemm.ncPanels", 8);
    /** Below this many flops (2mnk) a call runs single-threaded in the caller. */
    static final long PARALLEL_MIN_FLOPS = 1L << 22;

    private static final ForkJoinPool POOL = new ForkJoinPool(
            Runtime.getRuntime().availableProcessors(),
            pool -> {
                ForkJoinWorkerThread t = ForkJoinPool.defaultForkJoinWorkerThreadFactory.newThread(pool);
                t.setName("taco-gemm-" + t.getPoolIndex());
                t.setDaemon(true);
                return t;
            },
            null, false);

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    private static final class Scratch {
        final float[] packA = new float[MC * KC];
        final float[] packB = new float[KC * NC];
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
                for (int i = 0; i < m; i++) java.util.Arrays.fill(c, cOff + i * ldc, cOff + i * ldc + n, 0f);
            }
            return;
        }
        // element (i,p) of op(A) at aOff + i*ars + p*acs; element (p,j) of op(B) at bOff + p*brs + j*bcs
        int ars = transA ? 1 : lda, acs = transA ? lda : 1;
        int brs = transB ? 1 : ldb, bcs = transB ? ldb : 1;
        Job job = new Job(a, aOff, ars, acs, b, bOff, brs, bcs, c, cOff, ldc, m, n, k, accumulate);
        int tiles = job.tilesM * job.tilesN;
        long flops = 2L * m * n * k;
        if (tiles == 1 || flops < PARALLEL_MIN_FLOPS || POOL.getParallelism() == 1) {
            for (int t = 0; t < tiles; t++) job.tile(t);
            return;
        }
        TileRange root = new TileRange(job, 0, tiles);
        if (Thread.currentThread() instanceof ForkJoinWorkerThread w && w.getPool() == POOL) {
            root.invoke();
        } else {
            POOL.invoke(root);
        }
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
            if (off > length) throw new IllegalArgumentException(name + "Off " + off + " beyond " + name + ".length " + length);
            return;
        }
        long need = (long) off + (long) (rows - 1) * ld + cols;
        if (need > length) {
            throw new IllegalArgumentException(name + " too short: " + rows + "x" + cols + " with " + ldName + "=" + ld
                    + " at offset " + off + " needs length " + need + ", got " + length);
        }
    }

    // ------------------------------------------------------------------------------------------ work

    private static final class TileRange extends RecursiveAction {
        final Job job;
        final int lo, hi;

        TileRange(Job job, int lo, int hi) {
            this.job = job;
            this.lo = lo;
            this.hi = hi;
        }

        @Override
        protected void compute() {
            if (hi - lo == 1) {
                job.tile(lo);
            } else {
                int mid = (lo + hi) >>> 1;
                ForkJoinTask.invokeAll(new TileRange(job, lo, mid), new TileRange(job, mid, hi));
            }
        }
    }

    private record Job(float[] a, int aOff, int ars, int acs, float[] b, int bOff, int brs, int bcs,
                       float[] c, int cOff, int ldc, int m, int n, int k, boolean accumulate, int tilesM, int tilesN) {
        Job(float[] a, int aOff, int ars, int acs, float[] b, int bOff, int brs, int bcs,
            float[] c, int cOff, int ldc, int m, int n, int k, boolean accumulate) {
            this(a, aOff, ars, acs, b, bOff, brs, bcs, c, cOff, ldc, m, n, k, accumulate,
                    (m + MC - 1) / MC, (n + NC - 1) / NC);
        }

        /** Computes tile t of C (row-major over tiles). */
        void tile(int t) {
            int i0 = (t / tilesN) * MC, j0 = (t % tilesN) * NC;
            int mc = Math.min(MC, m - i0), nc = Math.min(NC, n - j0);
            Scratch s = SCRATCH.get();
            for (int p0 = 0; p0 < k; p0 += KC) {
                int kc = Math.min(KC, k - p0);
                packA(s.packA, i0, mc, p0, kc);
                packB(s.packB, p0, kc, j0, nc);
                boolean add = accumulate || p0 > 0;
                for (int jr = 0; jr < nc; jr += NR) {
                    int nr = Math.min(NR, nc - jr);
                    int bPanel = (jr / NR) * kc * NR;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int mr = Math.min(MR, mc - ir);
                        int aPanel = (ir / MR) * kc * MR;
                        int cIdx = cOff + (i0 + ir) * ldc + j0 + jr;
                        if (mr == MR && nr == NR) {
                            kernel(s.packA, aPanel, s.packB, bPanel, kc, c, cIdx, ldc, add);
                        } else {
                            kernel(s.packA, aPanel, s.packB, bPanel, kc, s.tile, 0, NR, false);
                            float[] tt = s.tile;
                            for (int r = 0; r < mr; r++) {
                                int ci = cIdx + r * ldc;
                                for (int j = 0; j < nr; j++) {
                                    c[ci + j] = add ? c[ci + j] + tt[r * NR + j] : tt[r * NR + j];
                                }
                            }
                        }
                    }
                }
            }
        }

        /** Packs A[i0:i0+mc, p0:p0+kc] into panels of MR rows: panel q holds (p, r) at q*kc*MR + p*MR + r. */
        private void packA(float[] dst, int i0, int mc, int p0, int kc) {
            for (int ir = 0; ir < mc; ir += MR) {
                int base = (ir / MR) * kc * MR;
                int rows = Math.min(MR, mc - ir);
                for (int r = 0; r < MR; r++) {
                    if (r < rows) {
                        int src = aOff + (i0 + ir + r) * ars + p0 * acs;
                        if (acs == 1) {
                            for (int p = 0; p < kc; p++) dst[base + p * MR + r] = a[src + p];
                        } else {
                            for (int p = 0; p < kc; p++) dst[base + p * MR + r] = a[src + p * acs];
                        }
                    } else {
                        for (int p = 0; p < kc; p++) dst[base + p * MR + r] = 0f;
                    }
                }
            }
        }

        /** Packs B[p0:p0+kc, j0:j0+nc] into panels of NR columns: panel q holds (p, j) at q*kc*NR + p*NR + j. */
        private void packB(float[] dst, int p0, int kc, int j0, int nc) {
            for (int jr = 0; jr < nc; jr += NR) {
                int base = (jr / NR) * kc * NR;
                int cols = Math.min(NR, nc - jr);
                if (bcs == 1) {
                    for (int p = 0; p < kc; p++) {
                        int src = bOff + (p0 + p) * brs + j0 + jr;
                        int d = base + p * NR;
                        if (cols == NR) {
                            FloatVector.fromArray(S, b, src).intoArray(dst, d);
                            FloatVector.fromArray(S, b, src + L).intoArray(dst, d + L);
                            FloatVector.fromArray(S, b, src + 2 * L).intoArray(dst, d + 2 * L);
                        } else {
                            for (int j = 0; j < cols; j++) dst[d + j] = b[src + j];
                            for (int j = cols; j < NR; j++) dst[d + j] = 0f;
                        }
                    }
                } else {
                    // B^T case: column j of op(B) is contiguous in memory (brs == 1)
                    for (int j = 0; j < NR; j++) {
                        if (j < cols) {
                            int src = bOff + p0 * brs + (j0 + jr + j) * bcs;
                            for (int p = 0; p < kc; p++) dst[base + p * NR + j] = b[src + p * brs];
                        } else {
                            for (int p = 0; p < kc; p++) dst[base + p * NR + j] = 0f;
                        }
                    }
                }
            }
        }
    }

    /**
     * MR × NR micro-kernel: C[4, 3L] (+)= Apanel[kc, 4]ᵀ-interleaved · Bpanel[kc, 3L]. Twelve accumulators in
     * registers, 3 vector loads + 4 broadcasts + 12 FMAs per k.
     */
    private static void kernel(float[] pa, int ai, float[] pb, int bi, int kc,
                               float[] c, int ci, int ldc, boolean add) {
        FloatVector c00 = FloatVector.zero(S), c01 = c00, c02 = c00;
        FloatVector c10 = c00, c11 = c00, c12 = c00;
        FloatVector c20 = c00, c21 = c00, c22 = c00;
        FloatVector c30 = c00, c31 = c00, c32 = c00;
        int end = ai + kc * MR;
        for (; ai < end; ai += MR, bi += NR) {
            FloatVector b0 = FloatVector.fromArray(S, pb, bi);
            FloatVector b1 = FloatVector.fromArray(S, pb, bi + L);
            FloatVector b2 = FloatVector.fromArray(S, pb, bi + 2 * L);
            FloatVector a0 = FloatVector.broadcast(S, pa[ai]);
            c00 = b0.fma(a0, c00);
            c01 = b1.fma(a0, c01);
            c02 = b2.fma(a0, c02);
            FloatVector a1 = FloatVector.broadcast(S, pa[ai + 1]);
            c10 = b0.fma(a1, c10);
            c11 = b1.fma(a1, c11);
            c12 = b2.fma(a1, c12);
            FloatVector a2 = FloatVector.broadcast(S, pa[ai + 2]);
            c20 = b0.fma(a2, c20);
            c21 = b1.fma(a2, c21);
            c22 = b2.fma(a2, c22);
            FloatVector a3 = FloatVector.broadcast(S, pa[ai + 3]);
            c30 = b0.fma(a3, c30);
            c31 = b1.fma(a3, c31);
            c32 = b2.fma(a3, c32);
        }
        store(c, ci, add, c00, c01, c02);
        store(c, ci + ldc, add, c10, c11, c12);
        store(c, ci + 2 * ldc, add, c20, c21, c22);
        store(c, ci + 3 * ldc, add, c30, c31, c32);
    }

    private static void store(float[] c, int ci, boolean add, FloatVector v0, FloatVector v1, FloatVector v2) {
        if (add) {
            v0 = v0.add(FloatVector.fromArray(S, c, ci));
            v1 = v1.add(FloatVector.fromArray(S, c, ci + L));
            v2 = v2.add(FloatVector.fromArray(S, c, ci + 2 * L));
        }
        v0.intoArray(c, ci);
        v1.intoArray(c, ci + L);
        v2.intoArray(c, ci + 2 * L);
    }
}
