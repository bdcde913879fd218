package dev.taco.kernels.compiler;

import javax.lang.model.type.ArrayType;
import javax.lang.model.type.TypeKind;
import javax.lang.model.type.TypeMirror;

/**
 * Java primitive types in CUDA C: names, literals and the conversions of JLS §5.1 (widening and narrowing
 * primitive conversions). {@code byte} is {@code signed char} (Java's byte is signed; arrays keep their bytes, so a
 * {@code byte[]} payload has the same layout), {@code long} is {@code long long}, {@code boolean} is {@code bool}.
 * {@code char} is not supported.
 */
final class CTypes {
  private CTypes() {}

  /** True for the primitive kinds the translator supports. */
  static boolean supported(TypeKind k) {
    return switch (k) {
      case INT, LONG, FLOAT, DOUBLE, BOOLEAN, BYTE, SHORT -> true;
      default -> false;
    };
  }

  /** The C name of a supported primitive kind, or {@code void}. */
  static String name(TypeKind k) {
    return switch (k) {
      case INT -> "int";
      case LONG -> "long long";
      case FLOAT -> "float";
      case DOUBLE -> "double";
      case BOOLEAN -> "bool";
      case BYTE -> "signed char";
      case SHORT -> "short";
      case VOID -> "void";
      default -> throw new IllegalArgumentException(k.toString());
    };
  }

  /** The element kind of a one-dimensional primitive array type, or null. */
  static TypeKind elementKind(TypeMirror t) {
    if (t.getKind() == TypeKind.ARRAY) {
      TypeKind e = ((ArrayType) t).getComponentType().getKind();
      return supported(e) ? e : null;
    }
    return null;
  }

  static boolean integral(TypeKind k) {
    return k == TypeKind.INT || k == TypeKind.LONG || k == TypeKind.BYTE || k == TypeKind.SHORT;
  }

  static boolean floating(TypeKind k) {
    return k == TypeKind.FLOAT || k == TypeKind.DOUBLE;
  }

  /** Unary numeric promotion (JLS §5.6): byte and short become int. */
  static TypeKind promote(TypeKind k) {
    return k == TypeKind.BYTE || k == TypeKind.SHORT ? TypeKind.INT : k;
  }

  /** Binary numeric promotion (JLS §5.6). */
  static TypeKind promote(TypeKind a, TypeKind b) {
    if (a == TypeKind.DOUBLE || b == TypeKind.DOUBLE) {
      return TypeKind.DOUBLE;
    }
    if (a == TypeKind.FLOAT || b == TypeKind.FLOAT) {
      return TypeKind.FLOAT;
    }
    if (a == TypeKind.LONG || b == TypeKind.LONG) {
      return TypeKind.LONG;
    }
    return a == TypeKind.BOOLEAN ? TypeKind.BOOLEAN : TypeKind.INT;
  }

  /**
   * C expression converting {@code c} (of kind {@code from}) to {@code to} with Java's semantics: floating to
   * integral saturates with NaN to 0 (JLS §5.1.3, via {@code j_toint}/{@code j_tolong}; to byte/short through int),
   * integral narrowing keeps the low bits (C++20 modular conversion), the rest are C casts with the same result
   * (int to float rounds to nearest even in both).
   */
  static String convert(String c, TypeKind from, TypeKind to) {
    if (from == to) {
      return c;
    }
    if (floating(from) && integral(to)) {
      String wide = to == TypeKind.LONG ? "j_tolong(" + c + ")" : "j_toint(" + c + ")";
      return to == TypeKind.LONG || to == TypeKind.INT ? wide : "(" + name(to) + ")" + wide;
    }
    return "(" + name(to) + ")(" + c + ")";
  }

  /** A C literal of a compile-time constant value (JLS §15.29) of kind {@code k}. */
  static String literal(Object v, TypeKind k) {
    return switch (k) {
      case BOOLEAN -> v.toString();
      case FLOAT -> floatLiteral(((Number) v).floatValue());
      case DOUBLE -> doubleLiteral(((Number) v).doubleValue());
      case LONG -> {
        long x = ((Number) v).longValue();
        yield x == Long.MIN_VALUE ? "(-9223372036854775807LL - 1)" : x + "LL";
      }
      case INT -> {
        int x = v instanceof Character ch ? ch : ((Number) v).intValue();
        yield x == Integer.MIN_VALUE ? "(-2147483647 - 1)" : Integer.toString(x);
      }
      // typed, as in Java: a bare int literal would pick a device function's int overload over its byte one
      case SHORT, BYTE -> "((" + name(k) + ")" + ((Number) v).intValue() + ")";
      default -> throw new IllegalArgumentException(k.toString());
    };
  }

  /** Exact float literal: decimal when short, else hexadecimal; NaN and infinities by their bits. */
  static String floatLiteral(float f) {
    if (!Float.isFinite(f)) {
      return "__int_as_float(0x" + Integer.toHexString(Float.floatToIntBits(f)) + ")";
    }
    String s = Float.toString(f);
    return (s.length() <= 8 ? s : Float.toHexString(f)) + "f";
  }

  /** Exact double literal, as {@link #floatLiteral}. */
  static String doubleLiteral(double d) {
    if (!Double.isFinite(d)) {
      return "__longlong_as_double(0x" + Long.toHexString(Double.doubleToLongBits(d)) + "LL)";
    }
    String s = Double.toString(d);
    return s.length() <= 10 ? s : Double.toHexString(d);
  }
}
