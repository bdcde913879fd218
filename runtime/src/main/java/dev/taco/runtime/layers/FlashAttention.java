package dev.taco.runtime.layers;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Constant;
import dev.taco.kernels.FastMath;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.Vec16;

/**
 * Causal self-attention without the (B,NH,T,T) score matrices, on tensor cores: the GPU's bf16 form of
 * {@link Attention} (Dao et al., "FlashAttention", NeurIPS 2022; Dao, "FlashAttention-2", 2023, Algorithms 1 and 2).
 * Each warp holds 16 rows of a head in registers and walks over the other side's tiles with
 * {@link KernelContext#mmaBf16} (m16n8k16, bf16 operands rounded from the fp32 activations as they are loaded, fp32
 * accumulation), keeping a running row maximum and sum (the online softmax), so the scores never reach memory. What the
 * backward keeps of the forward is the log-sum-exp of each score row, B·NH·T floats, instead of the probabilities.
 *
 * <p>Shapes as {@link Attention}: {@code qkv} (B,T,3·NH·HS) with all q heads, then all k heads, then all v heads in a
 * row; {@code out}, {@code dout} (B,T,NH·HS); {@code lse}, {@code dsum} (B,NH,T). The head size HS is a compile-time
 * constant of each kernel ({@link #supports}: a multiple of 16 up to 64, what the register budget holds: at HS = 64 the
 * dK/dV kernel keeps 128 accumulator and fragment registers a lane); any T (rows and keys past T are clamped on load and
 * masked). Blocks of {@link #WARPS} warps, {@link #BLOCK_ROWS} rows of one (b,h) each: the block's threads stage each
 * tile of the other side (bf16 pairs, by rows and transposed) in shared memory between two block barriers, from 16-byte
 * loads issued while the previous tile was being computed (the loads waited on one by one had made an earlier version
 * slower than the GEMM attention); every warp then reads its mma B fragments there, conflict-free by a padding of
 * {@link #PAD} ints a row. So every thread of a block reaches every barrier, also a warp whose rows lie past T.
 *
 * <p>Needs sm_80 or later (bf16 {@code mma.sync}); {@code CudaOps} keeps the GEMM form on older GPUs.
 * {@link #flashBackwardDot} forms dsum from dO rounded to bf16, the dO that dP = dO·Vᵀ multiplies, so that a row of
 * dS = P ∘ (dP − dsum) sums to zero up to P's and O's rounding (with the fp32 dO, an earlier version's dQ and dK were
 * off by about 1e-2 relative on a peaked softmax, about 3e-3 with this).
 *
 * <p>Three passes, each race-free (every output element has one writer):
 * <ol>
 *   <li>{@link #flashForward}: out and lse, per query rows; for each key tile S = Q·Kᵀ, the running maximum, P = exp(S·scale
 *       − max) (masked above the diagonal), O = O·exp(old max − new max) + P·V; at the end O / rowsum(P).
 *   <li>{@link #flashBackwardDot}: dsum = rowsum(dO ∘ O), the softmax backward's dot product.
 *   <li>{@link #flashBackwardKeyValue} (per key rows: dK, dV over the queries that see them) and
 *       {@link #flashBackwardQuery} (per query rows: dQ), each recomputing P = exp(S·scale − lse) and
 *       dS = P ∘ (dP − dsum), dP = dO·Vᵀ: two passes instead of FlashAttention-2's atomic dQ, at the cost of computing S
 *       and dP twice.
 * </ol>
 * The dqkv they write is overwritten, not accumulated ({@link dev.taco.runtime.model.Ops#attentionBackward}). The
 * numerics are bf16's: Q, K, V, dO and P, dS rounded to bf16 as they enter a product (PyTorch's flash attention under
 * bf16 autocast does the same); row statistics and accumulators stay fp32.
 */
public final class FlashAttention {
  private FlashAttention() {}

  /*
   * The tile sizes, measured on the H200 (bench target of 2026-12-02: the three kernels translated with each choice and
   * timed alone by CUDA events at B=8 NH=12 T=1024 HS=64, forward / dK,dV / dQ in us): 4 warps, 64 keys, tiles of 32:
   * 173 / 277 / 192; 8 warps, 64 keys: 214 / 276 / 173; 4 warps, tiles of 64: 170 / 254 / 194; 8 warps, 128 keys, tiles
   * of 64 (these): 164 / 249 / 169, and at T=2048 (B=4 NH=16) 351 / 523 / 374 against 389 / 619 / 444. Eight warps share
   * each staged tile (half the staging per product) and hold half the staging registers each; 128 keys halve the
   * forward's barriers and rescales per key.
   */
  /** Warps per block. */
  public static final int WARPS = 8;
  /** Rows a warp owns: the M of the m16n8k16 product. */
  public static final int ROWS = 16;
  /** Rows (queries, or keys in {@link #flashBackwardKeyValue}) a block owns. */
  public static final int BLOCK_ROWS = WARPS * ROWS;
  /**
   * Keys per step of {@link #flashForward}: a multiple of {@link #ROWS} that divides {@link #BLOCK_ROWS} or is a
   * multiple of it, so that a warp's key tiles all start at or before its first row.
   */
  public static final int KEYS = 128;
  /** Keys (queries) per step of {@link #flashBackwardQuery} ({@link #flashBackwardKeyValue}). */
  public static final int TILE = 64;

  /** Whether the kernels are compiled for head size {@code HS}: a multiple of 16, at most 64. */
  public static boolean supports(int HS) {
    return HS > 0 && HS % 16 == 0 && HS <= 64;
  }

  /** The grid of the three tiled kernels: a block per {@link #BLOCK_ROWS} rows of each (b,h). */
  public static int blocks(int B, int NH, int T) {
    return B * NH * ((T + BLOCK_ROWS - 1) / BLOCK_ROWS);
  }

  /**
   * SIMT kernel: out(B,T,NH·HS), its bf16 copy {@code outCopy} (the operand of the projection that follows) and
   * lse(B,NH,T) (the natural log of each causal score row's sum of exp(scale·q·k)), from qkv's bf16 copy. Grid
   * {@link #blocks}, {@value #THREADS} threads; block i takes head i / tiles and, of its query tiles, the last ones
   * first (they have the most keys). Each key tile is staged in shared memory as bf16 pairs, K by
   * rows and V transposed, from registers loaded while the previous tile was being computed. No checks.
   */
  @Kernel
  public static void flashForward(KernelContext ctx, float[] out, int outOff, short[] outCopy, int outCopyOff,
      float[] lse, int lseOff, short[] qkv, int qkvOff, int B, int T, int NH, @Constant int HS, float scale) {
    int[] sk = ctx.allocateIntLocalArray(KEYS * (HS / 2 + PAD)); // key r's pair p at r·(HS/2+PAD) + p
    int[] svt = ctx.allocateIntLocalArray(HS * (KEYS / 2 + PAD)); // dim d's key pair kp at d·(KEYS/2+PAD) + kp
    int tiles = (T + BLOCK_ROWS - 1) / BLOCK_ROWS;
    int bh = ctx.groupIdx / tiles;
    int blockRow = (tiles - 1 - ctx.groupIdx % tiles) * BLOCK_ROWS;
    int q0 = blockRow + (ctx.localIdx >> 5) * ROWS;
    int lane = ctx.laneId();
    int g = lane >> 2; // the fragment's row (and B's column) of this lane
    int t = lane & 3; // its column pair (and B's row pair)
    int c = 2 * t;
    int D = NH * HS;
    int C3 = 3 * D;
    int base = qkvOff + bh / NH * T * C3 + bh % NH * HS; // head h's q at token 0; its k at +D, its v at +2D
    int rA = q0 + g; // this lane's two query rows
    int rB = rA + 8;
    int[] qf = new int[HS / 4];
    int qA = base + Math.min(rA, T - 1) * C3 + c;
    int qB = base + Math.min(rB, T - 1) * C3 + c;
    for (int u = 0; u < HS / 16; u++) {
      rowFragment(qf, 4 * u, qkv, qA + 16 * u, qB + 16 * u);
    }
    float sl2 = scale * LOG2E; // scores in base-2 units: exp(x·scale) = 2^(x·scale·log2 e)
    float[] o = new float[HS / 2];
    float[] s = new float[KEYS / 2];
    float mA = Float.NEGATIVE_INFINITY;
    float mB = Float.NEGATIVE_INFINITY;
    float lA = 0f;
    float lB = 0f;
    int rs = HS / 2 + PAD;
    int cs = KEYS / 2 + PAD;
    // staging: item i = (key pair i % 32, column chunk i / 32): rows 2kp and 2kp+1 of K and of V, 8 columns each
    int[] next = new int[16 * ((KEYS / 2 * (HS / 8) + THREADS - 1) / THREADS)];
    loadTile(ctx, qkv, base + D, C3, qkv, base + 2 * D, C3, 0, T, KEYS / 2, HS, next);
    int kEnd = Math.min(T, blockRow + BLOCK_ROWS);
    for (int k0 = 0; k0 < kEnd; k0 += KEYS) {
      ctx.barrier(); // every warp has read the previous tile
      for (int k = 0; k < (KEYS / 2 * (HS / 8) + THREADS - 1) / THREADS; k++) {
        int item = ctx.localIdx + k * THREADS;
        if (item < KEYS / 2 * (HS / 8)) {
          storeRows(sk, 2 * (item % (KEYS / 2)), rs, item / (KEYS / 2), next, 16 * k);
          storeColumns(svt, item % (KEYS / 2), cs, item / (KEYS / 2), next, 16 * k + 8);
        }
      }
      ctx.barrier();
      if (k0 + KEYS < kEnd) { // the next tile's loads fly while this one is computed
        loadTile(ctx, qkv, base + D, C3, qkv, base + 2 * D, C3, k0 + KEYS, T, KEYS / 2, HS, next);
      }
      if (q0 < T) { // whole warps (a warp past T only stages); k0 <= blockRow <= every row: no tile is all masked
        for (int i = 0; i < KEYS / 2; i++) {
          s[i] = 0f;
        }
        for (int j = 0; j < KEYS / 8; j++) { // S = Q·Kᵀ, n-tile j: keys k0+8j .. k0+8j+7
          int kr = (8 * j + g) * rs + t;
          for (int u = 0; u < HS / 16; u++) {
            ctx.mmaBf16(s, 4 * j, qf[4 * u], qf[4 * u + 1], qf[4 * u + 2], qf[4 * u + 3], sk[kr + 8 * u],
                sk[kr + 8 * u + 4]);
          }
        }
        for (int i = 0; i < KEYS / 2; i++) {
          s[i] = s[i] * sl2;
        }
        if (k0 + KEYS > q0) { // the diagonal tile: keys past the row are masked
          for (int j = 0; j < KEYS / 8; j++) {
            int key = k0 + 8 * j + c;
            s[4 * j] = key > rA ? Float.NEGATIVE_INFINITY : s[4 * j];
            s[4 * j + 1] = key + 1 > rA ? Float.NEGATIVE_INFINITY : s[4 * j + 1];
            s[4 * j + 2] = key > rB ? Float.NEGATIVE_INFINITY : s[4 * j + 2];
            s[4 * j + 3] = key + 1 > rB ? Float.NEGATIVE_INFINITY : s[4 * j + 3];
          }
        }
        float xA = mA;
        float xB = mB;
        for (int j = 0; j < KEYS / 8; j++) { // row maxima (NaN scores propagate through the exponentials instead)
          xA = max(xA, max(s[4 * j], s[4 * j + 1]));
          xB = max(xB, max(s[4 * j + 2], s[4 * j + 3]));
        }
        xA = max(xA, ctx.shflXor(xA, 1)); // a row's four lanes: 4g .. 4g+3
        xA = max(xA, ctx.shflXor(xA, 2));
        xB = max(xB, ctx.shflXor(xB, 1));
        xB = max(xB, ctx.shflXor(xB, 2));
        // key k0 <= every row is unmasked in every tile, so xA and xB are finite; the first tile's factors are
        // 2^(-inf) = 0
        float fA = FastMath.exp2(mA - xA);
        float fB = FastMath.exp2(mB - xB);
        mA = xA;
        mB = xB;
        lA = lA * fA;
        lB = lB * fB;
        for (int j = 0; j < HS / 8; j++) {
          o[4 * j] = o[4 * j] * fA;
          o[4 * j + 1] = o[4 * j + 1] * fA;
          o[4 * j + 2] = o[4 * j + 2] * fB;
          o[4 * j + 3] = o[4 * j + 3] * fB;
        }
        for (int j = 0; j < KEYS / 8; j++) { // P = 2^(S - max), in place; this lane's share of the row sums
          s[4 * j] = FastMath.exp2(s[4 * j] - mA);
          s[4 * j + 1] = FastMath.exp2(s[4 * j + 1] - mA);
          s[4 * j + 2] = FastMath.exp2(s[4 * j + 2] - mB);
          s[4 * j + 3] = FastMath.exp2(s[4 * j + 3] - mB);
          lA += s[4 * j] + s[4 * j + 1];
          lB += s[4 * j + 2] + s[4 * j + 3];
        }
        for (int u = 0; u < KEYS / 16; u++) { // O += P·V, k-step u: keys k0+16u .. k0+16u+15
          int a0 = Bf16.encode2(s[8 * u], s[8 * u + 1]); // the C fragments of n-tiles 2u, 2u+1 are P's A fragment
          int a1 = Bf16.encode2(s[8 * u + 2], s[8 * u + 3]);
          int a2 = Bf16.encode2(s[8 * u + 4], s[8 * u + 5]);
          int a3 = Bf16.encode2(s[8 * u + 6], s[8 * u + 7]);
          for (int j = 0; j < HS / 8; j++) {
            int vr = (8 * j + g) * cs + 8 * u + t;
            ctx.mmaBf16(o, 4 * j, a0, a1, a2, a3, svt[vr], svt[vr + 4]);
          }
        }
      }
    }
    lA += ctx.shflXor(lA, 1);
    lA += ctx.shflXor(lA, 2);
    lB += ctx.shflXor(lB, 1);
    lB += ctx.shflXor(lB, 2);
    float iA = 1f / lA; // >= 1: the maximum contributes 2^0
    float iB = 1f / lB;
    int oA = (bh / NH * T + rA) * D + bh % NH * HS + c; // from outOff and outCopyOff
    int oB = oA + 8 * D;
    for (int j = 0; j < HS / 8; j++) {
      if (rA < T) {
        storePair(1, out, outOff + oA + 8 * j, outCopy, outCopyOff + oA + 8 * j, o[4 * j] * iA,
            o[4 * j + 1] * iA);
      }
      if (rB < T) {
        storePair(1, out, outOff + oB + 8 * j, outCopy, outCopyOff + oB + 8 * j, o[4 * j + 2] * iB,
            o[4 * j + 3] * iB);
      }
    }
    if (t == 0) { // lse = ln(sum of e^(score·scale)) = (max + log2 l) · ln 2
      if (rA < T) {
        lse[lseOff + bh * T + rA] = mA * LN2 + (float) Math.log(lA);
      }
      if (rB < T) {
        lse[lseOff + bh * T + rB] = mB * LN2 + (float) Math.log(lB);
      }
    }
  }

  /**
   * SIMT kernel: dsum(B,NH,T) = the row sums of dO ∘ O per head (the softmax backward's rowsum(P ∘ dP), FlashAttention-2
   * Algorithm 2 line 4), dO rounded to bf16 as the other two backward kernels read it ({@link Bf16#encode2}), O and the
   * sum fp32; that bf16 dO is written to {@code doutCopy} (B,T,NH·HS) as well, the copy those kernels read. One warp per
   * row (b,h,t), a lane per pair of columns; blocks of whole warps; HS even. No checks.
   */
  @Kernel
  public static void flashBackwardDot(KernelContext ctx, float[] dsum, int dsumOff, short[] doutCopy, int doutCopyOff,
      float[] dout, int doutOff, float[] out, int outOff, int B, int T, int NH, int HS) {
    int i = ctx.globalIdx / KernelContext.WARP_SIZE;
    if (i >= B * NH * T) {
      return; // whole warps leave together
    }
    int t = i % T;
    int bh = i / T;
    int row = (bh / NH * T + t) * NH * HS + bh % NH * HS;
    float sum = 0f;
    for (int d = 2 * ctx.laneId(); d < HS; d += 2 * KernelContext.WARP_SIZE) {
      int pair = Bf16.encode2(dout[doutOff + row + d], dout[doutOff + row + d + 1]);
      Vec16.storeShortPair(doutCopy, doutCopyOff + row + d, pair);
      sum += Bf16.decode((short) pair) * out[outOff + row + d]; // dO as dP sees it
      sum += Bf16.decode((short) (pair >>> 16)) * out[outOff + row + d + 1];
    }
    sum = ctx.warpReduceSum(sum);
    if (ctx.laneId() == 0) {
      dsum[dsumOff + i] = sum;
    }
  }

  /**
   * SIMT kernel: dK and dV of head (b,h), per key rows (a warp's 16 keys against every query that sees them, in tiles
   * of {@value #TILE}): Sᵀ = K·Qᵀ, Pᵀ = exp(Sᵀ·scale − lse) (0 where query &lt; key), dPᵀ = V·dOᵀ,
   * dSᵀ = Pᵀ ∘ (dPᵀ − dsum), dV = Pᵀ·dO, dK = scale·dSᵀ·Q; written (overwritten) into the k and v parts of dqkv (fp32,
   * where {@code fp32} is 1; 0: dqkv is not touched) and of its bf16 copy {@code dqkvCopy} (the operand of the qkv
   * projection's backward), from the bf16 copies of qkv and dO. Grid {@link #blocks}, block i takes head i / tiles and
   * key tile i % tiles. Each
   * query tile's Q and dO are staged in shared memory by rows and transposed, with its lse and dsum, from registers
   * loaded while the previous tile was being computed. No checks.
   */
  @Kernel
  public static void flashBackwardKeyValue(KernelContext ctx, float[] dqkv, int dqkvOff, short[] dqkvCopy,
      int dqkvCopyOff, int fp32, short[] dout, int doutOff,
      short[] qkv, int qkvOff, float[] lse, int lseOff, float[] dsum, int dsumOff, int B, int T, int NH,
      @Constant int HS, float scale) {
    int[] sq = ctx.allocateIntLocalArray(TILE * (HS / 2 + PAD)); // the tile's Q rows, as bf16 pairs
    int[] sd = ctx.allocateIntLocalArray(TILE * (HS / 2 + PAD)); // its dO rows
    int[] sqt = ctx.allocateIntLocalArray(HS * (TILE / 2 + PAD)); // Q transposed: pairs of queries per dim
    int[] sdt = ctx.allocateIntLocalArray(HS * (TILE / 2 + PAD)); // dO transposed
    float[] sl = ctx.allocateFloatLocalArray(2 * TILE); // the queries' lse in base-2 units, then their dsum
    int tiles = (T + BLOCK_ROWS - 1) / BLOCK_ROWS;
    int bh = ctx.groupIdx / tiles;
    int blockRow = ctx.groupIdx % tiles * BLOCK_ROWS;
    int k0 = blockRow + (ctx.localIdx >> 5) * ROWS;
    int lane = ctx.laneId();
    int g = lane >> 2;
    int t = lane & 3;
    int c = 2 * t;
    int D = NH * HS;
    int C3 = 3 * D;
    int head = bh % NH * HS;
    int base = qkvOff + bh / NH * T * C3 + head; // q of (b, token 0, h)
    int doBase = doutOff + bh / NH * T * D + head; // dO of (b, token 0, h)
    int kA = k0 + g; // this lane's two key rows
    int kB = kA + 8;
    int[] kf = new int[HS / 4];
    int[] vf = new int[HS / 4];
    int keyA = base + Math.min(kA, T - 1) * C3 + c;
    int keyB = base + Math.min(kB, T - 1) * C3 + c;
    for (int u = 0; u < HS / 16; u++) {
      rowFragment(kf, 4 * u, qkv, keyA + D + 16 * u, keyB + D + 16 * u);
      rowFragment(vf, 4 * u, qkv, keyA + 2 * D + 16 * u, keyB + 2 * D + 16 * u);
    }
    float sl2 = scale * LOG2E;
    float[] dk = new float[HS / 2];
    float[] dv = new float[HS / 2];
    float[] p = new float[TILE / 2];
    float[] ds = new float[TILE / 2];
    int rs = HS / 2 + PAD;
    int cs = TILE / 2 + PAD;
    // staging: item i = (query pair i % 16, column chunk i / 16): rows 2qp and 2qp+1 of Q and of dO; thread i < 64 also
    // the lse (i < 32) or dsum of query i % 32
    int[] next = new int[16 * ((TILE / 2 * (HS / 8) + THREADS - 1) / THREADS)];
    float nextStat = 0f;
    int stat = ctx.localIdx < TILE ? lseOff + bh * T : dsumOff + bh * T;
    for (int q0 = blockRow; q0 < T; q0 += TILE) {
      if (q0 == blockRow) { // the first tile's loads; later tiles' were issued during the previous tile
        loadTile(ctx, qkv, base, C3, dout, doBase, D, q0, T, TILE / 2, HS, next);
        if (ctx.localIdx < 2 * TILE) {
          nextStat = ctx.localIdx < TILE ? lse[stat + Math.min(q0 + ctx.localIdx, T - 1)]
              : dsum[stat + Math.min(q0 + ctx.localIdx - TILE, T - 1)];
        }
      }
      ctx.barrier(); // every warp has read the previous tile
      for (int k = 0; k < (TILE / 2 * (HS / 8) + THREADS - 1) / THREADS; k++) {
        int item = ctx.localIdx + k * THREADS;
        if (item < TILE / 2 * (HS / 8)) {
          int qp = item % (TILE / 2);
          int cc = item / (TILE / 2);
          storeRows(sq, 2 * qp, rs, cc, next, 16 * k);
          storeColumns(sqt, qp, cs, cc, next, 16 * k);
          storeRows(sd, 2 * qp, rs, cc, next, 16 * k + 8);
          storeColumns(sdt, qp, cs, cc, next, 16 * k + 8);
        }
      }
      if (ctx.localIdx < 2 * TILE) {
        sl[ctx.localIdx] = ctx.localIdx < TILE ? nextStat * LOG2E : nextStat;
      }
      ctx.barrier();
      if (q0 + TILE < T) { // the next tile's loads fly while this one is computed
        int n0 = q0 + TILE;
        loadTile(ctx, qkv, base, C3, dout, doBase, D, n0, T, TILE / 2, HS, next);
        if (ctx.localIdx < 2 * TILE) {
          nextStat = ctx.localIdx < TILE ? lse[stat + Math.min(n0 + ctx.localIdx, T - 1)]
              : dsum[stat + Math.min(n0 + ctx.localIdx - TILE, T - 1)];
        }
      }
      if (k0 < T && q0 + TILE > k0) { // whole warps; some query of the tile sees some key of the warp
        for (int i = 0; i < TILE / 2; i++) {
          p[i] = 0f;
          ds[i] = 0f;
        }
        for (int j = 0; j < TILE / 8; j++) { // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, n-tile j: queries q0+8j .. q0+8j+7
          int r = (8 * j + g) * rs + t;
          for (int u = 0; u < HS / 16; u++) {
            ctx.mmaBf16(p, 4 * j, kf[4 * u], kf[4 * u + 1], kf[4 * u + 2], kf[4 * u + 3], sq[r + 8 * u],
                sq[r + 8 * u + 4]);
            ctx.mmaBf16(ds, 4 * j, vf[4 * u], vf[4 * u + 1], vf[4 * u + 2], vf[4 * u + 3], sd[r + 8 * u],
                sd[r + 8 * u + 4]);
          }
        }
        for (int j = 0; j < TILE / 8; j++) { // Pᵀ and dSᵀ: element (key row, query column q or q+1)
          float l0 = sl[8 * j + c];
          float l1 = sl[8 * j + c + 1];
          p[4 * j] = FastMath.exp2(Math.fma(p[4 * j], sl2, -l0));
          p[4 * j + 1] = FastMath.exp2(Math.fma(p[4 * j + 1], sl2, -l1));
          p[4 * j + 2] = FastMath.exp2(Math.fma(p[4 * j + 2], sl2, -l0));
          p[4 * j + 3] = FastMath.exp2(Math.fma(p[4 * j + 3], sl2, -l1));
        }
        if (q0 < k0 + ROWS || q0 + TILE > T) { // queries before a key, or past T, see nothing
          for (int j = 0; j < TILE / 8; j++) {
            int q = q0 + 8 * j + c;
            p[4 * j] = q < kA || q >= T ? 0f : p[4 * j];
            p[4 * j + 1] = q + 1 < kA || q + 1 >= T ? 0f : p[4 * j + 1];
            p[4 * j + 2] = q < kB || q >= T ? 0f : p[4 * j + 2];
            p[4 * j + 3] = q + 1 < kB || q + 1 >= T ? 0f : p[4 * j + 3];
          }
        }
        for (int j = 0; j < TILE / 8; j++) {
          float d0 = sl[TILE + 8 * j + c];
          float d1 = sl[TILE + 8 * j + c + 1];
          ds[4 * j] = p[4 * j] * (ds[4 * j] - d0);
          ds[4 * j + 1] = p[4 * j + 1] * (ds[4 * j + 1] - d1);
          ds[4 * j + 2] = p[4 * j + 2] * (ds[4 * j + 2] - d0);
          ds[4 * j + 3] = p[4 * j + 3] * (ds[4 * j + 3] - d1);
        }
        for (int u = 0; u < TILE / 16; u++) { // dV += Pᵀ·dO, dK += dSᵀ·Q, k-step u: queries q0+16u .. q0+16u+15
          int pa0 = Bf16.encode2(p[8 * u], p[8 * u + 1]);
          int pa1 = Bf16.encode2(p[8 * u + 2], p[8 * u + 3]);
          int pa2 = Bf16.encode2(p[8 * u + 4], p[8 * u + 5]);
          int pa3 = Bf16.encode2(p[8 * u + 6], p[8 * u + 7]);
          int da0 = Bf16.encode2(ds[8 * u], ds[8 * u + 1]);
          int da1 = Bf16.encode2(ds[8 * u + 2], ds[8 * u + 3]);
          int da2 = Bf16.encode2(ds[8 * u + 4], ds[8 * u + 5]);
          int da3 = Bf16.encode2(ds[8 * u + 6], ds[8 * u + 7]);
          for (int j = 0; j < HS / 8; j++) {
            int r = (8 * j + g) * cs + 8 * u + t;
            ctx.mmaBf16(dv, 4 * j, pa0, pa1, pa2, pa3, sdt[r], sdt[r + 4]);
            ctx.mmaBf16(dk, 4 * j, da0, da1, da2, da3, sqt[r], sqt[r + 4]);
          }
        }
      }
    }
    int gA = bh / NH * T * C3 + head + kA * C3 + c; // q part of dqkv at key row kA, from dqkvOff and dqkvCopyOff
    int gB = gA + 8 * C3;
    for (int j = 0; j < HS / 8; j++) {
      int k = D + 8 * j;
      int v = 2 * D + 8 * j;
      if (kA < T) {
        storePair(fp32, dqkv, dqkvOff + gA + k, dqkvCopy, dqkvCopyOff + gA + k, dk[4 * j] * scale,
            dk[4 * j + 1] * scale);
        storePair(fp32, dqkv, dqkvOff + gA + v, dqkvCopy, dqkvCopyOff + gA + v, dv[4 * j], dv[4 * j + 1]);
      }
      if (kB < T) {
        storePair(fp32, dqkv, dqkvOff + gB + k, dqkvCopy, dqkvCopyOff + gB + k, dk[4 * j + 2] * scale,
            dk[4 * j + 3] * scale);
        storePair(fp32, dqkv, dqkvOff + gB + v, dqkvCopy, dqkvCopyOff + gB + v, dv[4 * j + 2], dv[4 * j + 3]);
      }
    }
  }

  /**
   * SIMT kernel: dQ of head (b,h), per query rows (a warp's 16 queries against their keys, in tiles of {@value #TILE}):
   * S = Q·Kᵀ, P = exp(S·scale − lse) (0 where key &gt; query), dP = dO·Vᵀ, dS = P ∘ (dP − dsum), dQ = scale·dS·K;
   * written (overwritten) into the q part of dqkv (fp32, where {@code fp32} is 1; 0: dqkv is not touched) and of its
   * bf16 copy {@code dqkvCopy}, from the bf16 copies of qkv and dO. Grid {@link #blocks}, the last query tiles first. Each key tile's K (by rows and transposed) and V (by
   * rows) are staged in shared memory from registers loaded while the previous tile was being computed. No checks.
   */
  @Kernel
  public static void flashBackwardQuery(KernelContext ctx, float[] dqkv, int dqkvOff, short[] dqkvCopy,
      int dqkvCopyOff, int fp32, short[] dout, int doutOff,
      short[] qkv, int qkvOff, float[] lse, int lseOff, float[] dsum, int dsumOff, int B, int T, int NH,
      @Constant int HS, float scale) {
    int[] sk = ctx.allocateIntLocalArray(TILE * (HS / 2 + PAD)); // the tile's K rows, as bf16 pairs
    int[] sv = ctx.allocateIntLocalArray(TILE * (HS / 2 + PAD)); // its V rows
    int[] skt = ctx.allocateIntLocalArray(HS * (TILE / 2 + PAD)); // K transposed: pairs of keys per dim
    int tiles = (T + BLOCK_ROWS - 1) / BLOCK_ROWS;
    int bh = ctx.groupIdx / tiles;
    int blockRow = (tiles - 1 - ctx.groupIdx % tiles) * BLOCK_ROWS;
    int q0 = blockRow + (ctx.localIdx >> 5) * ROWS;
    int lane = ctx.laneId();
    int g = lane >> 2;
    int t = lane & 3;
    int c = 2 * t;
    int D = NH * HS;
    int C3 = 3 * D;
    int head = bh % NH * HS;
    int base = qkvOff + bh / NH * T * C3 + head;
    int doBase = doutOff + bh / NH * T * D + head;
    int rA = q0 + g;
    int rB = rA + 8;
    int[] qf = new int[HS / 4];
    int[] df = new int[HS / 4];
    int qA = base + Math.min(rA, T - 1) * C3 + c;
    int qB = base + Math.min(rB, T - 1) * C3 + c;
    int dA = doBase + Math.min(rA, T - 1) * D + c;
    int dB = doBase + Math.min(rB, T - 1) * D + c;
    for (int u = 0; u < HS / 16; u++) {
      rowFragment(qf, 4 * u, qkv, qA + 16 * u, qB + 16 * u);
      rowFragment(df, 4 * u, dout, dA + 16 * u, dB + 16 * u);
    }
    float sl2 = scale * LOG2E;
    int sA = bh * T + Math.min(rA, T - 1);
    int sB = bh * T + Math.min(rB, T - 1);
    float lseA = lse[lseOff + sA] * LOG2E;
    float lseB = lse[lseOff + sB] * LOG2E;
    float dsA = dsum[dsumOff + sA];
    float dsB = dsum[dsumOff + sB];
    float[] dq = new float[HS / 2];
    float[] p = new float[TILE / 2];
    float[] ds = new float[TILE / 2];
    int rs = HS / 2 + PAD;
    int cs = TILE / 2 + PAD;
    // staging: item i = (key pair i % 16, column chunk i / 16): rows 2kp and 2kp+1 of K and of V
    int[] next = new int[16 * ((TILE / 2 * (HS / 8) + THREADS - 1) / THREADS)];
    loadTile(ctx, qkv, base + D, C3, qkv, base + 2 * D, C3, 0, T, TILE / 2, HS, next);
    int kEnd = Math.min(T, blockRow + BLOCK_ROWS);
    for (int k0 = 0; k0 < kEnd; k0 += TILE) {
      ctx.barrier(); // every warp has read the previous tile
      for (int k = 0; k < (TILE / 2 * (HS / 8) + THREADS - 1) / THREADS; k++) {
        int item = ctx.localIdx + k * THREADS;
        if (item < TILE / 2 * (HS / 8)) {
          int kp = item % (TILE / 2);
          int cc = item / (TILE / 2);
          storeRows(sk, 2 * kp, rs, cc, next, 16 * k);
          storeColumns(skt, kp, cs, cc, next, 16 * k);
          storeRows(sv, 2 * kp, rs, cc, next, 16 * k + 8);
        }
      }
      ctx.barrier();
      if (k0 + TILE < kEnd) { // the next tile's loads fly while this one is computed
        loadTile(ctx, qkv, base + D, C3, qkv, base + 2 * D, C3, k0 + TILE, T, TILE / 2, HS, next);
      }
      if (q0 < T && k0 <= q0 + ROWS - 1) { // whole warps; some key of the tile is seen by some row of the warp
        for (int i = 0; i < TILE / 2; i++) {
          p[i] = 0f;
          ds[i] = 0f;
        }
        for (int j = 0; j < TILE / 8; j++) { // S = Q·Kᵀ and dP = dO·Vᵀ, n-tile j: keys k0+8j .. k0+8j+7
          int r = (8 * j + g) * rs + t;
          for (int u = 0; u < HS / 16; u++) {
            ctx.mmaBf16(p, 4 * j, qf[4 * u], qf[4 * u + 1], qf[4 * u + 2], qf[4 * u + 3], sk[r + 8 * u],
                sk[r + 8 * u + 4]);
            ctx.mmaBf16(ds, 4 * j, df[4 * u], df[4 * u + 1], df[4 * u + 2], df[4 * u + 3], sv[r + 8 * u],
                sv[r + 8 * u + 4]);
          }
        }
        for (int j = 0; j < TILE / 8; j++) { // P and dS: element (query row, key column)
          p[4 * j] = FastMath.exp2(Math.fma(p[4 * j], sl2, -lseA));
          p[4 * j + 1] = FastMath.exp2(Math.fma(p[4 * j + 1], sl2, -lseA));
          p[4 * j + 2] = FastMath.exp2(Math.fma(p[4 * j + 2], sl2, -lseB));
          p[4 * j + 3] = FastMath.exp2(Math.fma(p[4 * j + 3], sl2, -lseB));
        }
        if (k0 + TILE > q0) { // the diagonal: keys past the row are masked
          for (int j = 0; j < TILE / 8; j++) {
            int key = k0 + 8 * j + c;
            p[4 * j] = key > rA ? 0f : p[4 * j];
            p[4 * j + 1] = key + 1 > rA ? 0f : p[4 * j + 1];
            p[4 * j + 2] = key > rB ? 0f : p[4 * j + 2];
            p[4 * j + 3] = key + 1 > rB ? 0f : p[4 * j + 3];
          }
        }
        for (int j = 0; j < TILE / 8; j++) {
          ds[4 * j] = p[4 * j] * (ds[4 * j] - dsA);
          ds[4 * j + 1] = p[4 * j + 1] * (ds[4 * j + 1] - dsA);
          ds[4 * j + 2] = p[4 * j + 2] * (ds[4 * j + 2] - dsB);
          ds[4 * j + 3] = p[4 * j + 3] * (ds[4 * j + 3] - dsB);
        }
        for (int u = 0; u < TILE / 16; u++) { // dQ += dS·K, k-step u: keys k0+16u .. k0+16u+15
          int a0 = Bf16.encode2(ds[8 * u], ds[8 * u + 1]);
          int a1 = Bf16.encode2(ds[8 * u + 2], ds[8 * u + 3]);
          int a2 = Bf16.encode2(ds[8 * u + 4], ds[8 * u + 5]);
          int a3 = Bf16.encode2(ds[8 * u + 6], ds[8 * u + 7]);
          for (int j = 0; j < HS / 8; j++) {
            int r = (8 * j + g) * cs + 8 * u + t;
            ctx.mmaBf16(dq, 4 * j, a0, a1, a2, a3, skt[r], skt[r + 4]);
          }
        }
      }
    }
    int gA = bh / NH * T * C3 + head + rA * C3 + c; // from dqkvOff and dqkvCopyOff
    int gB = gA + 8 * C3;
    for (int j = 0; j < HS / 8; j++) {
      if (rA < T) {
        storePair(fp32, dqkv, dqkvOff + gA + 8 * j, dqkvCopy, dqkvCopyOff + gA + 8 * j, dq[4 * j] * scale,
            dq[4 * j + 1] * scale);
      }
      if (rB < T) {
        storePair(fp32, dqkv, dqkvOff + gB + 8 * j, dqkvCopy, dqkvCopyOff + gB + 8 * j, dq[4 * j + 2] * scale,
            dq[4 * j + 3] * scale);
      }
    }
  }

  /** Threads per block. */
  public static final int THREADS = WARPS * 32;
  /** Ints of padding after each row of a staged tile: with it a warp's fragment reads hit 32 different banks. */
  static final int PAD = 4;
  /** log2(e) and ln(2), as floats: the kernels exponentiate in base 2 ({@link FastMath#exp2}). */
  static final float LOG2E = 1.44269504f;
  static final float LN2 = 0.693147181f;

  /**
   * {@code a[i] = x, a[i + 1] = y} (where {@code fp32} is 1; 0: a is not touched) and their bf16 copy
   * {@code copy[j], copy[j + 1]} ({@link Bf16#encode2}: the bits {@link Matmul#roundToBf16x8} of a would give), which
   * the next GEMM multiplies; {@code j} even.
   */
  static void storePair(int fp32, float[] a, int i, short[] copy, int j, float x, float y) {
    if (fp32 != 0) {
      a[i] = x;
      a[i + 1] = y;
    }
    Vec16.storeShortPair(copy, j, Bf16.encode2(x, y));
  }

  /** The larger of two floats (a plain comparison: one instruction on the GPU; a NaN operand may be dropped). */
  static float max(float a, float b) {
    return a > b ? a : b;
  }

  /**
   * This thread's share of a staged tile, into {@code next} (16 ints per item; items k·{@value #THREADS} + localIdx):
   * item i is row pair {@code i % pairs} (rows {@code row0 + 2(i % pairs)} and the next, clamped to T−1) and column chunk
   * {@code i / pairs} of two bf16 head tensors, {@code a} (row r at {@code a[baseA + r·strideA]}) into
   * {@code next[16k .. 16k+8)} and {@code b} into {@code next[16k+8 .. 16k+16)} ({@link #loadRowPair}): four 16-byte
   * loads an item, all issued before any is used.
   */
  static void loadTile(KernelContext ctx, short[] a, int baseA, int strideA, short[] b, int baseB, int strideB,
      int row0, int T, int pairs, int HS, int[] next) {
    for (int k = 0; k < (pairs * (HS / 8) + THREADS - 1) / THREADS; k++) {
      int item = ctx.localIdx + k * THREADS;
      if (item < pairs * (HS / 8)) {
        int row = row0 + 2 * (item % pairs);
        loadRowPair(a, baseA, strideA, row, T, item / pairs, next, 16 * k);
        loadRowPair(b, baseB, strideB, row, T, item / pairs, next, 16 * k + 8);
      }
    }
  }

  /**
   * Rows {@code row} and {@code row+1} (each clamped to T−1) of a bf16 head tensor (row i's values at
   * {@code a[base + i·stride]}), columns {@code 8cc .. 8cc+7}: eight packed pairs into {@code v[at .. at+8)} (the first
   * row's four, then the second's), two 16-byte loads.
   */
  static void loadRowPair(short[] a, int base, int stride, int row, int T, int cc, int[] v, int at) {
    Vec16.loadShortPairs8(a, base + Math.min(row, T - 1) * stride + 8 * cc, v, at);
    Vec16.loadShortPairs8(a, base + Math.min(row + 1, T - 1) * stride + 8 * cc, v, at + 4);
  }

  /**
   * {@link #loadRowPair}'s eight pairs as staged rows: row r's pair p (columns 2p, 2p+1) at {@code sh[r·rs + p]}, here
   * rows {@code r} and {@code r+1}, pairs {@code 4cc .. 4cc+3}, where a B fragment with these rows as its columns reads
   * them; two 16-byte stores.
   */
  static void storeRows(int[] sh, int r, int rs, int cc, int[] v, int at) {
    Vec16.storeInts4(sh, r * rs + 4 * cc, v, at);
    Vec16.storeInts4(sh, (r + 1) * rs + 4 * cc, v, at + 4);
  }

  /**
   * {@link #loadRowPair}'s eight pairs as staged columns: column d's pair of rows 2rp, 2rp+1 at {@code sh[d·cs + rp]},
   * here columns {@code 8cc .. 8cc+7}, where a B fragment with these rows along its k dimension reads them.
   */
  static void storeColumns(int[] sh, int rp, int cs, int cc, int[] v, int at) {
    for (int q = 0; q < 4; q++) {
      int lo = v[at + q]; // the first row's columns 8cc+2q, 8cc+2q+1
      int hi = v[at + 4 + q]; // the second row's
      sh[(8 * cc + 2 * q) * cs + rp] = lo & 0xFFFF | hi << 16;
      sh[(8 * cc + 2 * q + 1) * cs + rp] = lo >>> 16 | hi & 0xFFFF0000;
    }
  }

  /**
   * One k-step of a warp's A fragment ({@link KernelContext#mmaBf16}) into {@code f[at .. at+3]} from a bf16 tensor:
   * rows g and g+8 start at {@code a[rowA]} and {@code a[rowB]} (at this lane's first column of the step), columns
   * {@code +0, +1} and {@code +8, +9}.
   */
  static void rowFragment(int[] f, int at, short[] a, int rowA, int rowB) {
    f[at] = Vec16.loadShortPair(a, rowA);
    f[at + 1] = Vec16.loadShortPair(a, rowB);
    f[at + 2] = Vec16.loadShortPair(a, rowA + 8);
    f[at + 3] = Vec16.loadShortPair(a, rowB + 8);
  }
}
