package dev.taco.kernels;

/**
 * The SIMT view of one GPU thread, in the TornadoVM style (docs/design.md §5, §8): a kernel that takes a
 * {@code KernelContext} as its first parameter runs once per thread of a one-dimensional grid of blocks
 * ("groups"), and reads its ids from the fields below.
 *
 * <p>Mapping to CUDA (CUDA C++ Programming Guide, "Built-in Variables" and "Warp Shuffle Functions"):
 * <ul>
 *   <li>{@link #localIdx} = {@code threadIdx.x}, {@link #groupIdx} = {@code blockIdx.x},
 *       {@link #localGroupSize} = {@code blockDim.x}, {@link #globalGroupSize} = {@code gridDim.x * blockDim.x},
 *       {@link #globalIdx} = {@code blockIdx.x * blockDim.x + threadIdx.x};
 *   <li>{@link #barrier()} = {@code __syncthreads()} (every thread of the block must reach it);
 *   <li>{@link #allocateFloatLocalArray}/{@link #allocateIntLocalArray} = a {@code __shared__} array of the block
 *       (the size must be a compile-time constant; call it once, at the top level of the kernel);
 *   <li>{@link #shflXor} = {@code __shfl_xor_sync(0xffffffff, v, laneMask)}: all 32 lanes of the warp must call it
 *       (the block size must be a multiple of 32 and control flow must not diverge inside a warp);
 *   <li>{@link #warpReduceSum}/{@link #warpReduceMax}: a butterfly over lane masks 16, 8, 4, 2, 1
 *       ({@code v = v + shflXor(v, m)}, resp. {@code Math.max}); every lane gets the same, bit-identical result;
 *   <li>{@link #mmaBf16} = the tensor-core instruction {@code mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32}
 *       (PTX ISA, "Warp-level matrix multiply-accumulate", fragment layouts for {@code .m16n8k16} with {@code .bf16}),
 *       sm_80 and later: all 32 lanes must call it;
 *   <li>{@link #ldmatrixX4}/{@link #ldmatrixX4Trans} = {@code ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16}
 *       (PTX ISA, "Warp-level matrix load instruction: ldmatrix"), sm_75 and later: four 8×8 bf16 matrices from shared
 *       memory into the fragment registers {@link #mmaBf16} takes, all 32 lanes calling;
 *   <li>{@link #cpAsync16}, {@link #cpAsyncCommit}, {@link #cpAsyncWait} = {@code cp.async.cg.shared.global} of 16
 *       bytes, {@code cp.async.commit_group}, {@code cp.async.wait_group N} (PTX ISA, "Data Movement and Conversion
 *       Instructions: cp.async"), sm_80 and later (a plain copy before): a global-to-shared copy the thread does not
 *       wait for until it asks to.
 * </ul>
 *
 * <p>On the JVM the exact emulator {@code dev.taco.kernels.cpu.SimtEmulator} supplies the implementation.
 */
public abstract class KernelContext {
  /** Number of lanes in a warp (CUDA: {@code warpSize}, 32 on every NVIDIA GPU so far). */
  public static final int WARP_SIZE = 32;

  /** Global thread index in x: {@code groupIdx * localGroupSize + localIdx}. */
  public final int globalIdx;
  /** Thread index within its block (group). */
  public final int localIdx;
  /** Block (group) index. */
  public final int groupIdx;
  /** Threads per block. */
  public final int localGroupSize;
  /** Threads in the whole grid. */
  public final int globalGroupSize;

  /** For implementations (the emulator). */
  protected KernelContext(int localIdx, int groupIdx, int localGroupSize, int numGroups) {
    this.localIdx = localIdx;
    this.groupIdx = groupIdx;
    this.localGroupSize = localGroupSize;
    this.globalGroupSize = localGroupSize * numGroups;
    this.globalIdx = groupIdx * localGroupSize + localIdx;
  }

  /** Lane of this thread in its warp, {@code localIdx % 32}. */
  public final int laneId() {
    return localIdx & (WARP_SIZE - 1);
  }

  /** Block-wide barrier: returns when every thread of the block has called it; shared-array writes before it are visible after it. */
  public abstract void barrier();

  /**
   * The block's shared float array of {@code n} elements, uninitialised as on the GPU: write before reading (the
   * emulator, {@link dev.taco.kernels.cpu.SimtEmulator}, fills it with NaN so that a read before any write fails a
   * test).
   */
  public abstract float[] allocateFloatLocalArray(int n);

  /**
   * The block's shared int array of {@code n} elements, uninitialised (the emulator fills it with
   * {@link dev.taco.kernels.cpu.SimtEmulator#GARBAGE}; see {@link #allocateFloatLocalArray}).
   */
  public abstract int[] allocateIntLocalArray(int n);

  /** The value of {@code v} held by lane {@code laneId() ^ laneMask} of this warp (all 32 lanes must call). */
  public abstract float shflXor(float v, int laneMask);

  /** The value of {@code v} held by lane {@code laneId() ^ laneMask} of this warp (all 32 lanes must call). */
  public abstract int shflXor(int v, int laneMask);

  /**
   * Warp-collective matrix multiply-accumulate on tensor cores: {@code D = A·B + C} with A a 16×16 and B a 16×8 bf16
   * matrix and C, D 16×8 float32 matrices, each spread over the 32 lanes of the warp in the fragment layout of PTX's
   * {@code mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32}. With {@code g = laneId() / 4} and
   * {@code t = laneId() % 4}, each int holds two bf16 values ({@link Bf16#encode2}: the lower-indexed one in the low
   * 16 bits):
   * <ul>
   *   <li>{@code a0} = A[g][2t, 2t+1], {@code a1} = A[g+8][2t, 2t+1], {@code a2} = A[g][2t+8, 2t+9],
   *       {@code a3} = A[g+8][2t+8, 2t+9];
   *   <li>{@code b0} = B[2t, 2t+1][g] (two rows of column g), {@code b1} = B[2t+8, 2t+9][g];
   *   <li>{@code acc[accOff .. accOff+3]} = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1] on entry, D's same
   *       elements on return.
   * </ul>
   * The products of bf16 values are exact in float32; the hardware's order and internal precision of the sums are not
   * specified (the emulator adds the 16 products and C in float64 and rounds once), so results may differ from a
   * float32 reference by rounding. {@code acc} must be a fixed-size local array indexed by constants after unrolling
   * (so that it lives in registers). All 32 lanes of the warp must call it with converged control flow.
   *
   * @param acc the accumulator array of this lane (4 elements from {@code accOff})
   */
  public abstract void mmaBf16(float[] acc, int accOff, int a0, int a1, int a2, int a3, int b0, int b1);

  /**
   * Warp-collective load of four 8×8 matrices of bf16 pairs from a shared array: lane {@code 8i + r} gives in
   * {@code row} the index in {@code shared} of row {@code r} of matrix {@code i} (8 bf16 values = 4 ints, starting
   * 16-byte aligned: {@code row % 4 == 0}); with {@code g = laneId() / 4}, {@code t = laneId() % 4},
   * {@code frag[fragOff + i]} receives row {@code g}, values {@code 2t, 2t+1} of matrix {@code i} (the int
   * {@code shared[rowOf(8i + g) + t]}). With the rows of a row-major 16×16 A tile given as matrices (rows 0-7, cols
   * 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15), the four ints are {@link #mmaBf16}'s {@code a0..a3}. All 32 lanes
   * must call it with the same shared array ({@link #allocateIntLocalArray}).
   *
   * @param frag this lane's fragment registers (a fixed-size local array indexed by constants after unrolling)
   */
  public abstract void ldmatrixX4(int[] frag, int fragOff, int[] shared, int row);

  /**
   * {@link #ldmatrixX4} with each matrix transposed: {@code frag[fragOff + i]} holds values {@code (2t, g)} (low half)
   * and {@code (2t+1, g)} (high half) of matrix {@code i}, i.e. column {@code g} of rows {@code 2t, 2t+1}. With the
   * rows of a row-major 16×8 B tile (k by n) given as matrices (k 0-7), (k 8-15), the first two ints are
   * {@link #mmaBf16}'s {@code b0, b1}; a 16×16 B tile gives those of two products in one call.
   */
  public abstract void ldmatrixX4Trans(int[] frag, int fragOff, int[] shared, int row);

  /**
   * Starts copying 16 bytes, {@code global[src .. src + 8)} (bf16 values, two to an int, the lower-indexed in the low
   * half), into {@code shared[dst .. dst + 4)}; the shared ints hold them only after a {@link #cpAsyncWait} that
   * covers the copy's group (and, for other threads' copies, a {@link #barrier()} after it). {@code dst % 4 == 0},
   * {@code src % 8 == 0} (16-byte aligned); {@code shared} must be a shared array.
   */
  public abstract void cpAsync16(int[] shared, int dst, short[] global, int src);

  /** {@link #cpAsync16(int[], int, short[], int)} of four ints: {@code src % 4 == 0}. */
  public abstract void cpAsync16(int[] shared, int dst, int[] global, int src);

  /** {@link #cpAsync16(int[], int, short[], int)} of four floats: {@code dst % 4 == 0}, {@code src % 4 == 0}. */
  public abstract void cpAsync16(float[] shared, int dst, float[] global, int src);

  /**
   * Closes this thread's copies started since the last commit into one group: the unit {@link #cpAsyncWait} waits for.
   */
  public abstract void cpAsyncCommit();

  /**
   * Waits until at most {@code pendingGroups} of this thread's committed groups are still in flight (the most recent
   * ones): {@code 0} waits for all. {@code pendingGroups} must be a compile-time constant (a literal, a constant field
   * or a {@code @Constant} parameter): PTX takes it as an immediate.
   */
  public abstract void cpAsyncWait(int pendingGroups);

  /** Sum of {@code v} over the warp, by the butterfly described in the class comment (same bits in every lane). */
  public final float warpReduceSum(float v) {
    for (int m = WARP_SIZE / 2; m > 0; m >>= 1) {
      v = v + shflXor(v, m);
    }
    return v;
  }

  /** {@link Math#max(float, float)} of {@code v} over the warp, by the butterfly of the class comment. */
  public final float warpReduceMax(float v) {
    for (int m = WARP_SIZE / 2; m > 0; m >>= 1) {
      v = Math.max(v, shflXor(v, m));
    }
    return v;
  }
}
