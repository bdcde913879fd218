package dev.taco.kernels.cuda;

import dev.taco.kernels.compiler.KernelRequest;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A frozen {@link TaskGraph} (TornadoVM's {@code ImmutableTaskGraph}), made by {@link TaskGraph#snapshot()}: its nodes,
 * their lanes and dependencies can no longer change (the builder may go on and make another snapshot). Run it
 * through an {@link ExecutionPlan}, which owns the grids, the streams, the events and the staging buffers; several
 * plans may run one graph. Holds no CUDA resources.
 */
public final class ImmutableTaskGraph {
  /**
   * One node of a graph.
   *
   * @param name  unique in the graph (transfers: {@code toDevice<k>} / {@code toHost<k>}, k counting from 0)
   * @param lane  the lane (stream) it runs on
   * @param after names of earlier nodes it runs after
   * @param op    what it does
   */
  record Node(String name, int lane, List<String> after, Op op) {
    Node {
      after = List.copyOf(after);
    }

    /** @return whether the node runs in the first ({@code first}) or a later execution */
    boolean runs(boolean first) {
      return first || switch (op) {
        case ToDevice t -> t.mode() == DataTransferMode.EVERY_EXECUTION;
        case ToHost t -> t.mode() == DataTransferMode.EVERY_EXECUTION;
        default -> true;
      };
    }
  }

  /** What a node does. */
  sealed interface Op permits ToDevice, ToHost, Kernel, Custom {}

  /** Host array → start of {@code dst}, staged through pinned memory. */
  record ToDevice(DataTransferMode mode, Object host, DeviceBuffer dst) implements Op {}

  /** Start of {@code src} → host array, staged through pinned memory. */
  record ToHost(DataTransferMode mode, DeviceBuffer src, Object host) implements Op {}

  /**
   * A kernel launch: a Java kernel ({@code request}) or a prebuilt function ({@code prebuilt}), exactly one non-null.
   *
   * @param args launch arguments in entry-point order ({@link KernelArgs} types)
   * @param grid the grid given at creation, or null (then the plan's {@link GridScheduler} must have one)
   */
  record Kernel(KernelRequest request, CudaFunction prebuilt, List<Object> args, WorkerGrid grid) implements Op {
    Kernel {
      args = List.copyOf(args);
    }

    /**
     * Refuses a grid with y or z above 1 for a kernel translated from Java: its code indexes with x only, so every
     * iteration would run y·z times.
     *
     * @throws IllegalArgumentException naming the task and the grid
     */
    void checkGrid(String task, WorkerGrid g) {
      if (request != null && (g.blocks().y() * g.blocks().z() != 1 || g.threads().y() * g.threads().z() != 1)) {
        throw new IllegalArgumentException("task '" + task + "': " + g + " has y or z above 1, but a kernel translated"
            + " from Java indexes with x only (flatten the grid: blocks and threads as Dim3.of(n))");
      }
    }
  }

  /** A custom step (collective). */
  record Custom(TaskGraph.Step step) implements Op {}

  private final String name;
  private final List<Node> nodes;
  private final Map<String, Integer> index = new HashMap<>();
  private final int lanes;
  private final LaneSchedule firstSchedule;
  private final LaneSchedule laterSchedule;

  ImmutableTaskGraph(String name, List<Node> nodes) {
    this.name = name;
    this.nodes = List.copyOf(nodes);
    for (int i = 0; i < this.nodes.size(); i++) {
      index.put(this.nodes.get(i).name(), i);
    }
    this.lanes = this.nodes.stream().mapToInt(Node::lane).max().orElse(0) + 1;
    this.firstSchedule = LaneSchedule.of(this.nodes, index, lanes, true);
    this.laterSchedule = LaneSchedule.of(this.nodes, index, lanes, false);
  }

  /** @return the graph's name */
  public String name() {
    return name;
  }

  /** @return the number of lanes (streams) a plan of this graph uses: the highest lane used plus one */
  public int lanes() {
    return lanes;
  }

  /** @return every node's name, in insertion order */
  public List<String> nodeNames() {
    return nodes.stream().map(Node::name).toList();
  }

  /**
   * @return the Java kernels of the graph's tasks, in insertion order (e.g. for a class's {@code kernels()} that
   *     {@link KernelSources#main} pre-translates)
   */
  public List<KernelRequest> kernelRequests() {
    return nodes.stream().map(Node::op).filter(o -> o instanceof Kernel k && k.request() != null)
        .map(o -> ((Kernel) o).request()).toList();
  }

  /**
   * @param taskName a kernel task's name
   * @return its Java kernel
   * @throws IllegalArgumentException if there is no such Java kernel task (or it is a prebuilt one)
   */
  public KernelRequest kernelRequest(String taskName) {
    Integer i = index.get(taskName);
    if (i == null || !(nodes.get(i).op() instanceof Kernel k) || k.request() == null) {
      throw new IllegalArgumentException("no Java kernel task '" + taskName + "' in graph '" + name + "'");
    }
    return k.request();
  }

  /**
   * @param taskName a kernel task's name
   * @return its launch arguments (kernel parameters without the {@code KernelContext} and the {@code @Constant}s)
   * @throws IllegalArgumentException if there is no such kernel task
   */
  public List<Object> launchArguments(String taskName) {
    Integer i = index.get(taskName);
    if (i == null || !(nodes.get(i).op() instanceof Kernel k)) {
      throw new IllegalArgumentException("no kernel task '" + taskName + "' in graph '" + name + "'");
    }
    return k.args();
  }

  List<Node> nodes() {
    return nodes;
  }

  /**
   * @param nodeName a node's name
   * @return its index
   * @throws IllegalArgumentException if there is none
   */
  int indexOf(String nodeName) {
    Integer i = index.get(nodeName);
    if (i == null) {
      throw new IllegalArgumentException("no node '" + nodeName + "' in graph '" + name + "'");
    }
    return i;
  }

  /** @return the schedule of the first execution, or of the later ones (and of a CUDA-graph capture) */
  LaneSchedule schedule(boolean first) {
    return first ? firstSchedule : laterSchedule;
  }

  /** @return e.g. {@code ImmutableTaskGraph[g: fork[1] toDevice0@0 scale@0 wire@1<-scale add@0<-wire join[]]} */
  @Override
  public String toString() {
    return "ImmutableTaskGraph[" + name + ": " + firstSchedule.describe(nodes) + "]";
  }
}
