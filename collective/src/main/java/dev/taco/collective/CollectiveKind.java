package dev.taco.collective;

/**
 * The collectives a tensor-parallel layer ends in (docs/design.md §4), each with what the rest of the code needs to
 * know of it: its name, nccl-tests' bus-bandwidth factor (the bytes each rank's link carries per byte of the message,
 * from nccl-tests' {@code PERFORMANCE.md}), and whether its tensor may be sent along the token axis (the
 * {@link WireLayout#TOKEN_AXIS} layout: only where the rows are not the ranks' shards).
 */
public enum CollectiveKind {
  /** Sum over the ranks, every rank receives the whole sum (Megatron-LM's "g" forward, "f" backward). */
  ALL_REDUCE("all-reduce", true) {
    @Override
    public double busBandwidthFactor(int ranks) {
      return 2.0 * (ranks - 1) / ranks;
    }
  },
  /** Every rank's shard of the rows to every rank (sequence parallelism, before a column-parallel linear). */
  ALL_GATHER("all-gather", false) {
    @Override
    public double busBandwidthFactor(int ranks) {
      return (double) (ranks - 1) / ranks;
    }
  },
  /** Sum over the ranks, each rank receiving its shard of the rows (sequence parallelism, after a row-parallel one). */
  REDUCE_SCATTER("reduce-scatter", false) {
    @Override
    public double busBandwidthFactor(int ranks) {
      return (double) (ranks - 1) / ranks;
    }
  };

  private final String label;
  private final boolean tokenAxis;

  CollectiveKind(String label, boolean tokenAxis) {
    this.label = label;
    this.tokenAxis = tokenAxis;
  }

  /** The collective's name as reports and messages give it, e.g. {@code all-reduce}. */
  public String label() {
    return label;
  }

  /**
   * nccl-tests' bus bandwidth over algorithm bandwidth for {@code ranks} ranks: 2(R−1)/R for an all-reduce, (R−1)/R
   * for an all-gather or a reduce-scatter (the fraction of the message that crosses each rank's link, per phase).
   */
  public abstract double busBandwidthFactor(int ranks);

  /**
   * nccl-tests' message size of this collective over a rank's input of {@code inputBytes}: an all-gather's message is
   * the gathered whole, {@code R} inputs; an all-reduce's and a reduce-scatter's is the input.
   */
  public long messageBytes(long inputBytes, int ranks) {
    return this == ALL_GATHER ? inputBytes * ranks : inputBytes;
  }

  /**
   * Whether the tensor may go on the wire along the token axis: an all-reduce's rows are any split, an all-gather's and
   * a reduce-scatter's rows are the ranks' shards, so their groups stay along the channels.
   */
  public boolean mayUseTokenAxis() {
    return tokenAxis;
  }

  @Override
  public String toString() {
    return label;
  }
}
