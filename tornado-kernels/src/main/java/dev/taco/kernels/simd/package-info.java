/**
 * The CPU codec kernels on SIMD lanes (docs/design.md §3, §5): the Vector API ({@code jdk.incubator.vector}; run with
 * {@code --add-modules jdk.incubator.vector}) counterparts of the scalar kernels of {@code dev.taco.kernels}
 * ({@link dev.taco.kernels.TacoKernels}, {@link dev.taco.kernels.GroupKernels}, {@link dev.taco.kernels.Fp8},
 * {@link dev.taco.kernels.Bf16}, {@link dev.taco.kernels.Hadamard}), which stay the reference and the source the
 * kernel compiler translates to CUDA C. Every kernel here writes the same bytes and the same float bits as its
 * reference for every input (tested bit for bit on random and awkward inputs): it performs the same float operations
 * on each element in the same order, and does the integer parts (FP8, bf16 rounding) on {@code IntVector} lanes. Rare
 * cases (groups far outside float32's comfortable range, rows holding NaN/Inf) are handed to the reference kernels
 * group by group.
 *
 * <p>{@link dev.taco.kernels.simd.Simd} says which implementation the codecs of {@code dev.taco.codec} run;
 * {@link dev.taco.kernels.simd.Lanes} says how the kernels are written (whole-vector passes that never hand a vector
 * to another method, so that C2 neither boxes vectors nor scalarises small scratch arrays, see
 * {@code Scratch}); {@link dev.taco.kernels.simd.RowSplit} can spread one large call over several cores.
 */
package dev.taco.kernels.simd;
