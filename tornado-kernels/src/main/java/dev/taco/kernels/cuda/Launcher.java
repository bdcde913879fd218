package dev.taco.kernels.cuda;

import dev.taco.kernels.compiler.KernelRequest;
import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * Immediate launches of Java kernels by method reference: the {@link TaskGraph} idiom without a graph, for work whose
 * arguments change from call to call (a training step's layers, a codec's calls).
 *
 * <pre>{@code
 * Launcher kernels = new Launcher(ctx);
 * kernels.on(Dim3.of(blocks), Dim3.of(256), stream).task("gelu", Gelu::geluForward, out, 0, inp, 0, n);
 * }</pre>
 *
 * <p>The values are those of {@link KernelTasks#task(String, TaskFunctions.Task1, Object...)}: one per Java
 * parameter, {@link TaskGraph#KERNEL_CONTEXT} for a SIMT kernel's context, {@code @Constant} values (they specialise
 * the kernel), a {@link DeviceBuffer} (a {@link DeviceBuffer#slice slice} for a view) for each array, boxed primitives
 * of exactly the parameters' types. A mistyped value is refused before anything is launched. The static method a
 * reference names is read once per call site and each specialisation is compiled once ({@link CudaContext#kernel}),
 * so a launch costs the binding of its values and one {@code cuLaunchKernel}.
 *
 * <p>Not thread-safe: one thread at a time.
 */
public final class Launcher {
  private final Function<KernelRequest, CudaFunction> compile;
  /** The kernel a method reference names, by the reference's class (one per call site). */
  private final Map<Class<?>, KernelMethod> methods = new HashMap<>();
  private final Map<KernelRequest, CudaFunction> functions = new HashMap<>();

  /** @param ctx the context the kernels are compiled and loaded in */
  public Launcher(CudaContext ctx) {
    this.compile = Objects.requireNonNull(ctx, "ctx")::kernel;
  }

  /**
   * The launches of the next {@code task}: each launches its kernel at once on {@code grid} blocks of {@code block}
   * threads, enqueued on {@code stream}.
   *
   * @throws IllegalArgumentException (from {@code task}) for a lambda, an overloaded kernel or a mistyped value, naming
   *     the task, the parameter's index and name
   */
  public KernelTasks<Void> on(Dim3 grid, Dim3 block, CudaStream stream) {
    return on(grid, block, 0, stream);
  }

  /** {@link #on(Dim3, Dim3, CudaStream)} with {@code sharedBytes} of dynamic shared memory per block. */
  public KernelTasks<Void> on(Dim3 grid, Dim3 block, int sharedBytes, CudaStream stream) {
    Objects.requireNonNull(grid, "grid");
    Objects.requireNonNull(block, "block");
    return (taskName, kernel, values) -> {
      KernelMethod.Binding b = bind(taskName, kernel, values);
      functions.computeIfAbsent(b.request(), compile).launch(grid, block, sharedBytes, stream,
          b.launchArgs().toArray());
      return null;
    };
  }

  /** The binding of {@code values} to the kernel {@code kernel} names (the method read once per call site). */
  KernelMethod.Binding bind(String taskName, Serializable kernel, Object[] values) {
    Objects.requireNonNull(kernel, "kernel");
    KernelMethod m = methods.get(kernel.getClass());
    if (m == null) {
      m = KernelMethod.of(taskName, kernel);
      methods.put(kernel.getClass(), m);
    }
    return m.bind(taskName, values);
  }
}
