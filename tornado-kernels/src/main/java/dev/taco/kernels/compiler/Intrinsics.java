package dev.taco.kernels.compiler;

import java.util.Map;
import java.util.Set;
import javax.lang.model.element.ExecutableElement;
import javax.lang.model.element.TypeElement;

/**
 * JDK static methods with a CUDA C equivalent, keyed {@code Class.method(paramKinds)} (kinds lower-case, comma
 * separated). The value is a template with {@code $0}, {@code $1}, {@code $2} for the converted arguments; each
 * appears once, so an argument is evaluated once, as in Java (a test checks every template).
 *
 * <p>Exact (bit-identical to Java) unless noted: {@code abs} ({@code fabsf} clears the sign bit, as Java since
 * JDK 18), {@code min}/{@code max} (helpers with Java's NaN and signed-zero rules), {@code sqrt}
 * ({@code __dsqrt_rn}/{@code __fsqrt_rn}: IEEE correctly rounded, as JLS requires of {@code Math.sqrt}), {@code fma}
 * ({@code __fma_rn}, one rounding as {@code Math.fma}), {@code floor}/{@code ceil}/{@code rint}, {@code round},
 * {@code scalb} ({@code ldexp}/{@code ldexpf}, 0 ulp in the CUDA Math API tables; one rounding to nearest even in
 * the subnormal range, as Java), bit conversions ({@code __float_as_int} etc., CUDA Math API "Type Casting
 * Intrinsics"), {@code numberOfLeadingZeros} ({@code __clz}) and {@code bitCount} ({@code __popc}).
 *
 * <p>{@link dev.taco.kernels.Vec16} methods become single vector accesses (prelude helpers
 * {@code j_load_bf16x8} etc.); same values as the Java loops, given the alignment contract of that class.
 *
 * <p>{@link dev.taco.kernels.Fp8#encodeE4M3} / {@link dev.taco.kernels.Fp8#encodeE5M2} become {@code j_fp8_e4m3} /
 * {@code j_fp8_e5m2}: on sm_89+ the hardware conversion {@code cvt.rn.satfinite.e4m3x2.f32} (resp. {@code e5m2x2}),
 * round to nearest even with saturation to the largest finite value, which is exactly Fp8's rule for every non-NaN
 * input (infinities included); NaN is guarded to Fp8's {@code sign | 0x7F}. Below sm_89 (and in the g++ host shim)
 * a C port of {@code Fp8.encode}'s integer algorithm.
 *
 * <p>Packed conversions (one hardware instruction per pair of values): {@code Fp8.encodeE4M3x4} /
 * {@code encodeE5M2x4} ({@code cvt.rn.satfinite.e4m3x2/e5m2x2.f32}; E4M3x4 is defined in Java with the hardware's
 * unsigned NaN code, E5M2x4 guards NaN), {@code Fp8.decodeE4M3x4} / {@code decodeE5M2x4}
 * ({@code cvt.rn.f16x2.e4m3x2/e5m2x2} then exact {@code cvt.f32.f16}; words holding NaN/Inf codes take the scalar
 * path) and {@code Bf16.encode2} ({@code cvt.rn.bf16x2.f32}, NaN guarded). The semantics corpus compares all of them
 * bit for bit with the JVM on the GPU machine.
 *
 * <p>{@link dev.taco.kernels.FastMath#exp2} becomes one {@code ex2.approx.ftz.f32}: not exact by its own contract
 * (within about 2 ulp, subnormal results flushed to zero on the GPU; exact on the JVM).
 *
 * <p>Not exact: {@code exp}, {@code log}, {@code log10}, {@code pow}, {@code sin}, {@code cos}, {@code tan},
 * {@code tanh}, {@code atan} of {@code Math} allow 1 ulp error in Java (2.5 for tanh)
 * ({@link Math} class comment, per method) and CUDA's double versions allow 1 to 2 ulp (CUDA C++ Programming Guide,
 * "Mathematical Functions", double-precision table: exp 1, log 1, pow 2, sin/cos 2, tan 2, tanh 1, atan 2); so CPU
 * and GPU results may differ by up to the sum, about 3 ulp of the double result, and a float rounded from it may
 * differ by 1 ulp. The semantics corpus checks these with that tolerance. One exception to the double mapping: a
 * float argument whose result is cast straight back to float, {@code (float) Math.exp(x)} or {@code (float) Math.log(x)},
 * becomes {@code expf(x)} / {@code logf(x)} (2 and 1 ulp in CUDA's single-precision table, so up to about 3 ulp from
 * Java's result): the training kernels' softmax, cross-entropy and GELU spend their time there, and the GPU's double
 * units are a fraction of its float units.
 */
final class Intrinsics {
  private Intrinsics() {}

  static final Map<String, String> TABLE = Map.ofEntries(
      Map.entry("Math.abs(int)", "j_abs($0)"),
      Map.entry("Math.abs(long)", "j_abs($0)"),
      Map.entry("Math.abs(float)", "fabsf($0)"),
      Map.entry("Math.abs(double)", "fabs($0)"),
      Map.entry("Math.max(int,int)", "j_max($0, $1)"),
      Map.entry("Math.max(long,long)", "j_max($0, $1)"),
      Map.entry("Math.max(float,float)", "j_max($0, $1)"),
      Map.entry("Math.max(double,double)", "j_max($0, $1)"),
      Map.entry("Math.min(int,int)", "j_min($0, $1)"),
      Map.entry("Math.min(long,long)", "j_min($0, $1)"),
      Map.entry("Math.min(float,float)", "j_min($0, $1)"),
      Map.entry("Math.min(double,double)", "j_min($0, $1)"),
      Map.entry("Math.sqrt(double)", "__dsqrt_rn($0)"),
      Map.entry("Math.copySign(float,float)", "copysignf($0, $1)"),
      Map.entry("Math.copySign(double,double)", "copysign($0, $1)"),
      Map.entry("Math.fma(float,float,float)", "__fmaf_rn($0, $1, $2)"),
      Map.entry("Math.fma(double,double,double)", "__fma_rn($0, $1, $2)"),
      Map.entry("Math.floor(double)", "floor($0)"),
      Map.entry("Math.ceil(double)", "ceil($0)"),
      Map.entry("Math.rint(double)", "rint($0)"),
      Map.entry("Math.round(float)", "j_round($0)"),
      Map.entry("Math.round(double)", "j_round($0)"),
      Map.entry("Math.scalb(float,int)", "ldexpf($0, $1)"),
      Map.entry("Math.scalb(double,int)", "ldexp($0, $1)"),
      Map.entry("Math.getExponent(float)", "j_get_exponent($0)"),
      Map.entry("Math.getExponent(double)", "j_get_exponent($0)"),
      Map.entry("Math.exp(double)", "exp($0)"),
      Map.entry("Math.log(double)", "log($0)"),
      Map.entry("Math.log10(double)", "log10($0)"),
      Map.entry("Math.pow(double,double)", "pow($0, $1)"),
      Map.entry("Math.sin(double)", "sin($0)"),
      Map.entry("Math.cos(double)", "cos($0)"),
      Map.entry("Math.tan(double)", "tan($0)"),
      Map.entry("Math.tanh(double)", "tanh($0)"),
      Map.entry("Math.atan(double)", "atan($0)"),
      Map.entry("Float.floatToRawIntBits(float)", "__float_as_int($0)"),
      Map.entry("Float.floatToIntBits(float)", "j_float_to_int_bits($0)"),
      Map.entry("Float.intBitsToFloat(int)", "__int_as_float($0)"),
      Map.entry("Float.isNaN(float)", "j_is_nan($0)"),
      Map.entry("Float.isFinite(float)", "(fabsf($0) <= 3.4028235e38f)"),
      Map.entry("Float.isInfinite(float)", "(fabsf($0) == __int_as_float(0x7f800000))"),
      Map.entry("Double.doubleToRawLongBits(double)", "__double_as_longlong($0)"),
      Map.entry("Double.longBitsToDouble(long)", "__longlong_as_double($0)"),
      Map.entry("Double.isNaN(double)", "j_is_nan($0)"),
      Map.entry("Integer.numberOfLeadingZeros(int)", "__clz($0)"),
      Map.entry("Long.numberOfLeadingZeros(long)", "__clzll($0)"),
      Map.entry("Integer.bitCount(int)", "__popc($0)"),
      Map.entry("Long.bitCount(long)", "__popcll($0)"),
      Map.entry("Fp8.encodeE4M3(float)", "j_fp8_e4m3($0)"),
      Map.entry("Fp8.encodeE5M2(float)", "j_fp8_e5m2($0)"),
      Map.entry("Fp8.encodeE4M3x4(float,float,float,float)", "j_fp8x4_e4m3($0, $1, $2, $3)"),
      Map.entry("Fp8.encodeE5M2x4(float,float,float,float)", "j_fp8x4_e5m2($0, $1, $2, $3)"),
      Map.entry("Fp8.decodeE4M3x4(int,float[],int)", "j_fp8x4_decode_e4m3($0, $1, $2)"),
      Map.entry("Fp8.decodeE5M2x4(int,float[],int)", "j_fp8x4_decode_e5m2($0, $1, $2)"),
      Map.entry("Bf16.encode2(float,float)", "j_bf16x2($0, $1)"),
      Map.entry("Vec16.loadBf16x8(short[],int,float[])", "j_load_bf16x8($0, $1, $2)"),
      Map.entry("Vec16.loadFloat4(float[],int,float[])", "j_load_float4($0, $1, $2)"),
      Map.entry("Vec16.storeFloat4(float[],int,float[])", "j_store_float4($0, $1, $2)"),
      Map.entry("Vec16.storeBytes8(byte[],int,long)", "j_store_bytes8($0, $1, $2)"),
      Map.entry("Vec16.loadBytes8(byte[],int)", "j_load_bytes8($0, $1)"),
      Map.entry("Vec16.storeShortPairs8(short[],int,int,int,int,int)", "j_store_short_pairs8($0, $1, $2, $3, $4, $5)"),
      Map.entry("Vec16.storeBf16x8(short[],int,float[])", "j_store_bf16x8($0, $1, $2)"),
      Map.entry("Vec16.loadShortPairs8(short[],int,int[],int)", "j_load_short_pairs8($0, $1, $2, $3)"),
      Map.entry("Vec16.loadShortPair(short[],int)", "j_load_short_pair($0, $1)"),
      Map.entry("Vec16.storeShortPair(short[],int,int)", "j_store_short_pair($0, $1, $2)"),
      Map.entry("Vec16.storeInts4(int[],int,int[],int)", "j_store_ints4($0, $1, $2, $3)"),
      Map.entry("FastMath.exp2(float)", "j_exp2_approx($0)"));

  /**
   * The template of a call of {@code m}, or null: only {@code java.lang} classes, {@link dev.taco.kernels.Vec16},
   * {@link dev.taco.kernels.Fp8}, {@link dev.taco.kernels.FastMath} and {@link dev.taco.kernels.Bf16} are looked up
   * (the others' static methods are translated from their source, if any).
   */
  static String template(ExecutableElement m) {
    String owner = ((TypeElement) m.getEnclosingElement()).getQualifiedName().toString();
    boolean mapped = owner.startsWith("java.lang.") || owner.equals(dev.taco.kernels.Vec16.class.getName())
        || owner.equals(dev.taco.kernels.Fp8.class.getName()) || owner.equals(dev.taco.kernels.FastMath.class.getName())
        || owner.equals(dev.taco.kernels.Bf16.class.getName());
    return mapped ? TABLE.get(key(m)) : null;
  }

  /** {@code m}'s key in {@link #TABLE}: {@code Class.method(paramTypes)}, the class by its simple name. */
  static String key(ExecutableElement m) {
    StringBuilder key = new StringBuilder(m.getEnclosingElement().getSimpleName()).append('.')
        .append(m.getSimpleName()).append('(');
    for (int i = 0; i < m.getParameters().size(); i++) {
      key.append(i == 0 ? "" : ",").append(m.getParameters().get(i).asType());
    }
    return key.append(')').toString();
  }

  /** The {@link dev.taco.kernels.KernelContext} fields a kernel may read, with their C. */
  static final Map<String, String> CONTEXT_FIELDS = Map.of("globalIdx", "(int)(blockIdx.x * blockDim.x + threadIdx.x)",
      "localIdx", "(int)threadIdx.x", "groupIdx", "(int)blockIdx.x", "localGroupSize", "(int)blockDim.x",
      "globalGroupSize", "(int)(gridDim.x * blockDim.x)", "WARP_SIZE", "32");

  /**
   * The {@link dev.taco.kernels.KernelContext} methods a kernel may call in an expression (the shared-array
   * allocations only initialise a declaration at the top of a kernel).
   */
  static final Set<String> CONTEXT_METHODS = Set.of("barrier", "laneId", "shflXor", "warpReduceSum", "warpReduceMax",
      "mmaBf16", "ldmatrixX4", "ldmatrixX4Trans", "cpAsync16", "cpAsyncCommit", "cpAsyncWait");

  /** The {@link dev.taco.kernels.KernelContext} methods that write an array argument (all, conservatively). */
  static final Set<String> CONTEXT_WRITERS = Set.of("mmaBf16", "ldmatrixX4", "ldmatrixX4Trans", "cpAsync16");
}
