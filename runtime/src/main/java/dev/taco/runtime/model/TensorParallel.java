package dev.taco.runtime.model;

import dev.taco.collective.Site;

/**
 * The tensor-parallel collectives of one rank in one memory space (docs/design.md §6): what {@link Gpt} calls at each
 * collective {@link Site}, beside the layer operations of its {@link Ops}. Each moves the data through the collective
 * module ({@code CollectiveSites} on the host, {@code DeviceSiteCollectives} on a GPU), which chooses the site's plan.
 * Implementations: {@link CpuTensorParallel}, {@link CudaTensorParallel}.
 *
 * @param <A> the arena type of the {@link Ops} it works beside
 */
public interface TensorParallel<A> {

  /** The tensor-parallel all-reduce of a {@code rows x cols} tensor at {@code site}, in place. */
  void allReduce(Site site, View<A> x, int rows, int cols);

  /**
   * All-gather at {@code site} (sequence parallelism, before a column-parallel linear): every rank's
   * {@code (shardRows, cols)} shard into {@code out} ({@code (R·shardRows, cols)}, rank q's rows at q·shardRows),
   * through the site's codec plan; with one rank, a copy.
   */
  void allGather(Site site, View<A> out, View<A> shard, int shardRows, int cols);

  /**
   * Sum reduce-scatter at {@code site} (sequence parallelism, after a row-parallel linear): the {@code (rows, cols)}
   * tensor {@code x} summed over ranks, this rank's rows {@code [rank·rows/R, (rank+1)·rows/R)} into {@code shard},
   * through the site's codec plan; with one rank, a copy. {@code x} may be overwritten.
   */
  void reduceScatter(Site site, View<A> shard, View<A> x, int rows, int cols);

  /**
   * Exact (float32) sum all-reduce of {@code n} elements over the TP group, in place: the parameter gradients that
   * sequence parallelism leaves partial on each rank (LayerNorms, embeddings).
   */
  void allReduceExact(View<A> x, int n);

  /** Bytes this rank has put on the TP wire so far (0 with one rank). */
  long bytesSent();
}
