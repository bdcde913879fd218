package dev.taco.runtime.model;

import dev.taco.collective.CollectiveSites;
import dev.taco.collective.Site;

/**
 * The tensor-parallel collectives of one CPU rank: its {@link CollectiveSites} (threads as ranks), through scratch
 * copies, since the host collectives take a tensor from index 0 of its array.
 */
public final class CpuTensorParallel implements TensorParallel<float[]> {
  private final CollectiveSites sites;
  private float[] wire = new float[0], gathered = new float[0];

  /** @param sites this rank's collective sites */
  public CpuTensorParallel(CollectiveSites sites) {
    this.sites = java.util.Objects.requireNonNull(sites, "sites");
  }

  @Override
  public void allReduce(Site site, View<float[]> x, int rows, int cols) {
    int n = rows * cols;
    if (wire.length < n) wire = new float[n];
    System.arraycopy(x.arena(), x.off(), wire, 0, n);
    sites.allReduce(site, wire, rows, cols);
    System.arraycopy(wire, 0, x.arena(), x.off(), n);
  }

  @Override
  public void allGather(Site site, View<float[]> out, View<float[]> shard, int shardRows, int cols) {
    int n = shardRows * cols, all = sites.worldSize() * n;
    if (wire.length < n) wire = new float[n];
    if (gathered.length < all) gathered = new float[all];
    System.arraycopy(shard.arena(), shard.off(), wire, 0, n);
    sites.allGather(site, wire, shardRows, cols, gathered);
    System.arraycopy(gathered, 0, out.arena(), out.off(), all);
  }

  @Override
  public void reduceScatter(Site site, View<float[]> shard, View<float[]> x, int rows, int cols) {
    int n = rows * cols, part = n / sites.worldSize();
    if (gathered.length < n) gathered = new float[n];
    if (wire.length < part) wire = new float[part];
    System.arraycopy(x.arena(), x.off(), gathered, 0, n);
    sites.reduceScatter(site, gathered, rows, cols, wire);
    System.arraycopy(wire, 0, shard.arena(), shard.off(), part);
  }

  @Override
  public void allReduceExact(View<float[]> x, int n) {
    sites.allReduceExact(x.arena(), x.off(), n);
  }

  @Override
  public long bytesSent() {
    return sites.bytesSent();
  }
}
