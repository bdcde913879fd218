package dev.taco.runtime.model;

import dev.taco.kernels.cuda.DataTransferMode;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.ExecutionPlan;
import dev.taco.kernels.cuda.TaskGraph;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * A GPU rank's training step as one CUDA graph ({@link Ops#replay}), on {@link ExecutionPlan}'s CUDA-graph support
 * (the project's one graph mechanism), and the token ids the step uploads. The first call of a step runs it eagerly
 * (it compiles the kernels, allocates the work space and records which host id arrays it uploads); the second builds a
 * task graph of those uploads ({@link DataTransferMode#EVERY_EXECUTION} host→device transfers, staged through pinned
 * memory) and one step that enqueues the work, captures it and launches it; later calls check the ids and launch the
 * graph. A new key starts over. A step is a hundred-odd kernels and GEMMs: as a graph it costs one launch.
 *
 * <p>A rank of a TP group runs every step as it is (its collectives coordinate the ranks from the host, which a graph
 * cannot hold). Not thread-safe: one thread per rank.
 */
final class StepGraph implements AutoCloseable {
  /** A host id array the step reads through its device copy. */
  private record Upload(int[] ids, int n, int vocab, String name, DeviceBuffer device) {}

  private final DeviceStream device;
  private final boolean graphs;
  private final Map<int[], DeviceBuffer> copies = new IdentityHashMap<>();
  private final List<Upload> uploads = new ArrayList<>();
  private Object key;
  private int runs;
  private ExecutionPlan plan;
  private Runnable capturing;
  private long launches;

  /** @param graphs whether steps become graphs (false: every step runs as it is) */
  StepGraph(DeviceStream device, boolean graphs) {
    this.device = device;
    this.graphs = graphs;
  }

  /**
   * Runs {@code work}, one step for {@code key} (class doc).
   *
   * @throws IllegalStateException if the captured work allocates device memory, waits for the host or uploads an id
   *     array the eager run did not (a bug)
   */
  void replay(Object key, Runnable work) {
    if (!graphs) {
      work.run();
      return;
    }
    if (key != this.key) {
      closePlan();
      this.key = key;
      runs = 0;
      uploads.clear();
    }
    if (runs++ == 0) {
      work.run();
      return;
    }
    if (plan == null) plan = build();
    for (Upload u : uploads) checkedIds(u.ids, u.n, u.vocab, u.name);
    capturing = work; // run by the plan's step only while it captures (its first execution)
    try {
      plan.execute();
    } catch (RuntimeException e) {
      if (plan.executions() == 0) closePlan(); // the capture failed: the next call tries again
      throw e;
    } finally {
      capturing = null;
    }
    launches++;
  }

  /** The uploads as transfers, then the step, in a plan that captures them from the rank's stream. */
  private ExecutionPlan build() {
    TaskGraph g = new TaskGraph("training step");
    for (Upload u : uploads) g.transferToDevice(DataTransferMode.EVERY_EXECUTION, u.ids, u.device);
    g.step(TaskGraph.Step.of("step", true, stream -> {
      device.setCapturing(true);
      try {
        capturing.run();
      } finally {
        device.setCapturing(false);
      }
    }));
    return new ExecutionPlan(device.context(), g.snapshot(), device.stream()).withCudaGraph();
  }

  /** How many times {@link #replay} has launched a captured graph. */
  long launches() {
    return launches;
  }

  /**
   * The device copy of {@code n} ids of {@code ids}, checked against {@code [0, V)}: copied now, or while the step is
   * captured by the graph's own transfer before each launch.
   *
   * @throws IllegalArgumentException for too few ids or one outside the vocabulary, naming {@code name}
   */
  DeviceBuffer upload(int[] ids, int n, int V, String name) {
    checkedIds(ids, n, V, name);
    DeviceBuffer d = copies.get(ids);
    if (d == null) {
      d = device.alloc(ids.length);
      copies.put(ids, d);
    }
    if (device.capturing()) {
      if (uploads.stream().noneMatch(u -> u.ids == ids)) {
        throw new IllegalStateException(name + ": a captured step uploads an id array its eager run did not");
      }
      return d;
    }
    if (graphs && runs == 1 && uploads.stream().noneMatch(u -> u.ids == ids)) {
      uploads.add(new Upload(ids, n, V, name, d)); // the eager run: these become the graph's transfers
    }
    device.copyIn(ids, d);
    return d;
  }

  /**
   * The device copy its forward call made of {@code ids}.
   *
   * @throws IllegalStateException if none did
   */
  DeviceBuffer uploaded(int[] ids, String name) {
    DeviceBuffer d = copies.get(ids);
    if (d == null) {
      throw new IllegalStateException(name + ": a backward call before the forward call that uploads its ids");
    }
    return d;
  }

  private static void checkedIds(int[] ids, int n, int V, String name) {
    if (ids.length < n) throw new IllegalArgumentException(name + " has " + ids.length + " ids, needs " + n);
    for (int i = 0; i < n; i++) {
      if (ids[i] < 0 || ids[i] >= V) {
        throw new IllegalArgumentException(name + "[" + i + "] = " + ids[i] + " is outside the vocabulary [0, " + V
            + ")");
      }
    }
  }

  private void closePlan() {
    if (plan != null) plan.close();
    plan = null;
  }

  /** Frees the graph (the arenas belong to the {@link DeviceStream}). */
  @Override
  public void close() {
    closePlan();
  }
}
