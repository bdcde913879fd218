/**
 * The layers of the GPT-2 style model, written the llm.c way: per layer and direction a host wrapper and one or more
 * kernels.
 *
 * <p>What this is: one class per layer ({@link dev.taco.runtime.layers.Encoder},
 * {@link dev.taco.runtime.layers.LayerNorm}, {@link dev.taco.runtime.layers.Matmul},
 * {@link dev.taco.runtime.layers.Attention}, {@link dev.taco.runtime.layers.Gelu},
 * {@link dev.taco.runtime.layers.Residual}, {@link dev.taco.runtime.layers.CrossEntropy}), plus
 * {@link dev.taco.runtime.layers.GradNorm} for gradient clipping, over primitive {@code float[]} arrays addressed
 * by explicit offsets, so that all parameters, gradients and activations can live in a few flat buffers. Shapes are
 * in each method's Javadoc.
 *
 * <p>Two kinds of method (docs/design.md §5):
 * <ul>
 *   <li><b>Host wrappers</b>, the public {@code forward} / {@code backward} (and
 *       {@link dev.taco.runtime.layers.Matmul#addBias}, {@link dev.taco.runtime.layers.GradNorm#squaredNorm}): they
 *       check sizes and spans once ({@code IllegalArgumentException} naming the argument), then call the kernels in
 *       order; Matmul's GEMMs are host calls into {@link dev.taco.kernels.Gemm} here (cuBLAS on the GPU), and
 *       CrossEntropy's mean and GradNorm's final sum over its partials are host reductions.</li>
 *   <li><b>Kernels</b>, annotated {@link dev.taco.kernels.Kernel} and named after their layer
 *       ({@code layernormForward}, {@code layernormBackwardRows}, ...): each holds exactly one top-level
 *       {@code @Parallel} loop, preceded only by local declarations, over primitive arrays with explicit offsets and
 *       sizes as parameters; no checks, objects, allocation or host calls. So
 *       {@link dev.taco.kernels.compiler.KernelTranslator} turns each into a CUDA C entry point unchanged (the
 *       static helpers they call, {@code Attention.dot} and {@code Gelu.tanh}, become device functions);
 *       {@link dev.taco.runtime.layers.LayerKernels#kernels()} lists them for pre-translation. A layer that needs
 *       two passes (LayerNorm's row part and its column sums) is two kernels. Element-wise kernels loop over elements,
 *       not rows, so that consecutive GPU threads touch consecutive addresses.</li>
 *   <li><b>The GPU's own forms</b>, where a loop per row is the CPU's right shape and the GPU's wrong one (a thread
 *       walking a row alone reads strided memory, and a few thousand rows leave most of a GPU idle): SIMT kernels
 *       taking a {@link dev.taco.kernels.KernelContext} that give a warp to each row and reduce with warp shuffles
 *       ({@code layernormForwardWarp}, {@code layernormBackwardRowsWarp}, {@code softmaxForwardWarp},
 *       {@code softmaxBackwardWarp}, {@code crossentropyForwardWarp}), and {@code encoderBackwardWteColumns}, the
 *       dwte gather per element. The same formulas with sums in another order (bit-identical for the gather); tests
 *       run them on the {@link dev.taco.kernels.cpu.SimtEmulator} against the CPU kernels. Only the GPU backend
 *       ({@code model.CudaOps}) launches them.</li>
 *   <li><b>The CPU's lane-wise forms</b>, what {@code model.CpuOps} runs: {@link dev.taco.runtime.layers.AttentionLanes},
 *       {@link dev.taco.runtime.layers.GeluLanes}, {@link dev.taco.runtime.layers.LayerNormLanes},
 *       {@link dev.taco.runtime.layers.CrossEntropyLanes}, {@link dev.taco.runtime.layers.ResidualLanes},
 *       {@link dev.taco.runtime.layers.EncoderLanes}, {@link dev.taco.runtime.layers.MatmulLanes} (the biases),
 *       {@link dev.taco.runtime.layers.GradNormLanes} and {@code layers.AdamWLanes}: host code on the Vector API
 *       ({@code jdk.incubator.vector}, through {@link dev.taco.runtime.layers.Lanes}), beside the kernels, which stay
 *       as they are (the GPU's code and the scalar reference; no Vector API in a kernel or a helper a kernel calls).
 *       Each repeats its kernels' float operations per element in the same order, a lane taking what the kernel
 *       loops over independently (a key, a channel, a position), never splitting one of the kernel's sequential sums,
 *       so it gives the kernels' bits (its test compares them bit for bit, and with float64); exp is
 *       {@link dev.taco.runtime.layers.Lanes#exp}, the bits of {@code (float) Math.exp}. They take the wrappers'
 *       checks, and run the scalar kernel on a remainder shorter than a vector where that is simpler.</li>
 *   <li><b>{@link dev.taco.runtime.layers.FlashAttention}</b>, the GPU's bf16 attention: tensor-core SIMT kernels
 *       ({@link dev.taco.kernels.KernelContext#mmaBf16}) with shared-memory tiles and block barriers, specialised by
 *       the head size; a different algorithm (online softmax, recomputation) in bf16 arithmetic, so its tests compare
 *       it with float64, not bit for bit with the CPU's {@code Attention}.</li>
 * </ul>
 *
 * <p>Conventions, shared by every method:
 * <ul>
 *   <li>Arguments: outputs first, then inputs, then the sizes; every array is followed by its offset.</li>
 *   <li>Forward passes overwrite their outputs. Backward passes ADD into their gradient buffers
 *       ({@code +=}): a tensor used twice (the residual stream) sums its gradients for free, and the
 *       caller zeroes gradients once per step.</li>
 *   <li>{@code @Parallel} loops have independent iterations with one writer per output element, so they map to GPU
 *       threads. Where a gradient is a sum over positions (dwte, dwpe, LayerNorm's dweight/dbias, the bias of a
 *       linear layer, attention's dk/dv) the loop runs over the summed-into index and gathers, rather than scattering
 *       with atomics, so results are deterministic and do not depend on the thread count.</li>
 *   <li>The numbers do not depend on how the work is split into kernels: the wrappers give bit for bit the floats
 *       of the single-method layers they replaced ({@code BitIdentityTest}).</li>
 * </ul>
 *
 * <p>What this deliberately is not: not multi-threaded (the {@code @Parallel} loops run sequentially
 * on the JVM; {@link dev.taco.kernels.Gemm} carries the CPU parallelism, and the matmuls dominate),
 * not tensor-parallel (the TP linears and their collectives wrap {@link dev.taco.runtime.layers.Matmul}
 * elsewhere), no dropout, no mixed precision on the CPU: fp32 throughout (float64 only in the sums behind the mean loss
 * and the gradient norm; bf16 only in the GPU's own forms for its bf16 mode).
 */
package dev.taco.runtime.layers;
