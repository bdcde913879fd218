/**
 * CPU execution of kernels (DESIGN §5, issue C part 4). {@code @Parallel} kernels are plain Java methods: calling
 * them runs the loop sequentially with exactly Java's results; {@link dev.taco.kernels.cpu.ParallelKernels} gives the
 * same kernel running its {@code @Parallel} loops across cores (a javac-compiled copy of the class whose loops call
 * {@link dev.taco.kernels.cpu.ParallelExecutor#split}), with the same results. SIMT kernels ({@link dev.taco.kernels.KernelContext}) run
 * on {@link dev.taco.kernels.cpu.SimtEmulator}: one virtual thread per GPU thread of a block, real barriers and
 * per-warp shuffle exchanges; slow, exact, for tests.
 */
package dev.taco.kernels.cpu;
