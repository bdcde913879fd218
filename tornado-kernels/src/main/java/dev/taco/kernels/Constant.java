package dev.taco.kernels;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks an {@code int} parameter of a kernel as a compile-time constant (docs/design.md §5: "compile-time constants
 * specialise a kernel"). Its value is given when the kernel is translated (a specialisation map, parameter name
 * to value); the parameter then disappears from the generated entry point and becomes a {@code constexpr int}
 * of the same name, so loops bounded by it are unrolled ({@code #pragma unroll}) and {@code new float[G]} becomes a
 * fixed-size register array. On the JVM the parameter is an ordinary argument: the caller passes the same value.
 *
 * <p>{@code static final int} fields with a constant initialiser (JLS §4.12.4 constant variables) are inlined the
 * same way without this annotation.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.PARAMETER)
public @interface Constant {
}
