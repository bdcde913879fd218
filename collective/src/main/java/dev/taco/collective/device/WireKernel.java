package dev.taco.collective.device;

import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaFunction;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;

/**
 * The kernel that stands for one wire phase of an emulated link ({@link EmulatedTransport}): it copies this rank's
 * payload slots into the slots the peers' payloads would land in (at least {@link #COPY_BLOCKS} blocks share the copy),
 * then holds {@code blocks} thread blocks (the SMs NCCL's kernels would occupy on that link) until the phase's time
 * has passed, read from device memory (so a captured graph follows a changed link) and measured by the global
 * nanosecond timer ({@code %globaltimer}, PTX ISA "Special Registers") from each block's start. A block that starts
 * late, behind compute kernels holding the SMs, ends late: the contention a real collective meets.
 *
 * <p>Hand-written CUDA C (the timer has no Java form in the kernel language), compiled by NVRTC at first use.
 */
final class WireKernel {
  /** Threads per block: enough to stream a slot at copy speed on a few SMs. */
  static final int THREADS = 512;

  /**
   * Blocks that share the copy: the copy of slots of 16 MiB on the 2 blocks of a slow link's profile took longer
   * than the phase itself (3.0 ms against 2.4 on an H100), so the copy is spread over this many blocks, of which only
   * the profile's hold the stream to the end (on a slow link, received data lands without the SMs: NCCL's proxy and
   * the NIC move it).
   */
  static final int COPY_BLOCKS = 32;

  private static final String SOURCE = """
      // one wire phase of an emulated link: copy the peers' slots, then hold the stream until *ns has passed
      extern "C" __global__ void wire(const uint4* src, long long srcStride, uint4* dst, long long slot, int world,
                                      int me, const unsigned long long* ns, int holders) {
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        long long n = slot / 16, step = (long long) gridDim.x * blockDim.x;
        for (int q = 0; q < world; q++) {
          if (q == me) continue;
          const uint4* s = src + srcStride / 16 * q;
          uint4* d = dst + n * q;
          for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) d[i] = s[i];
        }
        if (blockIdx.x >= holders) return; // a copy block only
        unsigned long long wait = *ns;
        do {
          asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        } while (now - start < wait);
      }
      """;

  private final CudaFunction function;

  /**
   * The kernel on {@code ctx}: compiled (NVRTC, through the PTX cache) and loaded once per context.
   *
   * @throws dev.taco.kernels.cuda.NvrtcException or {@link dev.taco.kernels.cuda.CudaException} if it cannot be
   *     compiled or loaded
   */
  WireKernel(CudaContext ctx) {
    this.function = ctx.function(SOURCE, "wire.cu", "wire");
  }

  /**
   * Enqueues one phase on {@code stream}: slot {@code q != me} of {@code dst} ({@code world} slots of {@code slotBytes})
   * receives {@code src}'s slot {@code q} ({@code srcStride = slotBytes}, an all-to-all) or its first slot
   * ({@code srcStride = 0}, an all-gather), on {@code blocks} blocks (0: no kernel at all, an infinitely fast link),
   * which then wait until the time at {@code nanos} (one unsigned 64-bit count) has passed since they started.
   *
   * @throws IllegalArgumentException for a slot not a multiple of 16 bytes
   */
  void enqueue(DeviceBuffer src, long srcStride, DeviceBuffer dst, long slotBytes, int world, int me,
      DeviceBuffer nanos, int blocks, CudaStream stream) {
    if (slotBytes % 16 != 0 || srcStride % 16 != 0) {
      throw new IllegalArgumentException("wire slots are 16-byte multiples, got " + slotBytes + " and " + srcStride);
    }
    if (blocks == 0) return;
    function.launch(Dim3.of(Math.max(blocks, COPY_BLOCKS)), Dim3.of(THREADS), 0, stream, src, srcStride, dst,
        slotBytes, world, me, nanos, blocks);
  }
}
