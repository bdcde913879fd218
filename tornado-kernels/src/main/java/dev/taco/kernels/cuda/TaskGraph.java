package dev.taco.kernels.cuda;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A TornadoVM-style task graph on one CUDA stream: host→device transfers, kernel launches and
 * device→host transfers, built once, frozen with {@link #snapshot()}, then run any number of times with
 * {@link #execute()}.
 *
 * <pre>{@code
 * TaskGraph g = new TaskGraph("vadd")
 *     .transferToDevice(DataTransferMode.FIRST_EXECUTION, a, da)      // a: float[] → da
 *     .transferToDevice(DataTransferMode.EVERY_EXECUTION, b, db)
 *     .task("add", vadd, Dim3.cover(n, 256), Dim3.of(256), 0, da, db, dc, n)
 *     .transferToHost(DataTransferMode.EVERY_EXECUTION, dc, c)
 *     .snapshot();
 * g.execute();                          // blocks until c holds the result
 * float ms = g.taskMillis("add");       // device time of the kernel, from events around it
 * }</pre>
 *
 * <p>Transfers stage through pinned buffers allocated at the first execution, so the copies are
 * asynchronous on the graph's stream; {@code execute()} synchronises the stream once at the end and then
 * copies device→host results into the Java arrays. Construction checks what it can without a GPU: host
 * array types, sizes against buffer sizes, kernel argument types, unique task names, that every buffer
 * and function belongs to the same context, that nothing is added after {@code snapshot()} and that
 * {@code execute()} comes after it.
 *
 * <p>Extension point: {@link #step(Step)} adds any {@link Step}, which is handed the graph's stream at
 * execution. A collective (e.g. an NCCL all-reduce on device buffers) is meant to plug in there, after the
 * compress kernel and before the decompress kernel, without the graph knowing about it.
 *
 * <p>Not thread-safe: build and execute from one thread at a time.
 *
 * <p>Reference: TornadoVM {@code TaskGraph}/{@code ImmutableTaskGraph}/{@code DataTransferMode};
 * CUDA Driver API {@code cuMemcpyHtoDAsync_v2}, {@code cuLaunchKernel}, {@code cuEventRecord},
 * {@code cuEventElapsedTime_v2}, {@code cuStreamSynchronize}.
 */
public final class TaskGraph implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(TaskGraph.class);

    /** When a transfer runs. */
    public enum DataTransferMode {
        /** Only at the first {@link #execute()} (read-only inputs, e.g. weights). */
        FIRST_EXECUTION,
        /** At every {@link #execute()}. */
        EVERY_EXECUTION
    }

    /**
     * A custom step enqueued on the graph's stream, in order with the others: the extension point for
     * collectives (NCCL) and any other stream work.
     */
    public interface Step {
        /** @return a name, unique in the graph, used in logs and errors */
        String name();

        /**
         * Enqueues the step's work on {@code stream}; must not block on the host.
         *
         * @param stream the graph's stream
         * @param first  whether this is the graph's first execution
         */
        void enqueue(CudaStream stream, boolean first);
    }

    private sealed interface Node permits ToDevice, Launch, ToHost, Custom {}

    private record ToDevice(DataTransferMode mode, Object host, DeviceBuffer dst) implements Node {}

    private record ToHost(DataTransferMode mode, DeviceBuffer src, Object host) implements Node {}

    private record Custom(Step step) implements Node {}

    private static final class Launch implements Node {
        final String name;
        final CudaFunction function;
        final Dim3 grid;
        final Dim3 block;
        final int sharedBytes;
        final Object[] args;
        KernelArgs packed;
        CudaEvent start;
        CudaEvent end;

        Launch(String name, CudaFunction function, Dim3 grid, Dim3 block, int sharedBytes, Object[] args) {
            this.name = name;
            this.function = function;
            this.grid = grid;
            this.block = block;
            this.sharedBytes = sharedBytes;
            this.args = args;
        }
    }

    private final String name;
    private final List<Node> nodes = new ArrayList<>();
    private final Set<String> names = new HashSet<>();
    private final Map<String, Float> lastTaskMillis = new LinkedHashMap<>();
    private boolean frozen;
    private boolean closed;
    private long executions;
    private CudaContext ctx;
    private CudaStream stream;
    private final List<PinnedBuffer> pinned = new ArrayList<>();
    private PinnedBuffer[] staging; // per node index, for transfers

    /**
     * @param name the graph's name, for logs
     */
    public TaskGraph(String name) {
        this.name = Objects.requireNonNull(name, "name");
    }

    /** @return the graph's name */
    public String name() { return name; }

    private void checkMutable() {
        if (closed) throw new IllegalStateException("task graph '" + name + "' is closed");
        if (frozen) throw new IllegalStateException("task graph '" + name + "' is frozen by snapshot(); build a new one to change it");
    }

    private static void checkFits(Object host, DeviceBuffer buf, String what) {
        long hb = HostArrays.byteSize(host);
        if (hb > buf.bytes()) {
            throw new IllegalArgumentException("mismatched sizes in " + what + ": host array of " + HostArrays.length(host)
                    + " elements (" + hb + " bytes) does not fit device buffer of " + buf.bytes() + " bytes");
        }
        if (hb == 0) throw new IllegalArgumentException("empty host array in " + what);
    }

    /**
     * Adds a host→device copy of the whole array to the start of {@code dst}.
     *
     * @param mode when it runs
     * @param host a {@code float[]}, {@code short[]}, {@code byte[]}, {@code int[]}, {@code long[]} or {@code double[]}
     * @param dst  the destination (at least as large as the array)
     * @return this graph
     * @throws IllegalArgumentException for an unsupported array or mismatched sizes
     * @throws IllegalStateException    after {@link #snapshot()}
     */
    public TaskGraph transferToDevice(DataTransferMode mode, Object host, DeviceBuffer dst) {
        checkMutable();
        Objects.requireNonNull(mode, "mode");
        Objects.requireNonNull(dst, "dst");
        checkFits(host, dst, "transferToDevice");
        nodes.add(new ToDevice(mode, host, dst));
        return this;
    }

    /**
     * Adds a kernel launch, with events recorded before and after it for {@link #taskMillis(String)}.
     *
     * @param taskName    a name unique in the graph
     * @param function    the kernel
     * @param grid        blocks per grid
     * @param block       threads per block
     * @param sharedBytes dynamic shared memory per block, bytes
     * @param args        kernel arguments (see {@link KernelArgs}); packed at {@link #snapshot()}
     * @return this graph
     * @throws IllegalArgumentException for a duplicate name, negative shared size or an unsupported argument
     * @throws IllegalStateException    after {@link #snapshot()}
     */
    public TaskGraph task(String taskName, CudaFunction function, Dim3 grid, Dim3 block, int sharedBytes, Object... args) {
        checkMutable();
        Objects.requireNonNull(function, "function");
        Objects.requireNonNull(grid, "grid");
        Objects.requireNonNull(block, "block");
        if (sharedBytes < 0) throw new IllegalArgumentException("sharedBytes < 0 in task " + taskName);
        for (int i = 0; i < args.length; i++) KernelArgs.check(i, args[i]);
        claimName(taskName);
        nodes.add(new Launch(taskName, function, grid, block, sharedBytes, args.clone()));
        return this;
    }

    /**
     * Adds a device→host copy from the start of {@code src} into the whole array; the array holds the data
     * when {@link #execute()} returns.
     *
     * @param mode when it runs
     * @param src  the source buffer (at least as large as the array)
     * @param host the destination array
     * @return this graph
     * @throws IllegalArgumentException for an unsupported array or mismatched sizes
     * @throws IllegalStateException    after {@link #snapshot()}
     */
    public TaskGraph transferToHost(DataTransferMode mode, DeviceBuffer src, Object host) {
        checkMutable();
        Objects.requireNonNull(mode, "mode");
        Objects.requireNonNull(src, "src");
        checkFits(host, src, "transferToHost");
        nodes.add(new ToHost(mode, src, host));
        return this;
    }

    /**
     * Adds a custom step (the extension point, e.g. for an NCCL collective).
     *
     * @param step the step
     * @return this graph
     * @throws IllegalArgumentException for a duplicate name
     * @throws IllegalStateException    after {@link #snapshot()}
     */
    public TaskGraph step(Step step) {
        checkMutable();
        Objects.requireNonNull(step, "step");
        claimName(step.name());
        nodes.add(new Custom(step));
        return this;
    }

    private void claimName(String n) {
        if (n == null || n.isBlank()) throw new IllegalArgumentException("task name must not be blank");
        if (!names.add(n)) throw new IllegalArgumentException("duplicate task name '" + n + "' in graph '" + name + "'");
    }

    /**
     * Freezes the graph: no more steps; checks that it is not empty and that all buffers and kernels
     * belong to one context; packs kernel arguments. Idempotent.
     *
     * @return this graph
     * @throws IllegalStateException    if empty or closed
     * @throws IllegalArgumentException if buffers or kernels come from different contexts
     */
    public TaskGraph snapshot() {
        if (closed) throw new IllegalStateException("task graph '" + name + "' is closed");
        if (frozen) return this;
        if (nodes.isEmpty()) throw new IllegalStateException("task graph '" + name + "' is empty");
        CudaContext found = null;
        boolean any = false;
        for (Node n : nodes) {
            List<CudaContext> cs = new ArrayList<>();
            switch (n) {
                case ToDevice t -> cs.add(t.dst().context());
                case ToHost t -> cs.add(t.src().context());
                case Launch l -> {
                    cs.add(l.function.context());
                    for (Object a : l.args) if (a instanceof DeviceBuffer b) cs.add(b.context());
                }
                case Custom c -> { }
            }
            for (CudaContext x : cs) {
                if (!any) {
                    found = x;
                    any = true;
                } else if (x != found) {
                    throw new IllegalArgumentException("task graph '" + name + "' mixes buffers or kernels of different CUDA contexts");
                }
            }
        }
        for (Node n : nodes) if (n instanceof Launch l) l.packed = new KernelArgs(l.args);
        this.ctx = found;
        this.frozen = true;
        return this;
    }

    /** @return whether {@link #snapshot()} has been called */
    public boolean isFrozen() { return frozen; }

    /** @return the number of completed {@link #execute()} calls */
    public long executions() { return executions; }

    /**
     * Runs the graph on its stream and waits for it: transfers due in this execution, kernels with events
     * around them, custom steps; then synchronises and copies results into the host arrays.
     *
     * @throws IllegalStateException if {@link #snapshot()} has not been called, or the graph is closed or has
     *                               no CUDA context (only custom steps)
     * @throws CudaException         from any driver call, including errors of the kernels themselves
     */
    public void execute() {
        if (closed) throw new IllegalStateException("task graph '" + name + "' is closed");
        if (!frozen) throw new IllegalStateException("task graph '" + name + "' must be frozen with snapshot() before execute()");
        if (ctx == null) throw new IllegalStateException("task graph '" + name + "' has no CUDA buffer or kernel to take a context from");
        boolean first = executions == 0;
        if (first) prepare();
        ctx.makeCurrent();
        CudaDriver d = ctx.driver();
        for (int i = 0; i < nodes.size(); i++) {
            Node n = nodes.get(i);
            switch (n) {
                case ToDevice t -> {
                    if (first || t.mode() == DataTransferMode.EVERY_EXECUTION) {
                        PinnedBuffer p = staging[i];
                        p.write(0, t.host());
                        t.dst().copyFromAsync(p, 0, 0, HostArrays.byteSize(t.host()), stream);
                    }
                }
                case Launch l -> {
                    l.start.record(stream);
                    l.function.launch(l.grid, l.block, l.sharedBytes, stream, l.packed);
                    l.end.record(stream);
                }
                case ToHost t -> {
                    if (first || t.mode() == DataTransferMode.EVERY_EXECUTION) {
                        t.src().copyToAsync(staging[i], 0, 0, HostArrays.byteSize(t.host()), stream);
                    }
                }
                case Custom c -> c.step().enqueue(stream, first);
            }
        }
        stream.synchronize();
        for (int i = 0; i < nodes.size(); i++) {
            if (nodes.get(i) instanceof ToHost t && (first || t.mode() == DataTransferMode.EVERY_EXECUTION)) {
                staging[i].read(0, t.host());
            }
        }
        lastTaskMillis.clear();
        for (Node n : nodes) {
            if (n instanceof Launch l) lastTaskMillis.put(l.name, d.eventElapsedTime(l.start.handle(), l.end.handle()));
        }
        executions++;
    }

    private void prepare() {
        stream = ctx.createStream();
        staging = new PinnedBuffer[nodes.size()];
        for (int i = 0; i < nodes.size(); i++) {
            switch (nodes.get(i)) {
                case ToDevice t -> staging[i] = pin(HostArrays.byteSize(t.host()));
                case ToHost t -> staging[i] = pin(HostArrays.byteSize(t.host()));
                case Launch l -> {
                    l.start = ctx.createEvent();
                    l.end = ctx.createEvent();
                }
                case Custom c -> { }
            }
        }
        LOG.debug("task graph '{}' prepared: {} steps, {} pinned staging buffers", name, nodes.size(), pinned.size());
    }

    private PinnedBuffer pin(long bytes) {
        PinnedBuffer p = ctx.allocPinned(bytes);
        pinned.add(p);
        return p;
    }

    /**
     * Device time of a kernel in the last execution, from the events recorded around it.
     *
     * @param taskName a task's name
     * @return milliseconds
     * @throws IllegalStateException    before the first execution
     * @throws IllegalArgumentException for an unknown task
     */
    public float taskMillis(String taskName) {
        if (executions == 0) throw new IllegalStateException("task graph '" + name + "' has not been executed");
        Float ms = lastTaskMillis.get(taskName);
        if (ms == null) throw new IllegalArgumentException("no kernel task '" + taskName + "' in graph '" + name + "'");
        return ms;
    }

    /** @return kernel name → device milliseconds of the last execution, in graph order (empty before one) */
    public Map<String, Float> taskMillis() { return Collections.unmodifiableMap(lastTaskMillis); }

    /**
     * @return the graph's stream (created at the first execution)
     * @throws IllegalStateException before the first execution
     */
    public CudaStream stream() {
        if (stream == null) throw new IllegalStateException("task graph '" + name + "' has no stream before its first execution");
        return stream;
    }

    /**
     * Frees the stream, events and pinned staging buffers (not the device buffers or kernels, which the
     * caller owns). Idempotent.
     *
     * @throws CudaException on a driver error
     */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        for (Node n : nodes) {
            if (n instanceof Launch l) {
                if (l.start != null) l.start.close();
                if (l.end != null) l.end.close();
            }
        }
        for (PinnedBuffer p : pinned) p.close();
        pinned.clear();
        if (stream != null) stream.close();
    }
}
