package dev.taco.kernels;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks the induction variable of a loop whose iterations are independent, in the TornadoVM style:
 * {@code for (@Parallel int i = 0; i < n; i++) { ... }}.
 *
 * <p>On the JVM the loop runs as written (a sequential loop; callers split work across threads by
 * passing sub-ranges); the kernel compiler (docs/design.md §5) maps each iteration to a GPU thread. A loop so marked
 * must not carry a dependency between iterations, must not allocate and must not touch objects other
 * than primitive arrays.
 */
@Documented
@Retention(RetentionPolicy.SOURCE)
@Target({ElementType.LOCAL_VARIABLE, ElementType.PARAMETER})
public @interface Parallel {
}
