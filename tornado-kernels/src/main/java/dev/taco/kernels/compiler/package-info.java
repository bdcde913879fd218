/**
 * The kernel compiler (docs/design.md §5): Java kernel source to readable CUDA C.
 *
 * <p>{@link dev.taco.kernels.compiler.KernelTranslator} parses and attributes kernel sources with javac's tree API
 * and emits one translation unit per request: {@link dev.taco.kernels.compiler.CudaPrelude} (Java-semantics helpers),
 * {@code __device__} functions for every static method reached, and an {@code extern "C" __global__} entry per
 * kernel. The supported subset and what stays different from Java are listed on {@code KernelTranslator}; every
 * rejection is a {@link dev.taco.kernels.compiler.KernelCompileException} with {@code file:line: reason}.
 * NVRTC, module loading and launches are the CUDA backend's job (another package).
 *
 * <h2>Why FP8 and bf16 are not mapped to cuda_fp8.h / cuda_bf16.h</h2>
 * {@code dev.taco.kernels.Fp8} and {@code Bf16} are translated from their own Java source into device functions
 * (pure integer code, so bit-identical by construction), not mapped to {@code __nv_cvt_float_to_fp8}: with
 * {@code __NV_SATFINITE} CUDA 13.0's conversion returns {@code 0x7F} for every E4M3 NaN (Java keeps the sign:
 * {@code 0x7F | sign}) and {@code 0x7E | mantissa} for E5M2 NaNs ({@code cuda_fp8.hpp},
 * {@code __nv_cvt_double_to_fp8}, the reference the {@code cvt.rn.satfinite} PTX path follows), and decoding through
 * {@code __half} gives NaN payloads other than Java's {@code Float.NaN}. Finite values would agree (both round to
 * nearest even and saturate), so an intrinsic mapping guarded by a NaN test is a possible later optimisation if a
 * profile shows the integer code matters.
 *
 * <h2>How the semantics are checked</h2>
 * Tests (src/test): {@code KernelTranslatorTest} (emitted shapes, rejections), {@code NvccCompileTest} (every
 * corpus and codec kernel through {@code nvcc --ptx -arch=sm_90}), {@code GpuSemanticsTest} (the semantics corpus
 * run on the JVM, the translated C run on the host with g++ and a shim of the CUDA built-ins, bit for bit, and the
 * standalone GPU programs of {@code tornado-kernels/gpu-semantics/} that {@code gpu-semantics.sh} runs on a GPU).
 */
package dev.taco.kernels.compiler;
