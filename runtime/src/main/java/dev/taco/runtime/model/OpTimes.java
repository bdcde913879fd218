package dev.taco.runtime.model;

import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A per-step time breakdown of the GPU backend by CUDA events (docs/design.md §6): {@link #ops} and {@link #tp} give an
 * {@link Ops} and a {@link TensorParallel} that record an event on {@link CudaOps#stream()} before and after each
 * operation they forward, and {@link #collect}
 * (after a step) adds each operation's device time to its category: {@code gemm} (linear layers and the LM head, their
 * bias epilogues included, and the MLP's GELU, which the GPU fuses into its GEMMs), {@code attention} (with the QKV
 * projection, which {@link Ops#matmulAttentionForward} runs in the same call), {@code
 * tp_collectives} (the all-reduces' exchanges and waits), {@code compression} (the all-reduces' own kernels: quantise,
 * reduce, dequantise, by the device collectives' per-task events, split off {@code tp_collectives}; 0 at TP = 1, and
 * left inside {@code tp_collectives} where the collectives run as CUDA graphs, NCCL, which record no per-task times),
 * {@code optimizer} (gradient norm and AdamW) and {@code other_kernels}. Events are reused from step to step; the host
 * still waits only where the backend does, and in a TP group after each all-reduce (to read its kernels' times). An interval is the GPU's timeline between two events, so it also holds the
 * GPU's idle time while the host works inside the call: the host-side sums and uploads of {@code crossEntropyForward},
 * {@code squaredNorm} and {@code encoderForward}, and launch gaps. A timed step runs its operations one by one ({@link
 * Ops#replay} does not replay a graph while timing is on: {@link #setEnabled}), so it shows what each operation costs,
 * not what a graph-replayed step costs in all.
 */
public final class OpTimes implements InvocationHandler, AutoCloseable {
  private final CudaOps target;
  private final CudaTensorParallel collectives;
  private final List<CudaEvent> events = new ArrayList<>();
  private final List<String> pending = new ArrayList<>();
  private final List<String> pendingMethods = new ArrayList<>();
  private final Map<String, Double> totals = new LinkedHashMap<>();
  private final Map<String, Double> methods = new LinkedHashMap<>();
  private boolean enabled = true;
  /** Kernel ms of the all-reduces since the last collect (the compression share of tp_collectives); NaN: unknown. */
  private double pendingCompression;
  private int steps;

  private OpTimes(CudaOps target, CudaTensorParallel collectives) {
    this.target = target;
    this.collectives = collectives;
    for (String c : new String[] {"gemm", "attention", "tp_collectives", "compression", "optimizer", "other_kernels"}) {
      totals.put(c, 0.0);
    }
  }

  /** The timer of {@code ops} and its collectives {@code tp}; {@link #ops()} and {@link #tp()} are what the model calls. */
  public static OpTimes of(CudaOps ops, CudaTensorParallel tp) {
    if (ops == null || tp == null) throw new IllegalArgumentException("OpTimes times a backend and its collectives");
    return new OpTimes(ops, tp);
  }

  /** The timed view of the backend, to build the {@link Gpt} on. */
  @SuppressWarnings("unchecked")
  public Ops<DeviceBuffer> ops() {
    return (Ops<DeviceBuffer>) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class}, this);
  }

  /** The timed view of the collectives, to build the {@link Gpt} on. */
  @SuppressWarnings("unchecked")
  public TensorParallel<DeviceBuffer> tp() {
    return (TensorParallel<DeviceBuffer>) Proxy.newProxyInstance(TensorParallel.class.getClassLoader(),
        new Class<?>[] {TensorParallel.class}, this);
  }

  /** The category of an {@link Ops} method, or null for bookkeeping calls that are not timed. */
  static String category(String method) {
    return switch (method) {
      case "matmulForward", "matmulBackward", "matmulGeluForward", "matmulBackwardGelu", "headForward",
          "headBackward" ->
        "gemm";
      case "matmulAttentionForward", "attentionForward", "attentionBackward" -> "attention";
      case "allReduce", "allGather", "reduceScatter", "allReduceExact" -> "tp_collectives";
      case "squaredNorm", "adamw" -> "optimizer";
      case "alloc", "fromHost", "toHost", "copyToDevice", "bytesSent", "replay", "attentionStateSize" -> null;
      default -> "other_kernels";
    };
  }

  /**
   * Whether the following calls are timed (default true). Untimed calls go straight to the backend, {@link
   * Ops#replay} included (so a GPU step may run as one CUDA graph); timed calls never replay a graph, since each
   * operation is bracketed by its own events.
   */
  public void setEnabled(boolean on) {
    enabled = on;
  }

  /** The number of {@link #collect} calls that added something: the steps the totals are over. */
  public int steps() {
    return steps;
  }

  @Override
  public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
    if (enabled && method.getName().equals("replay")) { // timed operation by operation: never as one graph
      ((Runnable) args[1]).run();
      return null;
    }
    Object to = method.getDeclaringClass() == TensorParallel.class ? collectives : target;
    if (!enabled) {
      try {
        return method.invoke(to, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    }
    Class<?> declared = method.getDeclaringClass();
    String cat = declared == Ops.class || declared == TensorParallel.class ? category(method.getName()) : null;
    if (cat != null) event(2 * pending.size()).record(target.stream());
    Object result;
    try {
      result = method.invoke(to, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    } finally {
      if (cat != null) {
        event(2 * pending.size() + 1).record(target.stream());
        pending.add(cat);
        pendingMethods.add(method.getName());
      }
    }
    // after a call that succeeded only: this waits for the stream, whose error must not replace the call's own
    if (method.getName().equals("allReduce")) pendingCompression += collectives.lastKernelMillis();
    return result;
  }

  private CudaEvent event(int i) {
    while (events.size() <= i) events.add(target.context().createEvent());
    return events.get(i);
  }

  /** Waits for the stream and adds the device time of every operation since the last call to its category. */
  public void collect() {
    if (pending.isEmpty()) return;
    events.get(2 * pending.size() - 1).synchronize();
    for (int i = 0; i < pending.size(); i++) {
      double ms = events.get(2 * i).elapsedMillisTo(events.get(2 * i + 1));
      totals.merge(pending.get(i), ms, Double::sum);
      methods.merge(pendingMethods.get(i), ms, Double::sum);
    }
    if (pendingCompression > 0) { // split off the collectives' kernels (they may overlap the exchanges: clamped)
      double tp = 0;
      for (int i = 0; i < pending.size(); i++) {
        if (pending.get(i).equals("tp_collectives")) tp += events.get(2 * i).elapsedMillisTo(events.get(2 * i + 1));
      }
      double c = Math.min(pendingCompression, tp);
      totals.merge("compression", c, Double::sum);
      totals.merge("tp_collectives", -c, Double::sum);
    }
    pendingCompression = 0;
    pending.clear();
    pendingMethods.clear();
    steps++;
  }

  /**
   * Drops what was recorded since the last {@link #collect} without counting it as a step (a timed step whose time
   * is not the step's own: one in which a collective site calibrated on the host, say).
   */
  public void discard() {
    pending.clear();
    pendingMethods.clear();
    pendingCompression = 0;
  }

  /** Milliseconds per category summed over the collected steps (insertion order: the categories above). */
  public Map<String, Double> totals() {
    return new LinkedHashMap<>(totals);
  }

  /** Zeroes the totals and drops what was not collected (e.g. after warm-up steps). */
  public void reset() {
    totals.replaceAll((k, v) -> 0.0);
    methods.clear();
    pending.clear();
    pendingMethods.clear();
    pendingCompression = 0;
    steps = 0;
  }

  /** Milliseconds per {@link Ops} method summed over the collected steps (the finer view behind {@link #totals}). */
  public Map<String, Double> methods() {
    return new LinkedHashMap<>(methods);
  }

  /** Frees the events. */
  @Override
  public void close() {
    for (CudaEvent e : events) e.close();
    events.clear();
  }
}
