package dev.taco.kernels.compiler;

import java.util.List;
import java.util.Set;

/**
 * The C names of Java names: a local's or parameter's name in the generated CUDA C++, and the names a kernel's
 * {@code extern "C"} entry may not take.
 */
final class CNames {
  private CNames() {}

  private static final Set<String> C_KEYWORDS = Set.of("EOF", "assert", "errno", "stdin", "stdout", "stderr",
      "typeof", "isnan", "isinf", "isfinite", "signbit", "fpclassify", "offsetof", "auto", "register", "signed",
      "unsigned", "union", "struct",
      "typedef", "extern", "sizeof", "template", "typename", "delete", "friend", "inline", "mutable", "namespace",
      "operator", "typeid", "using", "virtual", "volatile", "asm", "bool", "explicit", "export", "not",
      "and", "or", "xor", "compl", "bitand", "bitor", "restrict", "constexpr", "decltype", "nullptr", "alignas",
      "alignof", "noexcept", "thread_local", "float4", "int4", "dim3", "warpSize", "threadIdx", "blockIdx",
      "blockDim", "gridDim", "fmodf", "fmod", "not_eq", "and_eq", "or_eq", "xor_eq", "static_cast",
      "dynamic_cast", "reinterpret_cast", "const_cast", "char8_t", "char16_t", "char32_t", "wchar_t", "requires",
      "concept", "consteval", "constinit", "co_await", "co_return", "co_yield", "static_assert", "INFINITY", "NAN",
      "NULL", "linux", "unix", "expf", "logf", "powf", "sqrtf", "main");

  /** Names the generated code calls (math functions of the intrinsics): a local of that name would shadow them. */
  private static final Set<String> CALLED = Intrinsics.TABLE.values().stream()
      .flatMap(t -> java.util.regex.Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(?=\\()").matcher(t).results())
      .map(java.util.regex.MatchResult::group).collect(java.util.stream.Collectors.toUnmodifiableSet());

  /**
   * A Java local's or parameter's C name: itself, or with a trailing {@code _} when it could mean something else in
   * CUDA C++ (a keyword, a macro, a prelude or library function it calls, a device function's {@code Class_method}
   * name) or already ends with {@code _}, which keeps the mapping one-to-one ({@code and} and {@code and_} stay two).
   */
  static String of(String javaName) {
    return reserved(javaName) || CALLED.contains(javaName) || javaName.endsWith("_")
        || DEVICE_OR_MACRO.matcher(javaName).matches() ? javaName + "_" : javaName;
  }

  /** A C or CUDA keyword or macro, or a name of the prelude ({@code j_}) or the implementation ({@code __}). */
  private static boolean reserved(String name) {
    return C_KEYWORDS.contains(name) || name.startsWith("j_") || name.startsWith("__");
  }

  /** {@code Class_method} (a device function's name) and {@code M_PI}, {@code INT_MAX}-like macros. */
  private static final java.util.regex.Pattern DEVICE_OR_MACRO = java.util.regex.Pattern.compile("[A-Z]\\w*_\\w+");

  /**
   * C library and CUDA math names a kernel may not take: its {@code extern "C"} entry shares their namespace (a kernel
   * named {@code exp} clashes with libm's). The C99 {@code <math.h>} functions with their {@code f} and {@code l}
   * forms, CUDA's extra math functions, and the C library calls a CUDA program may see.
   */
  private static final Set<String> LIBRARY = libraryNames();

  private static Set<String> libraryNames() {
    Set<String> names = new java.util.HashSet<>();
    for (String b : ("acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp ilogb ldexp"
        + " log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf erfc lgamma tgamma ceil floor"
        + " nearbyint rint lrint llrint round lround llround trunc fmod remainder remquo copysign nan nextafter"
        + " nexttoward fdim fmax fmin fma rsqrt rcbrt exp10 sincos sincospi sinpi cospi erfinv erfcinv erfcx normcdf"
        + " normcdfinv j0 j1 jn y0 y1 yn norm norm3d norm4d rnorm rhypot cyl_bessel_i0 cyl_bessel_i1 isnan isinf"
        + " isfinite signbit").split(" ")) {
      names.add(b);
      names.add(b + "f");
      names.add(b + "l");
    }
    names.addAll(List.of("abs", "labs", "llabs", "div", "ldiv", "printf", "malloc", "free", "memcpy", "memset",
        "memmove", "memcmp", "strlen", "exit", "abort", "rand", "clock", "clock64", "atoi", "qsort",
        "min", "max"));
    return Set.copyOf(names);
  }

  /**
   * Whether a kernel named {@code name} would clash with a C or CUDA name (a library function, keyword or macro, or a
   * name of the prelude): its {@code extern "C"} entry shares their namespace.
   */
  static boolean clashes(String name) {
    return reserved(name) || LIBRARY.contains(name);
  }
}
