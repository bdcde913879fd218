package dev.taco.kernels.cuda;

/**
 * A kernel that keeps one GPU thread busy for a given time, reading the global nanosecond timer ({@code %globaltimer},
 * PTX ISA "Special Registers"). For measurement and tests: enqueued ahead of timed work it lets the host enqueue all of
 * that work before the GPU reaches it (so events time kernels, not launch latency); enqueued ahead of a collective it
 * makes the collective late (to test a watchdog).
 */
public final class SpinKernel {
  private static final String SOURCE = """
      extern "C" __global__ void spin(unsigned long long ns) {
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do {
          asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        } while (now - start < ns);
      }
      """;

  private final CudaFunction function;

  /**
   * The kernel on {@code ctx}: compiled (NVRTC, through the PTX cache) and loaded once per context.
   *
   * @throws NvrtcException or {@link CudaException} if it cannot be compiled or loaded
   */
  public SpinKernel(CudaContext ctx) {
    this.function = ctx.function(SOURCE, "spin.cu", "spin");
  }

  /**
   * Enqueues a spin of {@code nanos} nanoseconds (one block of one thread) on {@code stream}.
   *
   * @throws CudaException on a launch error
   */
  public void enqueue(CudaStream stream, long nanos) {
    function.launch(Dim3.of(1), Dim3.of(1), 0, stream, nanos);
  }
}
