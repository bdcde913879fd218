package dev.taco.kernels;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a static method as a GPU kernel entry point (docs/design.md §5). The kernel compiler
 * ({@code dev.taco.kernels.compiler.KernelTranslator}) emits one {@code extern "C" __global__} function for it.
 * A kernel returns {@code void} and either contains one top-level {@link Parallel} loop (data-parallel kernel:
 * each iteration becomes one GPU thread of a grid-stride loop) or takes a {@link KernelContext} as its first
 * parameter (SIMT kernel: the body runs once per GPU thread). Static methods it calls become
 * {@code __device__} functions; they need no annotation.
 *
 * <p>The annotation is informative for the translator's driver (which can list the kernels of a class); the
 * translator also accepts un-annotated methods named explicitly (the codec kernels predate this annotation).
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
public @interface Kernel {
}
