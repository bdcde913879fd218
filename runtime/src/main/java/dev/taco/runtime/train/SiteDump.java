package dev.taco.runtime.train;

import dev.taco.collective.CollectiveKind;
import dev.taco.collective.CollectiveSites;
import dev.taco.collective.Site;
import dev.taco.runtime.analyze.SafetensorsWriter;
import dev.taco.runtime.model.Ops;
import dev.taco.runtime.model.TensorParallel;
import dev.taco.runtime.model.View;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code taco train --dump-sites DIR}: the tensors one training step hands its TP collectives, as this rank holds them
 * before they are sent (an all-reduce's or a reduce-scatter's partial sum, an all-gather's shard), so that every codec
 * can be measured on real TP tensors afterwards ({@code taco analyze}, {@code dev.taco.bench.CodecTable}). A
 * {@link TensorParallel} that copies each site's tensor to the host while it is {@linkplain #take armed}, then passes
 * the call on.
 *
 * <p>The file: {@code DIR/<codec>-rank<q>.safetensors} (the codec spec with characters other than letters, digits and
 * {@code ._=-} as {@code _}), one F32 tensor per site named as the site ({@code layer3.mlp.fwd}), {@code [rows, cols]}
 * with at most {@link #MAX_ROWS} rows (the first ones: the token rows a calibration step reads at most); its metadata
 * holds {@code compression}, {@code step}, {@code rank}, {@code run} (where and what the run trains: {@code "cpu, TP=2,
 * 4 layers, hidden 128, ..."}), and per site name its collective and the whole tensor's shape
 * ({@code "all-reduce 4096x384"}).
 *
 * @param <A> the arena type of the rank's {@link Ops}
 */
public final class SiteDump<A> implements TensorParallel<A> {
  /** Token rows kept of a site's tensor: {@link CollectiveSites#SAMPLE_ROWS}. */
  public static final int MAX_ROWS = CollectiveSites.SAMPLE_ROWS;

  private final TensorParallel<A> inner;
  private final Ops<A> ops;
  private final Path file;
  private final Map<String, String> metadata = new LinkedHashMap<>();
  private final List<SafetensorsWriter.Tensor> taken = new ArrayList<>();
  private boolean armed;

  /**
   * @param inner the collectives the calls go on to
   * @param ops the backend whose arenas the tensors live in (copies them to the host)
   * @param dir the dump folder (made at the first write)
   * @param compression the run's codec spec, for the file's name and metadata
   * @param rank this rank's TP rank
   * @param run where and what the run trains, for the metadata
   */
  public SiteDump(TensorParallel<A> inner, Ops<A> ops, Path dir, String compression, int rank, String run) {
    this.inner = java.util.Objects.requireNonNull(inner, "inner");
    this.ops = java.util.Objects.requireNonNull(ops, "ops");
    this.file = dir.resolve(fileName(compression, rank));
    metadata.put("compression", compression);
    metadata.put("rank", String.valueOf(rank));
    metadata.put("run", run);
  }

  /** The file name of rank {@code rank}'s dump of a {@code compression} run. */
  public static String fileName(String compression, int rank) {
    return Checkpoint.codecName(compression) + "-rank" + rank + ".safetensors";
  }

  /** The file this rank writes. */
  public Path file() {
    return file;
  }

  /** While on, the first call at each site copies its tensor (later calls at a site, e.g. micro-batches, do not). */
  public void take(boolean on) {
    armed = on;
  }

  /**
   * Writes the tensors taken during step {@code step} (nothing if none were) and stops taking.
   *
   * @throws UncheckedIOException if the folder or the file cannot be written, naming the file
   */
  public void write(int step) {
    armed = false;
    if (taken.isEmpty()) return;
    metadata.put("step", String.valueOf(step));
    try {
      Files.createDirectories(file.toAbsolutePath().getParent());
      SafetensorsWriter.write(file, taken, metadata);
    } catch (IOException e) {
      throw new UncheckedIOException("--dump-sites: cannot write " + file + ": " + e.getMessage(), e);
    }
    taken.clear();
  }

  private void copy(Site site, CollectiveKind kind, View<A> x, int rows, int cols) {
    String name = site.name();
    if (!armed || metadata.containsKey(name)) return;
    int kept = Math.min(rows, MAX_ROWS);
    taken.add(new SafetensorsWriter.Tensor(name, new int[] {kept, cols}, ops.toHost(x, kept * cols), 0));
    metadata.put(name, kind.label() + " " + rows + "x" + cols);
  }

  @Override
  public void allReduce(Site site, View<A> x, int rows, int cols) {
    copy(site, CollectiveKind.ALL_REDUCE, x, rows, cols);
    inner.allReduce(site, x, rows, cols);
  }

  @Override
  public void allGather(Site site, View<A> out, View<A> shard, int shardRows, int cols) {
    copy(site, CollectiveKind.ALL_GATHER, shard, shardRows, cols);
    inner.allGather(site, out, shard, shardRows, cols);
  }

  @Override
  public void reduceScatter(Site site, View<A> shard, View<A> x, int rows, int cols) {
    copy(site, CollectiveKind.REDUCE_SCATTER, x, rows, cols);
    inner.reduceScatter(site, shard, x, rows, cols);
  }

  @Override
  public void allReduceExact(View<A> x, int n) {
    inner.allReduceExact(x, n);
  }

  @Override
  public long bytesSent() {
    return inner.bytesSent();
  }
}
