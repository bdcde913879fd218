/**
 * CPU execution of kernels (docs/design.md §5). {@code @Parallel} kernels are plain Java methods: calling
 * them runs the loop sequentially with exactly Java's results (the CPU's fast paths are the Vector API kernels of
 * {@code dev.taco.kernels.simd} and {@code Gemm}, which use several cores where that pays). SIMT kernels ({@link dev.taco.kernels.KernelContext}) run
 * on {@link dev.taco.kernels.cpu.SimtEmulator}: one virtual thread per GPU thread of a block, real barriers and
 * per-warp shuffle exchanges; slow, exact, for tests.
 */
package dev.taco.kernels.cpu;
