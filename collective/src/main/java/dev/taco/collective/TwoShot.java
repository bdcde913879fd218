package dev.taco.collective;

/**
 * The compressed collectives of docs/design.md §4, written once over a {@link Wire}: the same steps run on float arrays
 * ({@link HostWire}) and on a GPU (the device wire), so both give the same values.
 *
 * <p>A collective carries a {@code rows x cols} tensor (tokens x hidden). It is split by rows: rank {@code p} owns rows
 * {@code [p*rp, (p+1)*rp)}, {@code rp = ceil(rows/R)} (the split sequence parallelism uses), the last ranks' chunks
 * padded with zero rows when R does not divide rows. Every value goes through the plan's codec with one coarse scale
 * per row; every payload's size follows from the plan and the chunk's shape. Each rank's chunk may be cut into
 * pipelined pieces ({@link Wire#pieceRows}); steps are issued phase by phase so that a device can overlap them.
 *
 * <ul>
 *   <li><b>all-reduce</b> (two-shot): compress chunk {@code p} for every peer {@code p} → all-to-all →
 *       decompress-reduce the own chunk (own rows exact, peers' payloads summed in the codec's rotated domain, the
 *       inverse transform once) and re-compress it → all-gather → decompress every chunk, the own one included from its
 *       payload, so every rank ends with the same bits. Each peer's value is quantised twice.</li>
 *   <li><b>all-gather</b> (sequence-parallel forward): compress the own shard → all-gather → decompress every shard
 *       (the own one from its payload).</li>
 *   <li><b>reduce-scatter</b> (sequence-parallel backward): compress chunk {@code p} for every peer → all-to-all →
 *       decompress-reduce into the own shard.</li>
 * </ul>
 * With one rank nothing moves and nothing is quantised: each collective is the identity (or a copy). Wire layouts
 * other than in-order ({@link WireLayout}) are applied before and undone after; the token axis is for all-reduce only.
 *
 * <p>{@code nccl-fp8} ({@link Plan#groupScaled}, docs/design.md §4.1) takes the same steps with one scale for every
 * rank ({@link Wire#groupScale}) and a reduce that sums the codes in FP8 in the order of NCCL's ring, ending at the
 * chunk's owner, so that the exchanges and bytes are a ring's and the values NCCL's; a transport that sums FP8 itself
 * (NCCL 2.24+ on sm90+) runs its all-reduce and reduce-scatter instead ({@link Wire#sumFp8}).
 */
public final class TwoShot {
  private TwoShot() {}

  /**
   * Sum all-reduce of the {@code rows x cols} tensor {@code x}, in place.
   *
   * @throws IllegalArgumentException for non-positive sizes, a permutation of the wrong length, or what the codec
   *     refuses (non-finite input under the refuse policy)
   * @throws CollectiveException if the transport fails, is aborted or times out
   */
  public static <T, P> void allReduce(Wire<T, P> w, Plan plan, T x, int rows, int cols) {
    checkShape("all-reduce", plan, rows, cols);
    checkCapacity(w, "all-reduce", "tensor", x, (long) rows * cols);
    if (w.worldSize() == 1) {
      return;
    }
    w.agree(call("all-reduce", plan, rows, cols));
    if (summedInFp8(w, CollectiveKind.ALL_REDUCE, plan, x, rows, cols, x)) {
      return;
    }
    if (plan.layout() == WireLayout.IN_ORDER) {
      allReduceInOrder(w, plan, x, rows, cols);
      return;
    }
    T wire = w.scratch(rows, cols);
    w.toWire(plan, x, rows, cols, wire);
    boolean transposed = plan.layout() == WireLayout.TOKEN_AXIS;
    allReduceInOrder(w, plan, wire, transposed ? cols : rows, transposed ? rows : cols);
    w.fromWire(plan, wire, rows, cols, x);
  }

  private static <T, P> void allReduceInOrder(Wire<T, P> w, Plan plan, T x, int rows, int cols) {
    int world = w.worldSize();
    int me = w.rank();
    int rp = ceilDiv(rows, world);
    int s = w.pieceRows(plan, rp, cols);
    int pieces = ceilDiv(rp, s);
    Object[] send = new Object[pieces];
    Object[] recv = new Object[pieces];
    Object[] gathered = new Object[pieces];
    for (int k = 0; k < pieces; k++) {
      int sk = Math.min(s, rp - k * s);
      send[k] = w.payloads(plan, sk, cols);
      recv[k] = w.payloads(plan, sk, cols);
      gathered[k] = w.payloads(plan, sk, cols);
    }
    for (int k = 0; k < pieces; k++) {
      int sk = Math.min(s, rp - k * s);
      for (int p = 0; p < world; p++) {
        if (p != me) {
          w.encode(plan, x, p * rp + k * s, real(rows, rp, p, k, s, sk), sk, cols, cast(send[k]), p, k);
        }
      }
    }
    for (int k = 0; k < pieces; k++) {
      w.allToAll(cast(send[k]), cast(recv[k]), k);
    }
    for (int k = 0; k < pieces; k++) {
      int sk = Math.min(s, rp - k * s);
      w.reduceEncode(plan, x, me * rp + k * s, real(rows, rp, me, k, s, sk), sk, cols, cast(recv[k]),
          cast(gathered[k]), k);
    }
    for (int k = 0; k < pieces; k++) {
      w.allGather(cast(gathered[k]), k);
    }
    for (int k = 0; k < pieces; k++) {
      w.decodeAll(plan, cast(gathered[k]), rows, rp, k * s, Math.min(s, rp - k * s), cols, x, k);
    }
  }

  /**
   * All-gather of every rank's {@code shardRows x cols} shard into {@code out} ({@code R*shardRows x cols}, shard
   * {@code q} at rows {@code q*shardRows}).
   *
   * @throws IllegalArgumentException for non-positive sizes or a token-axis plan
   * @throws CollectiveException if the transport fails, is aborted or times out
   */
  public static <T, P> void allGather(Wire<T, P> w, Plan plan, T shard, int shardRows, int cols, T out) {
    checkShape("all-gather", plan, shardRows, cols);
    checkNotTransposed("all-gather", plan);
    int world = w.worldSize();
    checkCapacity(w, "all-gather", "shard", shard, (long) shardRows * cols);
    checkCapacity(w, "all-gather", "output", out, (long) world * shardRows * cols);
    if (world == 1) {
      w.copyRows(shard, 0, out, 0, shardRows, cols);
      return;
    }
    w.agree(call("all-gather", plan, shardRows, cols));
    if (plan.groupScaled()) { // the codes are gathered as they are: a copy, whoever moves them
      w.groupScale(plan, shard, shardRows, cols);
    }
    T src = shard;
    T dst = out;
    if (plan.layout() == WireLayout.PERMUTED) {
      src = w.scratch(shardRows, cols);
      w.toWire(plan, shard, shardRows, cols, src);
      dst = w.scratch(world * shardRows, cols);
    }
    int me = w.rank();
    int s = w.pieceRows(plan, shardRows, cols);
    int pieces = ceilDiv(shardRows, s);
    Object[] buf = new Object[pieces];
    for (int k = 0; k < pieces; k++) {
      int sk = Math.min(s, shardRows - k * s);
      buf[k] = w.payloads(plan, sk, cols);
      w.encode(plan, src, k * s, sk, sk, cols, cast(buf[k]), me, k);
    }
    for (int k = 0; k < pieces; k++) {
      w.allGather(cast(buf[k]), k);
    }
    for (int k = 0; k < pieces; k++) {
      w.decodeAll(plan, cast(buf[k]), world * shardRows, shardRows, k * s, Math.min(s, shardRows - k * s), cols, dst,
          k);
    }
    if (dst != out) {
      w.fromWire(plan, dst, world * shardRows, cols, out);
    }
  }

  /**
   * Sum reduce-scatter of the {@code rows x cols} tensor {@code x}: this rank receives in {@code shard} the sum over
   * ranks of their rows {@code [rank*rows/R, (rank+1)*rows/R)}.
   *
   * @throws IllegalArgumentException for non-positive sizes, rows not divisible by R, or a token-axis plan
   * @throws CollectiveException if the transport fails, is aborted or times out
   */
  public static <T, P> void reduceScatter(Wire<T, P> w, Plan plan, T x, int rows, int cols, T shard) {
    checkShape("reduce-scatter", plan, rows, cols);
    checkNotTransposed("reduce-scatter", plan);
    int world = w.worldSize();
    if (rows % world != 0) {
      throw new IllegalArgumentException("reduce-scatter: " + rows + " rows do not split over " + world
          + " ranks (the sequence length must be divisible by the tensor-parallel size)");
    }
    int rs = rows / world;
    checkCapacity(w, "reduce-scatter", "tensor", x, (long) rows * cols);
    checkCapacity(w, "reduce-scatter", "shard", shard, (long) rs * cols);
    if (world == 1) {
      w.copyRows(x, 0, shard, 0, rs, cols);
      return;
    }
    w.agree(call("reduce-scatter", plan, rows, cols));
    if (summedInFp8(w, CollectiveKind.REDUCE_SCATTER, plan, x, rows, cols, shard)) {
      return;
    }
    T src = x;
    T dst = shard;
    if (plan.layout() == WireLayout.PERMUTED) {
      src = w.scratch(rows, cols);
      w.toWire(plan, x, rows, cols, src);
      dst = w.scratch(rs, cols);
    }
    int me = w.rank();
    int s = w.pieceRows(plan, rs, cols);
    int pieces = ceilDiv(rs, s);
    Object[] send = new Object[pieces];
    Object[] recv = new Object[pieces];
    for (int k = 0; k < pieces; k++) {
      int sk = Math.min(s, rs - k * s);
      send[k] = w.payloads(plan, sk, cols);
      recv[k] = w.payloads(plan, sk, cols);
      for (int p = 0; p < world; p++) {
        if (p != me) {
          w.encode(plan, src, p * rs + k * s, sk, sk, cols, cast(send[k]), p, k);
        }
      }
    }
    for (int k = 0; k < pieces; k++) {
      w.allToAll(cast(send[k]), cast(recv[k]), k);
    }
    for (int k = 0; k < pieces; k++) {
      int sk = Math.min(s, rs - k * s);
      w.reduce(plan, src, me * rs + k * s, sk, sk, cols, cast(recv[k]), dst, k * s, k);
    }
    if (dst != shard) {
      w.fromWire(plan, dst, rs, cols, shard);
    }
  }

  /**
   * A group-scaled plan's ({@code nccl-fp8}) first step: the whole collective where the transport sums FP8 itself (real
   * NCCL), true; else the group's scale agreed, false, and the two-shot path goes on with it.
   */
  private static <T, P> boolean summedInFp8(Wire<T, P> w, CollectiveKind kind, Plan plan, T x, int rows, int cols,
      T out) {
    if (!plan.groupScaled()) {
      return false;
    }
    if (w.sumsFp8()) {
      w.sumFp8(kind, plan, x, rows, cols, out);
      return true;
    }
    w.groupScale(plan, x, rows, cols);
    return false;
  }

  /** Real (not padding) rows of rank {@code p}'s piece {@code k} ({@code sk} rows from chunk row {@code k*s}). */
  static int real(int rows, int rp, int p, int k, int s, int sk) {
    long chunkReal = Math.max(0, Math.min(rp, rows - (long) p * rp));
    return (int) Math.max(0, Math.min(sk, chunkReal - (long) k * s));
  }

  static int ceilDiv(int a, int b) {
    return (int) (((long) a + b - 1) / b);
  }

  private static void checkShape(String op, Plan plan, int rows, int cols) {
    if (rows <= 0 || cols <= 0) {
      throw new IllegalArgumentException(op + ": rows and cols must be positive, got " + rows + " x " + cols);
    }
    if ((long) rows * cols > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(op + ": " + rows + " x " + cols + " has more than 2^31 elements");
    }
    int[] perm = plan.permutation();
    if (perm != null && perm.length != cols) {
      throw new IllegalArgumentException(op + ": the plan's channel permutation has " + perm.length
          + " entries, the tensor " + cols + " columns");
    }
  }

  /** What a rank calls, as {@link Wire#agree} compares it. */
  private static String call(String op, Plan plan, int rows, int cols) {
    return op + " of " + rows + " x " + cols + " with " + plan.describe();
  }

  private static <T, P> void checkCapacity(Wire<T, P> w, String op, String what, T t, long need) {
    if (t == null) {
      throw new IllegalArgumentException(op + ": the " + what + " is null");
    }
    long has = w.capacity(t);
    if (has < need) {
      throw new IllegalArgumentException(op + ": the " + what + " holds " + has + " values, the shape needs " + need);
    }
  }

  private static void checkNotTransposed(String op, Plan plan) {
    if (plan.layout() == WireLayout.TOKEN_AXIS) {
      throw new IllegalArgumentException(op + ": a token-axis plan transposes the tensor, which breaks the row split"
          + " of " + op + "; token-axis plans are for all-reduce");
    }
  }

  @SuppressWarnings("unchecked")
  private static <P> P cast(Object p) {
    return (P) p;
  }
}
