package dev.taco.collective;

/**
 * The memory-space / transport seam under {@link TwoShot} (docs/design.md §4): the few steps the compressed collectives are
 * made of, on one rank, for tensors {@code T} and payload buffers {@code P} of one memory space. {@link HostWire} runs
 * them at once on float arrays over a {@link Communicator}; the device wire records them as the nodes of a CUDA task
 * graph (kernels on a compute stream, exchanges on a communication stream) that runs on the GPU without a host
 * synchronisation.
 *
 * <p>Conventions: a tensor is row-major float32 (device: bf16 or fp32) and steps address rows of it
 * ({@code row0 .. row0 + rows}, {@code cols} values each). A <em>chunk</em> is {@code rows x cols} values of which the
 * first {@code realRows} rows come from the tensor and the rest are zero padding (so every rank's chunk has the same
 * shape and every payload has a size known in advance). A payload buffer holds {@link #worldSize()} slots, slot
 * {@code q} for rank {@code q}, each one chunk's payload. {@code piece} numbers the pipelined pieces of one collective
 * ({@code 0 ..}); steps of one piece depend on the piece's earlier steps only, which is what lets a device overlap
 * piece {@code k+1}'s compression with piece {@code k}'s transfer.
 *
 * @param <T> a tensor of this memory space
 * @param <P> a payload buffer of {@code worldSize()} slots
 */
public interface Wire<T, P> {

  /** This rank, in {@code [0, worldSize)}. */
  int rank();

  /** Number of ranks R. */
  int worldSize();

  /**
   * Rows of each rank's chunk per pipelined piece: {@code rowsPerRank} for no pipelining, fewer to cut large
   * collectives into pieces that overlap (docs/design.md §4, "Overlap"). The result does not change any value: every codec
   * that runs here scales each row on its own.
   */
  int pieceRows(Plan plan, int rowsPerRank, int cols);

  /** A payload buffer of {@code worldSize()} slots, each sized for a {@code rows x cols} chunk under {@code plan}. */
  P payloads(Plan plan, int rows, int cols);

  /** How many values {@code tensor} can hold. */
  long capacity(T tensor);

  /**
   * Checks that every rank calls the same collective: each rank gives its description (operation, shape, plan); if
   * any two differ, every rank throws before anything is sent or written. The device wire leaves this to its caller,
   * which checks at call time rather than while recording ({@code DeviceCollectives}).
   *
   * @throws CollectiveException naming a rank whose call differs, and both descriptions
   */
  void agree(String description);

  /** A scratch tensor of {@code rows x cols} values. */
  T scratch(int rows, int cols);

  /**
   * For a {@link Plan#groupScaled} plan ({@code nccl-fp8}, docs/design.md §4.1): the largest finite {@code |x|} of the
   * {@code rows x cols} tensor {@code x}, the largest of those over the ranks (exchanged), and the plan's scale from
   * it, which this collective's {@link #encode}, {@link #reduce} and {@link #reduceEncode} then cast with and whose
   * reduces sum the payloads in FP8 in NCCL's ring order. Every rank calls it, first.
   */
  void groupScale(Plan plan, T x, int rows, int cols);

  /**
   * Whether the transport sums {@link Plan#groupScaled} payloads itself (NCCL's FP8 all-reduce and reduce-scatter), so
   * that {@link TwoShot} hands it the whole collective ({@link #sumFp8}) instead of emulating NCCL's sum.
   */
  default boolean sumsFp8() {
    return false;
  }

  /**
   * The whole {@code nccl-fp8} all-reduce ({@code out} is {@code x}) or reduce-scatter ({@code out} takes this rank's
   * {@code rows / R} rows) of the {@code rows x cols} tensor {@code x}, by the transport's own FP8 sum ({@link #sumsFp8}).
   *
   * @throws IllegalArgumentException if the transport cannot sum FP8 after all (its library or device)
   */
  default void sumFp8(CollectiveKind kind, Plan plan, T x, int rows, int cols, T out) {
    throw new UnsupportedOperationException("this wire does not sum FP8 itself");
  }

  /** Compress: the chunk at {@code x} rows {@code row0 ..} (then zero rows) into slot {@code slot} of {@code out}. */
  void encode(Plan plan, T x, int row0, int realRows, int rows, int cols, P out, int slot, int piece);

  /**
   * Decompress-reduce (docs/design.md §3.5): {@code y} rows {@code yRow0 .. + realRows} = own chunk + the sum of the peers'
   * payloads in {@code recv} (every slot but {@link #rank()}), fp32 accumulation.
   */
  void reduce(Plan plan, T x, int row0, int realRows, int rows, int cols, P recv, T y, int yRow0, int piece);

  /**
   * Decompress-reduce-recompress: as {@link #reduce}, the sum compressed into slot {@link #rank()} of {@code out}
   * instead of written to a tensor (the middle of the two-shot all-reduce).
   */
  void reduceEncode(Plan plan, T x, int row0, int realRows, int rows, int cols, P recv, P out, int piece);

  /**
   * Decompress every slot of {@code in} (one piece of every rank's chunk) into {@code out}: payload row {@code r} of
   * slot {@code q} goes to row {@code q * rowsPerRank + pieceRow0 + r} for {@code r < pieceRows} while that row is below
   * {@code rowsTotal}; padding rows are dropped. The own slot is decoded too, from its payload, so every rank gets the
   * same bits.
   */
  void decodeAll(Plan plan, P in, int rowsTotal, int rowsPerRank, int pieceRow0, int pieceRows, int cols, T out,
      int piece);

  /** Exchange: slot {@code p} of {@code send} lands in slot {@link #rank()} of rank {@code p}'s {@code recv}. */
  void allToAll(P send, P recv, int piece);

  /** In-place all-gather: slot {@link #rank()} of {@code buf} lands in the same slot of every rank's {@code buf}. */
  void allGather(P buf, int piece);

  /** Copies {@code rows} rows of {@code cols} values from {@code src} row {@code srcRow0} to {@code dst} row {@code dstRow0}. */
  void copyRows(T src, int srcRow0, T dst, int dstRow0, int rows, int cols);

  /** Lays the {@code rows x cols} tensor {@code x} out as {@code plan.layout()} sends it, into {@code wire}. */
  void toWire(Plan plan, T x, int rows, int cols, T wire);

  /** The inverse of {@link #toWire}: {@code wire} back into {@code x} ({@code rows x cols}, the caller's layout). */
  void fromWire(Plan plan, T wire, int rows, int cols, T x);
}
