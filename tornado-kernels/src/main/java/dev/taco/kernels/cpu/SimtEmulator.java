package dev.taco.kernels.cpu;

import dev.taco.kernels.KernelContext;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Exact JVM emulator for SIMT kernels ({@link KernelContext} kernels, docs/design.md §5). Slow and meant for tests.
 *
 * <p>Blocks run one at a time, in a shuffled order of {@code groupIdx} (fixed for a grid size), since a GPU runs them in
 * any order: a block that reads what a lower-numbered block wrote is wrong on the GPU, and here too. Within a block,
 * every GPU thread is one Java virtual thread. {@link KernelContext#barrier()} is a {@link CyclicBarrier} over the
 * block; a warp shuffle writes the lane's value into the warp's exchange slots, waits on the warp's barrier, reads the
 * partner's slot and waits again (so the next shuffle cannot overwrite a slot still being read). Shared arrays are per
 * block: the k-th allocation call of every thread returns the block's k-th array (as {@code __shared__}
 * declarations do), and holds garbage at first as on the GPU: float arrays NaN, int arrays {@link #GARBAGE}, so a
 * kernel that reads an element before any thread wrote it fails its test. Values cross threads as raw bits, so NaN
 * payloads survive as on the GPU. A tensor-core
 * {@link KernelContext#mmaBf16} gathers the warp's fragments the same way (write, wait, read every lane's, wait) and
 * computes this lane's four outputs from them, each as the 16 exact products and C added in float64 and rounded once.
 * {@link KernelContext#ldmatrixX4} gathers the warp's row indices the same way and checks that every lane names the
 * same shared array and 16-byte aligned rows. {@link KernelContext#cpAsync16} copies nothing until the thread's
 * {@link KernelContext#cpAsyncWait} covers its group (a copy never waited for never lands), so a kernel that reads a
 * copy's destination too early reads garbage here, as it may on the GPU.
 *
 * <p>What is exact: everything the kernel computes with Java arithmetic, in any interleaving allowed by the
 * barriers. What is not modelled: data races (a kernel that reads shared memory written by another thread
 * without a barrier in between sees <em>some</em> interleaving here, undefined on the GPU), and divergent
 * barriers or shuffles, which here end with an {@link IllegalStateException} after a timeout instead of hanging; a
 * thread that returns while others of its block wait at {@link KernelContext#barrier()} (or one that calls it after
 * another returned: {@code if (i >= n) return;} before a barrier) fails at once, naming both.
 */
public final class SimtEmulator {
  private SimtEmulator() {}

  /** A SIMT kernel invocation with its arguments bound, e.g. {@code ctx -> MyKernels.reduce(ctx, x, out, n)}. */
  @FunctionalInterface
  public interface SimtKernel {
    /** Runs the kernel body for one GPU thread. */
    void run(KernelContext ctx);
  }

  /** What an int shared array holds before a thread writes it (a GPU's is whatever the memory held). */
  public static final int GARBAGE = 0x7BADBEEF;

  /** A barrier or shuffle that not all threads reach fails after this long. */
  private static final long TIMEOUT_S = 60;

  /**
   * Runs {@code kernel} over {@code numGroups} blocks of {@code localGroupSize} threads.
   *
   * @throws IllegalArgumentException if a size is not positive
   * @throws RuntimeException the first exception a GPU thread threw (others are suppressed into it), or an
   *     {@link IllegalStateException} for a barrier or shuffle not reached by all threads
   */
  public static void launch(int numGroups, int localGroupSize, SimtKernel kernel) {
    if (numGroups <= 0 || localGroupSize <= 0) {
      throw new IllegalArgumentException("grid " + numGroups + " x " + localGroupSize);
    }
    List<Integer> order = new ArrayList<>(java.util.stream.IntStream.range(0, numGroups).boxed().toList());
    java.util.Collections.shuffle(order, new java.util.Random(numGroups));
    for (int g : order) {
      runBlock(new Block(localGroupSize), g, numGroups, kernel);
    }
  }

  private static void runBlock(Block block, int groupIdx, int numGroups, SimtKernel kernel) {
    List<Thread> threads = new ArrayList<>(block.size);
    RuntimeException[] failure = new RuntimeException[1];
    for (int t = 0; t < block.size; t++) {
      Context ctx = new Context(block, t, groupIdx, numGroups);
      threads.add(Thread.ofVirtual().start(() -> {
        try {
          kernel.run(ctx);
          block.exited(ctx);
        } catch (RuntimeException | Error e) {
          synchronized (failure) {
            RuntimeException r = e instanceof RuntimeException re ? re : new RuntimeException(e);
            if (failure[0] == null) {
              failure[0] = r;
            } else if (!(e instanceof BrokenBarrier)) {
              failure[0].addSuppressed(r);
            }
          }
          block.breakAll();
        }
      }));
    }
    for (Thread t : threads) {
      try {
        t.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted", e);
      }
    }
    if (failure[0] != null) {
      throw failure[0];
    }
  }

  /** Thrown in the threads that were waiting when another thread failed. */
  private static final class BrokenBarrier extends IllegalStateException {
    BrokenBarrier(String what) {
      super(what + ": another thread of the block failed or did not arrive");
    }
  }

  /** State shared by the threads of one block. */
  private static final class Block {
    final int size;
    final CyclicBarrier barrier;
    final CyclicBarrier[] warpBarriers;
    final int[][] warpSlots;
    /** Per warp, per lane: the six fragment registers of an {@code mmaBf16} (a0..a3, b0, b1). */
    final int[][] mmaSlots;
    /** Per warp, per lane: the shared array an {@code ldmatrix} reads (its row index goes in {@link #warpSlots}). */
    final Object[][] matrixSlots;
    final List<Object> shared = new ArrayList<>();
    private static final String EVERY_THREAD = "every thread must reach every barrier (no return before one; on a GPU this hangs or corrupts)";
    /** The first thread of the block that returned, or -1. */
    private int firstExited = -1;

    Block(int size) {
      this.size = size;
      this.barrier = new CyclicBarrier(size);
      int warps = (size + KernelContext.WARP_SIZE - 1) / KernelContext.WARP_SIZE;
      warpBarriers = new CyclicBarrier[warps];
      warpSlots = new int[warps][KernelContext.WARP_SIZE];
      mmaSlots = new int[warps][6 * KernelContext.WARP_SIZE];
      matrixSlots = new Object[warps][KernelContext.WARP_SIZE];
      for (int w = 0; w < warps; w++) {
        warpBarriers[w] = new CyclicBarrier(Math.min(KernelContext.WARP_SIZE, size - w * KernelContext.WARP_SIZE));
      }
    }

    /** Set when a thread of the block failed: later barriers and shuffles fail at once instead of waiting. */
    volatile boolean failed;

    void breakAll() {
      failed = true;
      barrier.reset();
      for (CyclicBarrier b : warpBarriers) {
        b.reset();
      }
    }

    /**
     * Records that {@code ctx}'s thread returned.
     *
     * @throws IllegalStateException if others wait at the block's barrier, which it will never reach
     */
    synchronized void exited(KernelContext ctx) {
      if (firstExited < 0) firstExited = ctx.localIdx;
      if (barrier.getNumberWaiting() > 0) {
        throw new IllegalStateException("thread " + ctx.localIdx + " of block " + ctx.groupIdx + " returned while "
            + barrier.getNumberWaiting() + " thread(s) of the block wait at barrier(): " + EVERY_THREAD);
      }
    }

    /**
     * Before {@code ctx} waits at the block's barrier.
     *
     * @throws IllegalStateException if a thread of the block has returned (it will never arrive)
     */
    synchronized void arriving(KernelContext ctx) {
      if (firstExited >= 0) {
        throw new IllegalStateException("thread " + ctx.localIdx + " of block " + ctx.groupIdx + " calls barrier()"
            + " after thread " + firstExited + " of the block returned: " + EVERY_THREAD);
      }
    }

    /** Whether {@code a} is one of this block's shared arrays. */
    synchronized boolean isShared(Object a) {
      for (Object o : shared) if (o == a) return true;
      return false;
    }

    synchronized Object shared(int index, Object fresh) {
      if (index < shared.size()) {
        return shared.get(index);
      }
      shared.add(fresh);
      return fresh;
    }
  }

  /** One emulated GPU thread. */
  private static final class Context extends KernelContext {
    private final Block block;
    private int allocations;
    /** This thread's {@code cp.async} copies: committed groups, oldest first, then the open one. */
    private final java.util.ArrayDeque<List<Runnable>> committed = new java.util.ArrayDeque<>();
    private List<Runnable> open = new ArrayList<>();

    Context(Block block, int localIdx, int groupIdx, int numGroups) {
      super(localIdx, groupIdx, block.size, numGroups);
      this.block = block;
    }

    @Override
    public void barrier() {
      block.arriving(this);
      await(block, block.barrier, "barrier()");
    }

    @Override
    public float[] allocateFloatLocalArray(int n) {
      float[] fresh = new float[n];
      java.util.Arrays.fill(fresh, Float.NaN);
      return (float[]) block.shared(allocations++, fresh);
    }

    @Override
    public int[] allocateIntLocalArray(int n) {
      int[] fresh = new int[n];
      java.util.Arrays.fill(fresh, GARBAGE);
      return (int[]) block.shared(allocations++, fresh);
    }

    @Override
    public float shflXor(float v, int laneMask) {
      return Float.intBitsToFloat(shflXor(Float.floatToRawIntBits(v), laneMask));
    }

    @Override
    public int shflXor(int v, int laneMask) {
      int warp = localIdx / WARP_SIZE;
      int[] slots = block.warpSlots[warp];
      int partner = (laneId() ^ laneMask) & (WARP_SIZE - 1);
      slots[laneId()] = v;
      await(block, block.warpBarriers[warp], "shflXor");
      if (warp * WARP_SIZE + partner >= block.size) {
        throw new IllegalStateException("shflXor: lane " + partner + " is outside the block of " + block.size);
      }
      int r = slots[partner];
      await(block, block.warpBarriers[warp], "shflXor");
      return r;
    }

    @Override
    public void mmaBf16(float[] acc, int accOff, int a0, int a1, int a2, int a3, int b0, int b1) {
      int warp = localIdx / WARP_SIZE;
      if (warp * WARP_SIZE + WARP_SIZE > block.size) {
        throw new IllegalStateException("mmaBf16 needs a whole warp; the block of " + block.size + " threads has none");
      }
      int[] f = block.mmaSlots[warp];
      int lane = laneId();
      f[6 * lane] = a0;
      f[6 * lane + 1] = a1;
      f[6 * lane + 2] = a2;
      f[6 * lane + 3] = a3;
      f[6 * lane + 4] = b0;
      f[6 * lane + 5] = b1;
      await(block, block.warpBarriers[warp], "mmaBf16");
      int g = lane >> 2, t = lane & 3;
      float[] d = new float[4];
      for (int e = 0; e < 4; e++) {
        int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
        double sum = acc[accOff + e];
        for (int k = 0; k < 16; k++) {
          sum += (double) mmaA(f, row, k) * mmaB(f, k, col);
        }
        d[e] = (float) sum;
      }
      await(block, block.warpBarriers[warp], "mmaBf16");
      System.arraycopy(d, 0, acc, accOff, 4);
    }

    @Override
    public void ldmatrixX4(int[] frag, int fragOff, int[] shared, int row) {
      ldmatrix(frag, fragOff, shared, row, false);
    }

    @Override
    public void ldmatrixX4Trans(int[] frag, int fragOff, int[] shared, int row) {
      ldmatrix(frag, fragOff, shared, row, true);
    }

    private void ldmatrix(int[] frag, int fragOff, int[] shared, int row, boolean trans) {
      String what = trans ? "ldmatrixX4Trans" : "ldmatrixX4";
      int warp = localIdx / WARP_SIZE;
      if (warp * WARP_SIZE + WARP_SIZE > block.size) {
        throw new IllegalStateException(what + " needs a whole warp; the block of " + block.size + " threads has none");
      }
      int lane = laneId();
      int[] rows = block.warpSlots[warp];
      Object[] arrays = block.matrixSlots[warp];
      rows[lane] = row;
      arrays[lane] = shared;
      await(block, block.warpBarriers[warp], what);
      for (int l = 0; l < WARP_SIZE; l++) {
        if (arrays[l] != shared) {
          throw new IllegalStateException(what + ": lanes " + lane + " and " + l + " name different arrays");
        }
        if (rows[l] % 4 != 0 || rows[l] < 0 || rows[l] + 4 > shared.length) {
          throw new IllegalStateException(what + ": lane " + l + "'s row at int " + rows[l] + " is not 16-byte aligned"
              + " inside the shared array of " + shared.length + " ints");
        }
      }
      if (!block.isShared(shared)) {
        throw new IllegalStateException(
            what + " reads shared memory: the array is not one of the block's shared arrays");
      }
      int g = lane >> 2, t = lane & 3;
      int[] got = new int[4];
      for (int i = 0; i < 4; i++) {
        if (!trans) {
          got[i] = shared[rows[8 * i + g] + t];
        } else { // column g of rows 2t and 2t+1: value g of a row is half g % 2 of its int g / 2
          int lo = shared[rows[8 * i + 2 * t] + g / 2], hi = shared[rows[8 * i + 2 * t + 1] + g / 2];
          got[i] = (g & 1) == 0 ? (lo & 0xFFFF) | (hi << 16) : (lo >>> 16) | (hi & 0xFFFF0000);
        }
      }
      await(block, block.warpBarriers[warp], what);
      System.arraycopy(got, 0, frag, fragOff, 4);
    }

    @Override
    public void cpAsync16(int[] shared, int dst, short[] global, int src) {
      checkCopy(shared, dst, src % 8 == 0, src);
      int[] v = new int[4];
      open.add(() -> {
        for (int i = 0; i < 4; i++) v[i] = global[src + 2 * i] & 0xFFFF | global[src + 2 * i + 1] << 16;
        System.arraycopy(v, 0, shared, dst, 4);
      });
    }

    @Override
    public void cpAsync16(int[] shared, int dst, int[] global, int src) {
      checkCopy(shared, dst, src % 4 == 0, src);
      open.add(() -> System.arraycopy(global, src, shared, dst, 4));
    }

    @Override
    public void cpAsync16(float[] shared, int dst, float[] global, int src) {
      checkCopy(shared, dst, src % 4 == 0, src);
      open.add(() -> System.arraycopy(global, src, shared, dst, 4));
    }

    private void checkCopy(Object shared, int dst, boolean srcAligned, int src) {
      if (dst % 4 != 0 || !srcAligned) {
        throw new IllegalStateException(
            "cpAsync16: destination " + dst + " or source " + src + " is not 16-byte aligned");
      }
      if (!block.isShared(shared)) {
        throw new IllegalStateException("cpAsync16 writes shared memory: the destination is not one of the block's"
            + " shared arrays");
      }
    }

    @Override
    public void cpAsyncCommit() {
      committed.addLast(open);
      open = new ArrayList<>();
    }

    @Override
    public void cpAsyncWait(int pendingGroups) {
      if (pendingGroups < 0) throw new IllegalStateException("cpAsyncWait(" + pendingGroups + "): must be >= 0");
      while (committed.size() > pendingGroups) {
        for (Runnable copy : committed.removeFirst()) copy.run();
      }
    }

    /** A[row][k] of an m16n8k16 product from the warp's fragments (see {@link KernelContext#mmaBf16}). */
    private static float mmaA(int[] f, int row, int k) {
      int lane = (row & 7) * 4 + (k & 7) / 2;
      int reg = (row >> 3) + 2 * (k >> 3); // a0: rows 0-7, k 0-7; a1: rows 8-15; a2: k 8-15; a3: both
      return half(f[6 * lane + reg], k & 1);
    }

    /** B[k][col] of an m16n8k16 product from the warp's fragments. */
    private static float mmaB(int[] f, int k, int col) {
      int lane = col * 4 + (k & 7) / 2;
      return half(f[6 * lane + 4 + (k >> 3)], k & 1);
    }

    /** The bf16 value in the low ({@code hi = 0}) or high half of a packed pair, as float. */
    private static float half(int packed, int hi) {
      return Float.intBitsToFloat((hi == 0 ? packed << 16 : packed & 0xffff0000));
    }

    private static void await(Block block, CyclicBarrier b, String what) {
      if (block.failed) {
        throw new BrokenBarrier(what); // arriving after the reset, it would wait for threads that are gone
      }
      try {
        b.await(TIMEOUT_S, TimeUnit.SECONDS);
      } catch (BrokenBarrierException e) {
        throw new BrokenBarrier(what);
      } catch (TimeoutException e) {
        b.reset();
        throw new IllegalStateException(what + " not reached by every thread within " + TIMEOUT_S + " s (divergent?)");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(what + " interrupted", e);
      }
    }
  }
}
