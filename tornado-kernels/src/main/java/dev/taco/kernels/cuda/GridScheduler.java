package dev.taco.kernels.cuda;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The launch shape of each kernel task of an {@link ExecutionPlan}, by task name (TornadoVM's {@code GridScheduler};
 * TornadoVM keys by {@code "graph.task"} since its plans hold several graphs, ours hold one, so the task name does). A
 * grid given here overrides the one given at task creation ({@link TaskGraph#grid}). The plan reads it at its first
 * execution, so the grids of a captured CUDA graph stay those.
 */
public final class GridScheduler {
  private final Map<String, WorkerGrid> grids = new LinkedHashMap<>();

  /** An empty scheduler. */
  public GridScheduler() {}

  /**
   * @param taskName a kernel task's name
   * @param grid     its launch shape
   */
  public GridScheduler(String taskName, WorkerGrid grid) {
    setWorkerGrid(taskName, grid);
  }

  /**
   * Sets (or replaces) a task's grid.
   *
   * @param taskName a kernel task's name
   * @param grid     its launch shape
   * @return this scheduler
   */
  public GridScheduler setWorkerGrid(String taskName, WorkerGrid grid) {
    grids.put(Objects.requireNonNull(taskName, "taskName"), Objects.requireNonNull(grid, "grid"));
    return this;
  }

  /** @return task name → grid, in insertion order (unmodifiable view) */
  public Map<String, WorkerGrid> grids() {
    return Collections.unmodifiableMap(grids);
  }
}
