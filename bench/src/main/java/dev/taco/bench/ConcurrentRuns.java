package dev.taco.bench;

import dev.taco.runtime.cli.TacoCli;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Several {@code taco} command lines at once in ONE JVM, a thread each (for bench/gpu-fidelity.sh): runs of a small
 * model leave the GPU mostly idle, and separate processes sharing a GPU are time-sliced between their contexts (one
 * context's kernels at a time: measured on the H200, 12 processes took longer than running them one after another),
 * while threads of one process share its primary context, so their streams' kernels overlap. Each run is exactly
 * {@link TacoCli#execute}, with its own {@code --out}.
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.ConcurrentRuns JOBS FILE}: FILE holds one command line per line (arguments
 * separated by spaces, no quoting); at most JOBS run at a time. Exits 0 when every run did, else 1 (naming the
 * failed lines).
 */
public final class ConcurrentRuns {
  private static final Logger LOG = LoggerFactory.getLogger(ConcurrentRuns.class);

  private ConcurrentRuns() {}

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws IOException, InterruptedException {
    if (args.length != 2) {
      System.err.println("usage: ConcurrentRuns JOBS FILE (one taco command line per line)");
      System.exit(2);
    }
    int jobs = Integer.parseInt(args[0]);
    List<String> lines = Files.readAllLines(Path.of(args[1])).stream().map(String::strip)
        .filter(l -> !l.isEmpty() && !l.startsWith("#")).toList();
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, jobs));
    List<Future<Integer>> runs = new ArrayList<>();
    for (String line : lines) {
      runs.add(pool.submit(() -> {
        long t0 = System.nanoTime();
        int rc = TacoCli.execute(line.split(" +"));
        LOG.warn("exit {} after {} s: {}", rc, (System.nanoTime() - t0) / 1_000_000_000L, line);
        return rc;
      }));
    }
    pool.shutdown();
    List<String> failed = new ArrayList<>();
    for (int i = 0; i < runs.size(); i++) {
      try {
        if (runs.get(i).get() != 0) {
          failed.add(lines.get(i));
        }
      } catch (java.util.concurrent.ExecutionException e) {
        LOG.error("run failed: {}", lines.get(i), e.getCause());
        failed.add(lines.get(i));
      }
    }
    if (!failed.isEmpty()) {
      System.err.println("FAIL " + failed.size() + " of " + lines.size() + " runs: " + failed);
      System.exit(1);
    }
    System.out.println(lines.size() + " runs done");
  }
}
