package dev.taco.codec;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.NcclFp8;
import dev.taco.kernels.simd.Lanes;
import dev.taco.kernels.simd.Simd;

/**
 * {@code nccl-fp8} (codec id 11): what a user of NCCL 2.24 or later sends when all-reducing in FP8 with one scale per
 * tensor, the baseline that TACO must beat on fidelity (docs/design.md §4.1): every rank casts its tensor with the
 * group's scale, NCCL sums the FP8 codes ({@code ncclFloat8e4m3}, or {@code ncclFloat8e5m2} for {@code
 * nccl-fp8:e5m2}) rounding to FP8 at every hop of its ring, and every rank casts the sum back. The arithmetic is
 * {@link NcclFp8}'s; the collectives ({@code collective.TwoShot}) give every rank's tensor the same scale and sum the
 * payloads in NCCL's ring order, not by {@link #decodeReduce} (which sums decoded payloads in float32, as for every
 * other codec).
 *
 * <p>Payload: {@link PayloadHeader} (format 1 E4M3 or 2 E5M2, flags 0, G 0), then the body: the group's {@code amax}
 * (float32 LE), the scale divisor (int32 LE: R, or 1), one code per element, {@code FP8(x / amax * FP8MAX / divisor)}
 * ({@link NcclFp8#encode}). One tensor on its own is cast with its own absmax and divisor 1 (so nothing saturates);
 * in a collective, {@link #withScale} fixes the group's. Which divisor a group takes is the {@link ScaleRule}: {@link
 * ScaleRule#SUM} (the default: R, so that no sum of R values saturates) or {@link ScaleRule#MAX} (1: the format's
 * whole range for each value, and saturated sums; bench/results/nccl-fp8.md measures both). Policy propagate sends NaN
 * as a NaN code, and an infinity as E5M2's infinity or, in E4M3, a NaN.
 */
public final class NcclFp8Codec extends AbstractCodec {

  /** How a group's scale leaves room for the sum of its R tensors. */
  public enum ScaleRule {
    /** Divisor R: the group's largest magnitude is cast to {@code FP8MAX / R}, so no partial sum passes FP8MAX. */
    SUM,
    /** Divisor 1: the group's largest magnitude is cast to FP8MAX, and sums beyond it saturate. */
    MAX
  }

  private final Fp8Format format;
  private final ScaleRule rule;
  private final float amax; // NaN: each tensor's own
  private final int divisor;

  /** E4M3, the {@link ScaleRule#SUM} rule, refusing NaN/Inf. */
  public NcclFp8Codec() {
    this(Fp8Format.E4M3, ScaleRule.SUM, NonFinite.REFUSE);
  }

  /**
   * @param format E4M3 ({@code ncclFloat8e4m3}) or E5M2 ({@code ncclFloat8e5m2})
   * @param rule how a group's scale is chosen
   * @param nonFinite NaN/Inf policy
   */
  public NcclFp8Codec(Fp8Format format, ScaleRule rule, NonFinite nonFinite) {
    this(format, rule, nonFinite, Float.NaN, 1);
  }

  private NcclFp8Codec(Fp8Format format, ScaleRule rule, NonFinite nonFinite, float amax, int divisor) {
    super(nonFinite);
    this.format = java.util.Objects.requireNonNull(format, "format");
    this.rule = java.util.Objects.requireNonNull(rule, "rule");
    this.amax = amax;
    this.divisor = divisor;
  }

  @Override
  public String name() {
    return "nccl-fp8";
  }

  @Override
  protected int codecId() {
    return PayloadHeader.NCCL_FP8;
  }

  /** The FP8 format of the codes (and of the NCCL data type). */
  public Fp8Format format() {
    return format;
  }

  /** The scale rule of a group. */
  public ScaleRule rule() {
    return rule;
  }

  /** The scale divisor of a group of {@code ranks} ranks under this codec's rule: R ({@link ScaleRule#SUM}) or 1. */
  public int divisor(int ranks) {
    return rule == ScaleRule.SUM ? ranks : 1;
  }

  /**
   * This codec with the group's scale: {@link #encode} casts with {@code amax} and {@code divisor} instead of the
   * tensor's own absmax and 1 (every rank of a collective, with the same values).
   *
   * @throws IllegalArgumentException unless {@code amax} is finite and {@code >= 0} and {@code divisor >= 1}
   */
  public NcclFp8Codec withScale(float amax, int divisor) {
    if (!(amax >= 0 && amax <= Float.MAX_VALUE) || divisor < 1) {
      throw new IllegalArgumentException(name() + ": the group scale needs a finite amax >= 0 and a divisor >= 1, got "
          + amax + " and " + divisor);
    }
    return new NcclFp8Codec(format, rule, nonFinite(), amax, divisor);
  }

  /**
   * The payload of {@code rows x cols} codes already cast with {@code amax} and {@code divisor} (the ring's sum, sent on
   * by its owner), flagged non-finite when a code is NaN or an infinity.
   *
   * @throws IllegalArgumentException for a bad scale ({@link #withScale}), shape, or too few codes
   */
  public byte[] payload(float amax, int divisor, byte[] codes, int rows, int cols) {
    withScale(amax, divisor);
    byte[] out = new byte[encodedSize(rows, cols)];
    int n = rows * cols;
    if (codes.length < n) {
      throw new IllegalArgumentException(name() + ": " + codes.length + " codes for a " + rows + " x " + cols
          + " payload");
    }
    int body = PayloadHeader.SIZE;
    Bytes.putFloat(out, body, amax);
    Bytes.putInt(out, body + 4, divisor);
    System.arraycopy(codes, 0, out, body + NcclFp8.HEADER, n);
    int flags = 0;
    for (int i = 0; i < n && flags == 0; i++) {
      if (Fp8.isNonFinite(codes[i], format.code())) flags = PayloadHeader.FLAG_NONFINITE;
    }
    header(rows, cols).withFlags(flags).write(out, 0, PayloadHeader.crc(out, body, out.length - body));
    return out;
  }

  /** The group's {@code amax} a valid payload carries (its body's first field). */
  public static float amaxOf(byte[] payload) {
    return Bytes.getFloat(payload, PayloadHeader.SIZE);
  }

  /** The scale divisor a valid payload carries. */
  public static int divisorOf(byte[] payload) {
    return Bytes.getInt(payload, PayloadHeader.SIZE + 4);
  }

  @Override
  protected PayloadHeader header(int rows, int cols) {
    return new PayloadHeader(codecId(), format.code(), 0, 0, rows, cols);
  }

  @Override
  protected void checkHeader(PayloadHeader h) {
    expectFields(h, format.code(), 0, 0);
  }

  @Override
  protected long bodyLength(PayloadHeader h) {
    return NcclFp8.HEADER + (long) h.count();
  }

  /**
   * The largest finite {@code |x[off..off+n)|}, 0 if none: the absmax a user of NCCL's FP8 takes before scaling (NaN and
   * infinities are left out, as they carry no magnitude to scale by).
   */
  public static float finiteAbsMax(float[] x, int off, int n) {
    float a = 0f;
    for (int i = off; i < off + n; i++) {
      float e = Math.abs(x[i]);
      if (e <= Float.MAX_VALUE) a = Math.max(a, e);
    }
    return a;
  }

  @Override
  protected long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff) {
    int n = h.count();
    float a = amax;
    if (Float.isNaN(a)) a = finiteAbsMax(x, off, n);
    int f = format.code();
    float top = NcclFp8.top(divisor, f);
    Bytes.putFloat(out, bodyOff, a);
    Bytes.putInt(out, bodyOff + 4, divisor);
    long saturated = 0;
    boolean nonFinite = false;
    for (int i = 0; i < n; i++) {
      float v = x[off + i];
      out[bodyOff + NcclFp8.HEADER + i] = (byte) NcclFp8.encode(v, a, top, f);
      nonFinite |= !Float.isFinite(v);
      if (a > 0 && Float.isFinite(v) && Math.abs(v / a * top) > Fp8.maxValue(f)) saturated++;
    }
    // the SIMD path does not scan the input first: say that it held NaN/Inf (written as propagate writes them)
    return nonFinite && Simd.enabled() ? saturated | Lanes.NON_FINITE : saturated;
  }

  @Override
  protected String checkBody(PayloadHeader h, byte[] in, int bodyOff) {
    float a = Bytes.getFloat(in, bodyOff);
    int d = Bytes.getInt(in, bodyOff + 4);
    if (Float.floatToRawIntBits(a) < 0 || !(a <= Float.MAX_VALUE)) {
      return "amax " + a + " is not a finite value >= +0";
    }
    if (d < 1) {
      return "scale divisor " + d + " is below 1";
    }
    if (!h.nonFinite()) {
      for (int i = 0; i < h.count(); i++) {
        if (Fp8.isNonFinite(in[bodyOff + NcclFp8.HEADER + i], format.code())) {
          return "non-finite code at index " + i + " (flag 0x80 not set)";
        }
      }
    }
    return null;
  }

  @Override
  protected void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff, boolean accumulate) {
    float a = Bytes.getFloat(in, bodyOff);
    int f = format.code();
    float top = NcclFp8.top(Bytes.getInt(in, bodyOff + 4), f);
    for (int i = 0; i < h.count(); i++) {
      float v = NcclFp8.decode(in[bodyOff + NcclFp8.HEADER + i] & 0xFF, a, top, f);
      out[outOff + i] = accumulate ? out[outOff + i] + v : v;
    }
  }

  /**
   * {@code nccl-fp8}, {@code nccl-fp8:e5m2}, with {@code nonfinite=propagate} when set; the {@link ScaleRule#MAX}
   * codec adds {@code scale=max}, which no spec sets (it is measured, not offered).
   */
  @Override
  public String toString() {
    String params = (format == Fp8Format.E5M2 ? ",e5m2" : "") + policySuffix()
        + (rule == ScaleRule.MAX ? ",scale=max" : "");
    return name() + (params.isEmpty() ? "" : ":" + params.substring(1));
  }
}
