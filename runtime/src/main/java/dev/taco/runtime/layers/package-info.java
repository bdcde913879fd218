/**
 * The layers of the GPT-2 style model, each a forward and a backward kernel, written the llm.c way.
 *
 * <p>What this is: one class per layer ({@link dev.taco.runtime.layers.Encoder},
 * {@link dev.taco.runtime.layers.LayerNorm}, {@link dev.taco.runtime.layers.Matmul},
 * {@link dev.taco.runtime.layers.Attention}, {@link dev.taco.runtime.layers.Gelu},
 * {@link dev.taco.runtime.layers.Residual}, {@link dev.taco.runtime.layers.CrossEntropy}), with a
 * {@code public static forward} and {@code backward} over primitive {@code float[]} arrays addressed
 * by explicit offsets, so that all parameters, gradients and activations can live in a few flat
 * buffers. Shapes are in each method's Javadoc.
 *
 * <p>Conventions, shared by every method:
 * <ul>
 *   <li>Arguments: outputs first, then inputs, then the sizes; every array is followed by its offset.</li>
 *   <li>Forward passes overwrite their outputs. Backward passes ADD into their gradient buffers
 *       ({@code +=}): a tensor used twice (the residual stream) sums its gradients for free, and the
 *       caller zeroes gradients once per step.</li>
 *   <li>Sizes and spans are checked once at entry ({@code IllegalArgumentException} naming the
 *       argument); the loops that follow do no checks.</li>
 *   <li>Kernel style (DESIGN §5): loops marked {@code @Parallel} have independent iterations with one
 *       writer per output element, so the GPU compiler can map them to threads unchanged; no objects,
 *       allocation or lambdas inside loops; scratch space is passed in. Where a gradient is a sum over
 *       positions (dwte, dwpe, LayerNorm's dweight/dbias, the bias of a linear layer, attention's dk/dv)
 *       the parallel loop runs over the summed-into index and gathers, rather than scattering with
 *       atomics, so results are deterministic.</li>
 * </ul>
 *
 * <p>What this deliberately is not: not multi-threaded (the {@code @Parallel} loops run sequentially
 * on the JVM; {@link dev.taco.kernels.Gemm} carries the CPU parallelism, and the matmuls dominate),
 * not tensor-parallel (the TP linears and their collectives wrap {@link dev.taco.runtime.layers.Matmul}
 * elsewhere), no dropout, no mixed precision: fp32 throughout.
 */
package dev.taco.runtime.layers;
