package dev.taco.kernels.compiler.corpus;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Fp4;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;

/**
 * Semantics corpus (docs/design.md §5): small {@code @Parallel} kernels whose CPU results the GPU must reproduce bit
 * for bit (or within the ulp bound of {@link #transcendental}). Convention for the harness generator: every array
 * parameter has {@code n} elements and is filled with test values before the call; the last parameter is {@code n}.
 */
public final class SemanticsCorpus {
  private SemanticsCorpus() {}

  /** int wrap-around (JLS §15.17, §15.18) and division/remainder incl. MIN / -1; division by zero avoided. */
  @Kernel
  public static void intArith(int[] a, int[] b, int[] add, int[] sub, int[] mul, int[] div, int[] rem, int[] neg,
      int n) {
    for (@Parallel int i = 0; i < n; i++) {
      add[i] = a[i] + b[i];
      sub[i] = a[i] - b[i];
      mul[i] = a[i] * b[i];
      div[i] = b[i] == 0 ? 0 : a[i] / b[i];
      rem[i] = b[i] == 0 ? 0 : a[i] % b[i];
      neg[i] = -a[i] + Math.abs(b[i]);
    }
  }

  /** Shift counts masked to 5 bits, incl. negative and >= 32 counts; {@code >>>} on negatives (JLS §15.19). */
  @Kernel
  public static void shifts(int[] a, int[] s, int[] shl, int[] shr, int[] ushr, long[] lshl, long[] lushr, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      shl[i] = a[i] << s[i];
      shr[i] = a[i] >> s[i];
      ushr[i] = a[i] >>> s[i];
      long w = (long) a[i] * 0x9E3779B97F4A7C15L;
      lshl[i] = w << s[i];
      lushr[i] = w >>> s[i];
    }
  }

  /** long arithmetic with wrap-around and mixed int/long promotion. */
  @Kernel
  public static void longArith(long[] a, long[] b, int[] c, long[] add, long[] mul, long[] div, long[] mix, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      add[i] = a[i] + b[i];
      mul[i] = a[i] * b[i];
      div[i] = b[i] == 0 ? 0 : a[i] / b[i] + a[i] % b[i];
      mix[i] = (a[i] >> 3) ^ (c[i] * 31 + (long) c[i] * c[i]) - (int) a[i];
    }
  }

  /** Narrowing and floating-to-integral conversions (JLS §5.1.3): NaN to 0, saturation, truncation. */
  @Kernel
  public static void casts(float[] f, double[] d, int[] fi, long[] fl, int[] di, long[] dl, byte[] fb, short[] fs,
      int[] ib, float[] lf, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      fi[i] = (int) f[i];
      fl[i] = (long) f[i];
      di[i] = (int) d[i];
      dl[i] = (long) d[i];
      fb[i] = (byte) f[i];
      fs[i] = (short) d[i];
      ib[i] = (byte) fi[i] + (short) dl[i];
      lf[i] = (float) dl[i] + (float) (double) fl[i];
    }
  }

  /** Math functions with exact CUDA equivalents, and bit conversions. */
  @Kernel
  public static void mathExact(float[] a, float[] b, float[] max, float[] min, float[] abs, float[] sqrt,
      float[] fma, int[] round, float[] floor, int[] bits, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      max[i] = Math.max(a[i], b[i]);
      min[i] = Math.min(a[i], b[i]);
      abs[i] = Math.abs(a[i]) * 3f + b[i];
      sqrt[i] = (float) Math.sqrt(Math.abs(a[i]));
      fma[i] = Math.fma(a[i], b[i], 1.5f);
      round[i] = Math.round(a[i]);
      floor[i] = (float) Math.floor(a[i]) + (float) Math.ceil(b[i]);
      bits[i] = Float.floatToRawIntBits(a[i]) ^ Float.floatToIntBits(b[i] * 0f);
    }
  }

  /** Transcendental functions: within the ulp bounds documented in Intrinsics (checked with tolerance 4 ulp). */
  @Kernel
  public static void transcendental(double[] x, double[] exp, double[] log, double[] tanh, double[] pow, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      double v = x[i];
      exp[i] = Math.exp(v);
      log[i] = Math.log(Math.abs(v));
      tanh[i] = Math.tanh(v);
      pow[i] = Math.pow(Math.abs(v), 0.75);
    }
  }

  /**
   * FP8 conversions (docs/design.md §3): encode is the hardware cvt (NaN guarded, see Intrinsics), single and packed four at a
   * time (the neighbours {@code i+1..i+3} of the same values, so every value is seen in every position); decode
   * translated from Fp8.java, and packed four at a time.
   */
  @Kernel
  public static void fp8(float[] x, int[] c, byte[] e4, byte[] e5, float[] d4, float[] d5, int[] p4, int[] p5,
      float[] q4, float[] q5, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      float[] t = new float[4];
      int w = c[i] & 0xFF | (c[(i + 1) % n] & 0xFF) << 8 | (c[(i + 2) % n] & 0xFF) << 16 | c[(i + 3) % n] << 24;
      Fp8.decodeE4M3x4(w, t, 0); // packed decode (hardware cvt unless a NaN code is among the four)
      q4[i] = t[i & 3];
      Fp8.decode4(w, t, 0, Fp8.E5M2);
      q5[i] = t[(i + 1) & 3];
      e4[i] = Fp8.encodeE4M3(x[i]);
      float y = x[i];
      // NaN bits out of float arithmetic are unspecified (JLS 4.2.3): the JVM keeps the payload, the GPU returns
      // its canonical NaN. NaN inputs are therefore passed unscaled, so the conversion itself is what is compared.
      e5[i] = Fp8.encodeE5M2(y != y ? y : y * 64f);
      d4[i] = Fp8.decodeE4M3((byte) c[i]);
      d5[i] = Fp8.decode((byte) c[i], Fp8.E5M2);
      p4[i] = Fp8.encodeE4M3x4(x[i], x[(i + 1) % n], x[(i + 2) % n], x[(i + 3) % n]);
      p5[i] = Fp8.encode4(x[(i + 3) % n], x[(i + 2) % n], x[(i + 1) % n], x[i], Fp8.E5M2);
    }
  }

  /** bf16 conversions, translated from Bf16.java, and the packed {@link Bf16#encode2} (hardware cvt). */
  @Kernel
  public static void bf16(float[] x, int[] c, short[] enc, short[] sat, float[] dec, int[] pair, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      enc[i] = Bf16.encode(x[i]);
      pair[i] = Bf16.encode2(x[i], x[(i + 1) % n]); // the hardware cvt...bf16x2, NaN guarded
      float y = x[i];
      sat[i] = Bf16.encodeSaturating(y != y ? y : y * 1e30f); // NaN unscaled: see fp8()
      dec[i] = Bf16.decode((short) c[i]);
    }
  }

  /** Signed bytes: loads sign-extend, {@code & 0xFF} gives the unsigned value, compound ops narrow. */
  @Kernel
  public static void bytes(byte[] a, int[] s, byte[] b, int[] u, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      byte x = a[i];
      x += 100;
      x >>>= 1;
      b[i] = x;
      u[i] = (a[i] & 0xFF) + (a[i] >> 2) * 1000 + s[i] % 7;
    }
  }

  static final byte CB = (byte) 200;
  static final short CS = (short) 40000;
  static final float NEG_F = -1.5f;
  static final double NEG_D = -2.25;

  static int pick(byte v) {
    return v * 3 + 1;
  }

  static int pick(short v) {
    return v * 7 + 3;
  }

  static int pick(int v) {
    return v * 5 + 2;
  }

  /**
   * Grouping and typing that C++ reads differently unless the translator keeps Java's: a conditional as the condition
   * of another ({@code ?:} groups to the right), byte and short constants passed to overloads (a bare int literal picks
   * the int one), the negation of a negative constant ({@code --1.5f} does not compile), and names that are C words or
   * hold a {@code $1}.
   */
  @Kernel
  public static void grouping(int[] a, int[] b, float[] f, int[] cond, int[] over, float[] neg, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      cond[i] = (a[i] > 10 ? b[i] > 0 : b[i] < -5) ? 100 : 200;
      int and = a[i], and_ = b[i], EOF = a[i] ^ b[i], M_PI = a[i] >> 3;
      over[i] = pick(CB) + pick(CS) * 11 + pick(a[i]) * 13 + and * 3 + and_ * 5 + EOF + M_PI;
      float p$1 = f[i], q = 2f * f[i], pq = -f[i];
      neg[i] = Math.max(p$1, q) + (-NEG_F) * pq + (float) (-NEG_D);
    }
  }

  /**
   * The 4-bit formats, translated from Fp4.java and Fp8.java (integer code) and GroupKernels' E2M1 helpers: E2M1
   * encode of every test float and of values on and between E2M1's points, decode of every nibble, MXFP4's scale
   * code and the E8M0 decode of every byte, and of each E2M1 kind a quantise, a decode and a block scale (through the
   * E4M3 hardware conversion). No NaN comes out of float arithmetic here (its bits are unspecified, see fp8()).
   */
  @Kernel
  public static void fp4(float[] x, int[] c, int[] e2m1, int[] near, float[] dec, int[] mx, float[] e8m0, int[] qmx,
      int[] qnv, float[] deq, float[] nv, byte[] sc, float[] put, int n) {
    for (@Parallel int i = 0; i < n; i++) {
      float y = x[i];
      e2m1[i] = Fp4.encodeE2M1(y);
      near[i] = Fp4.encodeE2M1((c[i] % 129) / 16f);
      dec[i] = Fp4.decodeE2M1(c[i]);
      mx[i] = Fp4.mxScaleCode(Math.abs(y));
      e8m0[i] = Fp4.decodeE8M0(c[i] & 0xFF);
      float rowMax = Math.abs(y) <= Float.MAX_VALUE ? Math.abs(y) : 1f;
      qmx[i] = GroupKernels.quantise(y, Fp4.decodeE8M0(c[i] & 0xFE), 1f, GroupKernels.MXFP4);
      qnv[i] = GroupKernels.quantise(y, GroupKernels.nvScale(c[i] & 0x7E, rowMax), 1f, GroupKernels.NVFP4);
      deq[i] = GroupKernels.dequantise(c[i], GroupKernels.NVFP4);
      nv[i] = GroupKernels.nvScale(c[i] & 0x7E, rowMax);
      float s = GroupKernels.putScale(sc, i, rowMax * ((c[i] & 0xFF) / 255f), rowMax, GroupKernels.NVFP4);
      put[i] = s;
    }
  }
}
