package dev.taco.kernels.cuda;

import dev.taco.kernels.cuda.ImmutableTaskGraph.Custom;
import dev.taco.kernels.cuda.ImmutableTaskGraph.Kernel;
import dev.taco.kernels.cuda.ImmutableTaskGraph.Node;
import dev.taco.kernels.cuda.ImmutableTaskGraph.ToDevice;
import dev.taco.kernels.cuda.ImmutableTaskGraph.ToHost;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs an {@link ImmutableTaskGraph} on one GPU (TornadoVM's {@code TornadoExecutionPlan}): it holds the CUDA context
 * the graph runs in (given at construction, closed by its owner) and owns one stream per lane, the events, the pinned
 * staging buffers, the grids ({@link #withGridScheduler}) and, with {@link #withCudaGraph()}, the captured CUDA graph.
 *
 * <pre>{@code
 * try (ExecutionPlan plan = new ExecutionPlan(ctx, graph).withGridScheduler(grids).withCudaGraph()) {
 *   for (int step = 0; step < steps; step++) {
 *     plan.execute();               // step 0 captures and launches, later steps replay one cuGraphLaunch
 *   }
 * }
 * }</pre>
 *
 * <h2>Executions</h2>
 * The first execution prepares: it compiles the Java kernels ({@link CudaContext#kernel}), reads the grids, allocates
 * the staging buffers and events. {@link #execute()} copies the host arrays of due host→device transfers into their
 * staging buffers, enqueues everything on its lanes ({@link LaneSchedule}: a fork from lane 0, cross-lane events
 * only where needed, a join back into lane 0), waits once ({@code cuStreamSynchronize} of lane 0) and copies the
 * results of due device→host transfers into their arrays. {@link #enqueue()} enqueues without any host
 * synchronisation, for use inside a longer asynchronous sequence on {@link #lane(int) lane 0}: the execution starts
 * after the work enqueued there before it and the work enqueued there after it starts when the execution is done.
 * {@link DataTransferMode#FIRST_EXECUTION} transfers run at the first execution only.
 *
 * <h2>CUDA graphs</h2>
 * With {@link #withCudaGraph()} the first execution captures the whole graph from lane 0
 * ({@code cuStreamBeginCapture_v2}; the other lanes join through the fork event and are joined back before
 * {@code cuStreamEndCapture}), instantiates it ({@code cuGraphInstantiateWithFlags}) and launches it; every execution
 * is then one {@code cuGraphLaunch} on lane 0, with the kernel arguments and step work of the capture. Host transfers
 * stay correct: the captured copies read and write the pinned staging buffers, which {@code execute()} fills before
 * the launch and reads after the wait. {@code FIRST_EXECUTION} host→device transfers are not captured: they run once,
 * on lane 0, before the capture (so they may not run {@link TaskGraph#after after} another node).
 * {@code withCudaGraph()} refuses a graph with a step that is not {@link TaskGraph.Step#capturable() capturable} or
 * a {@code FIRST_EXECUTION} device→host transfer. Per-task times are not recorded under capture.
 *
 * <p>Not thread-safe: use a plan from one thread at a time (a THREAD_LOCAL capture must begin and end on one thread).
 *
 * <p>Reference: TornadoVM {@code TornadoExecutionPlan} ({@code execute}, {@code withGridScheduler}); CUDA Driver API
 * {@code cuStreamBeginCapture_v2}, {@code cuStreamEndCapture}, {@code cuGraphInstantiateWithFlags},
 * {@code cuGraphLaunch}, {@code cuEventRecord}, {@code cuStreamWaitEvent}, {@code cuEventElapsedTime_v2},
 * {@code cuStreamSynchronize}; CUDA C++ Programming Guide, "Stream Capture" (cross-stream dependencies).
 */
public final class ExecutionPlan implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutionPlan.class);
  /** Dynamic shared memory a kernel gets without opting in ({@code CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES}). */
  private static final int DEFAULT_SHARED_BYTES = 48 << 10;

  private final CudaContext ctx;
  private final ImmutableTaskGraph graph;
  private final List<Node> nodes;
  private final CudaStream[] lanes;
  /** Lanes {@code 0 .. borrowed-1} are the caller's streams: not closed here. */
  private final int borrowed;
  private final List<AutoCloseable> resources = new ArrayList<>();
  private GridScheduler scheduler = new GridScheduler();
  private CudaGraph.CaptureMode captureMode;

  private boolean prepared;
  private CudaFunction[] functions;
  private WorkerGrid[] grids;
  private KernelArgs[] args;
  private PinnedBuffer[] staging;
  private CudaEvent[] done;
  private CudaEvent[] start;
  private CudaEvent[] end;
  private CudaEvent fork;
  private CudaGraph cudaGraph;

  private long executions;
  private long launches;
  private boolean pending;
  private boolean closed;

  /**
   * Creates the plan's streams, one per lane ({@code cuStreamCreate(CU_STREAM_NON_BLOCKING)}).
   *
   * @param ctx   the context every buffer and prebuilt kernel of the graph belongs to
   * @param graph the graph
   * @throws IllegalArgumentException if a buffer or prebuilt kernel of the graph belongs to another context
   * @throws CudaException            on a driver error
   */
  public ExecutionPlan(CudaContext ctx, ImmutableTaskGraph graph) {
    this(ctx, graph, new CudaStream[0]);
  }

  /**
   * A plan whose first lanes are the caller's streams, borrowed (not closed by the plan): work the caller enqueues on
   * {@code streams[0]} before {@link #enqueue()} runs before the graph, and work it enqueues there after runs after,
   * so several plans that share lane streams (the collectives of one rank, say) run in the order they were enqueued.
   * Lanes beyond {@code streams.length} get streams of their own.
   *
   * @param streams streams of {@code ctx} for lanes {@code 0 .. streams.length-1}
   * @throws IllegalArgumentException for more streams than lanes, a stream of another context, or as above
   * @throws CudaException            on a driver error
   */
  public ExecutionPlan(CudaContext ctx, ImmutableTaskGraph graph, CudaStream... streams) {
    this.ctx = Objects.requireNonNull(ctx, "ctx");
    this.graph = Objects.requireNonNull(graph, "graph");
    this.nodes = graph.nodes();
    for (Node n : nodes) {
      checkContext(n);
    }
    lanes = new CudaStream[Math.max(graph.lanes(), streams.length)];
    borrowed = streams.length;
    for (CudaStream st : streams) {
      if (Objects.requireNonNull(st, "stream").context() != ctx) {
        throw new IllegalArgumentException("task graph '" + graph.name() + "': a lane stream of another context");
      }
    }
    try {
      for (int l = 0; l < lanes.length; l++) {
        lanes[l] = l < streams.length ? streams[l] : ctx.createStream();
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  private void checkContext(Node n) {
    List<CudaContext> used = new ArrayList<>();
    switch (n.op()) {
      case ToDevice t -> used.add(t.dst().context());
      case ToHost t -> used.add(t.src().context());
      case Kernel k -> {
        if (k.prebuilt() != null) {
          used.add(k.prebuilt().context());
        }
        k.args().stream().filter(a -> a instanceof DeviceBuffer).forEach(a -> used.add(((DeviceBuffer) a).context()));
      }
      case Custom c -> {}
    }
    for (CudaContext c : used) {
      if (c != ctx) {
        throw new IllegalArgumentException("task graph '" + graph.name() + "': node '" + n.name() + "' uses a buffer "
            + "or kernel of another CUDA context than the plan's " + ctx);
      }
    }
  }

  /**
   * Sets the grids of the kernel tasks (they override those given with {@link TaskGraph#grid}).
   *
   * @param grids task name → grid; read at the first execution
   * @return this plan
   * @throws IllegalStateException after the first execution
   */
  public ExecutionPlan withGridScheduler(GridScheduler grids) {
    checkNotStarted("withGridScheduler");
    this.scheduler = Objects.requireNonNull(grids, "grids");
    return this;
  }

  /**
   * {@link #withCudaGraph(CudaGraph.CaptureMode)} in {@link CudaGraph.CaptureMode#THREAD_LOCAL} mode, which lets other
   * threads (other ranks' plans) go on meanwhile.
   *
   * @return this plan
   * @throws IllegalStateException as {@link #withCudaGraph(CudaGraph.CaptureMode)}
   */
  public ExecutionPlan withCudaGraph() {
    return withCudaGraph(CudaGraph.CaptureMode.THREAD_LOCAL);
  }

  /**
   * Captures the graph into a CUDA graph at the first execution and replays it afterwards (class doc).
   *
   * @param mode the capture mode
   * @return this plan
   * @throws IllegalStateException after the first execution, or if the graph cannot be captured: a step that is not
   *                               capturable, a {@code FIRST_EXECUTION} device→host transfer, or a
   *                               {@code FIRST_EXECUTION} host→device transfer that runs after another node
   */
  public ExecutionPlan withCudaGraph(CudaGraph.CaptureMode mode) {
    checkNotStarted("withCudaGraph");
    Objects.requireNonNull(mode, "mode");
    for (Node n : nodes) {
      String why = switch (n.op()) {
        case Custom c when !c.step().capturable() -> "step '" + n.name() + "' is not capturable (Step.capturable() is "
            + "false: it coordinates host threads or runs host code at every execution)";
        case ToHost t when t.mode() == DataTransferMode.FIRST_EXECUTION -> "the FIRST_EXECUTION device→host transfer '"
            + n.name() + "' would be replayed at every execution (make it EVERY_EXECUTION)";
        case ToDevice t when t.mode() == DataTransferMode.FIRST_EXECUTION && !n.after().isEmpty() ->
          "the FIRST_EXECUTION host→device transfer '" + n.name() + "' runs once before the captured graph, so it "
              + "cannot run after " + n.after();
        default -> null;
      };
      if (why != null) {
        throw new IllegalStateException("task graph '" + graph.name() + "' cannot be captured into a CUDA graph: "
            + why);
      }
    }
    this.captureMode = mode;
    return this;
  }

  private void checkNotStarted(String what) {
    checkOpen();
    if (prepared) {
      throw new IllegalStateException(what + " must come before the first execution of the plan of '" + graph.name()
          + "'");
    }
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("execution plan of '" + graph.name() + "' is closed");
    }
  }

  /** @return the graph */
  public ImmutableTaskGraph graph() {
    return graph;
  }

  /**
   * @param lane 0 to {@link ImmutableTaskGraph#lanes()} − 1
   * @return the lane's stream (lane 0: executions begin and end on it)
   * @throws IllegalStateException after {@link #close()}
   */
  public CudaStream lane(int lane) {
    checkOpen();
    return lanes[Objects.checkIndex(lane, lanes.length)];
  }

  /** @return the number of executions so far ({@link #execute()} and {@link #enqueue()}) */
  public long executions() {
    return executions;
  }

  /**
   * @return the launches the plan itself has issued: one {@code cuLaunchKernel} per kernel task per eager execution,
   *     one {@code cuGraphLaunch} per execution under CUDA-graph replay (launches made by steps not counted)
   */
  public long launches() {
    return launches;
  }

  /**
   * @return the number of nodes of the captured CUDA graph ({@code cuGraphGetNodes})
   * @throws IllegalStateException if no CUDA graph has been captured
   */
  public long cudaGraphNodes() {
    checkOpen();
    if (cudaGraph == null) {
      throw new IllegalStateException("execution plan of '" + graph.name() + "' has not captured a CUDA graph");
    }
    return cudaGraph.nodeCount();
  }

  // ------------------------------------------------------------------ executions

  /**
   * Runs the graph once and waits for it (class doc): due host arrays → staging, everything enqueued, one wait on
   * lane 0, staging → due host arrays. Waits first for earlier {@link #enqueue()}d executions if host→device transfers
   * are due (their staging buffers are about to be refilled).
   *
   * @throws IllegalStateException    if closed, if a kernel task has no grid, or if a kernel's CUDA C is not at hand
   * @throws IllegalArgumentException for a grid of more threads per block than the device allows
   * @throws CudaException            from any driver call, including errors of the kernels themselves
   * @throws NvrtcException           if a kernel does not compile
   */
  public void execute() {
    boolean first = begin();
    if (pending && nodes.stream().anyMatch(n -> n.op() instanceof ToDevice && n.runs(first))) {
      lanes[0].synchronize();
    }
    stageIn(first);
    run(first);
    lanes[0].synchronize();
    pending = false;
    for (int i = 0; i < nodes.size(); i++) {
      if (nodes.get(i).op() instanceof ToHost t && nodes.get(i).runs(first)) {
        staging[i].read(0, t.host());
      }
    }
    executions++;
  }

  /**
   * Enqueues the graph once without any host synchronisation (class doc). The data of a graph run this way stays on
   * the device: device→host transfers need {@link #execute()}, and so do host→device transfers after the first
   * execution (the previous execution may still read their staging buffers).
   *
   * @throws IllegalStateException if a device→host transfer is due, or a host→device transfer after the first
   *                               execution; otherwise as {@link #execute()}
   * @throws CudaException         from any driver call
   */
  public void enqueue() {
    checkOpen();
    boolean first = executions == 0;
    for (Node n : nodes) {
      if (n.runs(first) && (n.op() instanceof ToHost || (n.op() instanceof ToDevice && !first))) {
        throw new IllegalStateException("enqueue() cannot run '" + n.name() + "' of graph '" + graph.name() + "': "
            + "transfers between host arrays and the device need execute() (enqueue() stages inputs only at the "
            + "first execution)");
      }
    }
    begin();
    stageIn(first);
    run(first);
    pending = true;
    executions++;
  }

  private boolean begin() {
    checkOpen();
    if (!prepared) {
      prepare();
    }
    ctx.makeCurrent();
    return executions == 0;
  }

  private void stageIn(boolean first) {
    for (int i = 0; i < nodes.size(); i++) {
      if (nodes.get(i).op() instanceof ToDevice t && nodes.get(i).runs(first)) {
        staging[i].write(0, t.host());
      }
    }
  }

  private void run(boolean first) {
    if (captureMode == null) {
      enqueueNodes(graph.schedule(first), first, true);
      return;
    }
    if (cudaGraph == null) {
      if (first) {
        for (int i = 0; i < nodes.size(); i++) {
          if (nodes.get(i).op() instanceof ToDevice t && t.mode() == DataTransferMode.FIRST_EXECUTION) {
            toDevice(i, t, lanes[0]); // once, before the capture (class doc)
          }
        }
      }
      capture(first);
    }
    cudaGraph.launch(lanes[0]);
    launches++;
  }

  private void capture(boolean first) {
    CudaStream home = lanes[0];
    home.beginCapture(captureMode);
    CudaGraph g;
    try {
      enqueueNodes(graph.schedule(false), first, false);
      g = home.endCapture();
    } catch (RuntimeException e) {
      try {
        if (home.isCapturing()) {
          home.endCapture().close();
        }
      } catch (RuntimeException again) {
        e.addSuppressed(again);
      }
      throw e;
    }
    try {
      g.instantiate();
    } catch (RuntimeException e) {
      g.close();
      throw e;
    }
    cudaGraph = g;
    LOG.info("task graph '{}': captured {} nodes on {} lane(s) into a CUDA graph", graph.name(), g.nodeCount(),
        lanes.length);
  }

  /** Enqueues a schedule; {@code eager}: timing events around tasks and steps, launches counted. */
  private void enqueueNodes(LaneSchedule s, boolean first, boolean eager) {
    if (!s.forked().isEmpty()) {
      fork.record(lanes[0]);
      for (int l : s.forked()) {
        lanes[l].waitEvent(fork);
      }
    }
    for (LaneSchedule.Entry e : s.entries()) {
      int i = e.node();
      Node n = nodes.get(i);
      CudaStream st = lanes[n.lane()];
      for (int w : e.waits()) {
        st.waitEvent(done[w]);
      }
      boolean timed = eager && start[i] != null;
      if (timed) {
        start[i].record(st);
      }
      switch (n.op()) {
        case ToDevice t -> toDevice(i, t, st);
        case ToHost t -> t.src().copyToAsync(staging[i], 0, 0, HostArrays.byteSize(t.host()), st);
        case Kernel k -> {
          WorkerGrid g = grids[i];
          functions[i].launch(g.blocks(), g.threads(), g.sharedBytes(), st, args[i]);
          if (eager) {
            launches++;
          }
        }
        case Custom c -> c.step().enqueue(st, first);
      }
      if (timed) {
        end[i].record(st);
      }
      if (e.record()) {
        done[i].record(st);
      }
    }
    for (int j : s.joins()) {
      lanes[0].waitEvent(done[j]);
    }
  }

  private void toDevice(int i, ToDevice t, CudaStream st) {
    t.dst().copyFromAsync(staging[i], 0, 0, HostArrays.byteSize(t.host()), st);
  }

  private void prepare() {
    int n = nodes.size();
    Map<String, WorkerGrid> given = scheduler.grids();
    for (String task : given.keySet()) {
      if (!graph.nodeNames().contains(task) || !(nodes.get(graph.indexOf(task)).op() instanceof Kernel)) {
        throw new IllegalStateException("the GridScheduler names '" + task + "', which is no kernel task of graph '"
            + graph.name() + "'");
      }
    }
    functions = new CudaFunction[n];
    grids = new WorkerGrid[n];
    args = new KernelArgs[n];
    staging = new PinnedBuffer[n];
    done = new CudaEvent[n];
    start = new CudaEvent[n];
    end = new CudaEvent[n];
    Set<Integer> recorded = new TreeSet<>(graph.schedule(true).recorded());
    recorded.addAll(graph.schedule(false).recorded());
    try {
      for (int i = 0; i < n; i++) {
        Node node = nodes.get(i);
        switch (node.op()) {
          case ToDevice t -> staging[i] = track(ctx.allocPinned(HostArrays.byteSize(t.host())));
          case ToHost t -> staging[i] = track(ctx.allocPinned(HostArrays.byteSize(t.host())));
          case Kernel k -> {
            grids[i] = grid(node.name(), k, given);
            functions[i] = k.prebuilt() != null ? k.prebuilt() : ctx.kernel(k.request());
            if (grids[i].sharedBytes() > DEFAULT_SHARED_BYTES) {
              functions[i].setMaxDynamicSharedBytes(grids[i].sharedBytes());
            }
            args[i] = new KernelArgs(k.args().toArray());
          }
          case Custom c -> {}
        }
        if ((node.op() instanceof Kernel || node.op() instanceof Custom) && captureMode == null) {
          start[i] = track(ctx.createEvent());
          end[i] = track(ctx.createEvent());
        }
        if (recorded.contains(i)) {
          done[i] = track(ctx.createSyncEvent());
        }
      }
      if (lanes.length > 1) {
        fork = track(ctx.createSyncEvent());
      }
    } catch (RuntimeException e) {
      closeAll(resources, e);
      resources.clear();
      throw e;
    }
    prepared = true;
    LOG.debug("execution plan of {} prepared{}", graph, captureMode == null ? "" : " for " + captureMode + " capture");
  }

  private WorkerGrid grid(String task, Kernel k, Map<String, WorkerGrid> given) {
    WorkerGrid g = given.getOrDefault(task, k.grid());
    if (g == null) {
      throw new IllegalStateException("task '" + task + "' of graph '" + graph.name() + "' has no grid: give one with "
          + "TaskGraph.grid(...) after the task or GridScheduler.setWorkerGrid(\"" + task + "\", ...)");
    }
    k.checkGrid(task, g);
    if (g.threads().volume() > ctx.maxThreadsPerBlock()) {
      throw new IllegalArgumentException("task '" + task + "': " + g + " has more than " + ctx.maxThreadsPerBlock()
          + " threads per block");
    }
    return g;
  }

  private <T extends AutoCloseable> T track(T resource) {
    resources.add(resource);
    return resource;
  }

  // ------------------------------------------------------------------ timing

  /**
   * Device time of a kernel task or step in the last execution, from the timing events recorded around it.
   *
   * @param taskName a kernel task's or step's name
   * @return milliseconds (resolution about 0.5 µs)
   * @throws IllegalStateException    before the first execution, under CUDA-graph replay (no per-task events), or
   *                                  closed
   * @throws IllegalArgumentException for an unknown name or a transfer
   * @throws CudaException            {@code CUDA_ERROR_NOT_READY} after {@link #enqueue()} until lane 0 has finished
   */
  public float taskMillis(String taskName) {
    checkOpen();
    int i = graph.indexOf(taskName);
    if (captureMode != null) {
      throw new IllegalStateException("per-task times are not recorded under CUDA-graph replay (plan of '"
          + graph.name() + "')");
    }
    if (executions == 0) {
      throw new IllegalStateException("the plan of '" + graph.name() + "' has not been executed");
    }
    if (start[i] == null) {
      throw new IllegalArgumentException("'" + taskName + "' is a transfer: only kernel tasks and steps are timed");
    }
    return start[i].elapsedMillisTo(end[i]);
  }

  /**
   * @return kernel task or step name → device milliseconds of the last execution, in graph order
   * @throws IllegalStateException as {@link #taskMillis(String)}
   */
  public Map<String, Float> taskMillis() {
    Map<String, Float> m = new LinkedHashMap<>();
    for (Node n : nodes) {
      if (n.op() instanceof Kernel || n.op() instanceof Custom) {
        m.put(n.name(), taskMillis(n.name()));
      }
    }
    return Collections.unmodifiableMap(m);
  }

  // ------------------------------------------------------------------ close

  /**
   * Waits for enqueued executions, then frees the CUDA graph, the events, the staging buffers and the streams (not
   * the device buffers or kernels, which the caller and the context own). Idempotent. Close plans before their
   * context.
   *
   * @throws CudaException on a driver error (everything is still freed that can be)
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    List<AutoCloseable> all = new ArrayList<>();
    if (cudaGraph != null) {
      all.add(cudaGraph);
    }
    all.addAll(resources);
    for (int l = borrowed; l < lanes.length; l++) {
      if (lanes[l] != null) {
        all.add(lanes[l]);
      }
    }
    RuntimeException failure = null;
    if (pending) {
      try {
        lanes[0].synchronize();
      } catch (RuntimeException e) {
        failure = e;
      }
    }
    failure = closeAll(all, failure);
    resources.clear();
    if (failure != null) {
      throw failure;
    }
  }

  /** Closes every resource, keeping the first failure (others suppressed); returns it. */
  private static RuntimeException closeAll(List<AutoCloseable> all, RuntimeException failure) {
    for (AutoCloseable c : all) {
      try {
        c.close();
      } catch (Exception e) {
        RuntimeException r = e instanceof RuntimeException re ? re : new IllegalStateException(e);
        if (failure == null) {
          failure = r;
        } else {
          failure.addSuppressed(r);
        }
      }
    }
    return failure;
  }
}
