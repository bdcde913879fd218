package dev.taco.kernels;

/**
 * The TACO compress / decompress kernels (docs/design.md §3): ASH pre-scale, Walsh-Hadamard transform and Dual-Scale FP8
 * quantisation of groups of {@code G} contiguous values along each row. CPU reference, written in the kernel
 * style of docs/design.md §5 ({@link Parallel} loops over rows or groups, primitive arrays, sizes as parameters, no
 * allocation in loops) so that the kernel compiler can translate it.
 *
 * <h2>Layout</h2>
 * The input is {@code x[xOff ..]}, {@code rows x cols} float32, row-major. Each row is cut into
 * {@code ng = ceil(cols/G)} groups; the last one is padded with zeros to {@code G} (the padding is sent, since the
 * transform mixes it, and trimmed on decode). Group {@code t = r*ng + g} covers columns {@code [g*G, g*G+G)} of
 * row {@code r}. The compressed body has three regions, at offsets the caller chooses:
 * <ul>
 *   <li>{@code scaleOff}: {@code rows} coarse scales {@code c_r}, float32 little-endian;
 *   <li>{@code fineOff}: {@code rows*ng} fine-exponent bytes {@code f_t} (unsigned, 0..255);
 *   <li>{@code codeOff}: {@code rows*ng*G} FP8 codes, group after group.
 * </ul>
 *
 * <h2>Numerics</h2>
 * Decoding is {@code x^ = H(fp8(q)) * d_t}, {@code d_t = c_r * 2^(-f_t)} rounded once to float32
 * ({@link #decodeScale}), with H the orthonormal WHT (identity when the Hadamard flag is off), clamped to
 * +-Float.MAX_VALUE (a value within one FP8 step of the float32 max could otherwise round to Inf). Encoding, per row then per group:
 * <ol>
 *   <li><b>Coarse scale</b> (per row, {@link #rowScales}): {@code c_r = A_r * beta / FP8MAX} with {@code A_r} the
 *       row's absmax and {@code beta = 2^(ceil(log2(G)/2)+1) >= 2*sqrt(G)} (2 without Hadamard), clamped up to
 *       the smallest normal float; 0 for an all-zero row. Since {@code |H x|_inf <= sqrt(G) |x|_inf}, every
 *       group fits below FP8MAX/2 at fine exponent 0: <b>no finite input can overflow</b>, with a binade of margin
 *       for rounding.
 *   <li><b>ASH statistic and pre-scale</b>: the group's absmax {@code a_t} (energy statistic), level
 *       {@code l = ilogb(a_t)}; pre-scale {@code 2^k}, {@code k = round(-alpha*l)} (towards the common level
 *       2^0 with strength alpha), then clamped so that the group's max lies in [2^-100, 2^101) whatever alpha is,
 *       which keeps the float32 transform clear of overflow and of subnormals. Power of two: exact.
 *   <li><b>WHT</b> of the pre-scaled, zero-padded group ({@link Hadamard#fwht}), absmax {@code w_t}.
 *   <li><b>Fine exponent</b>: the largest integer {@code f_t} (clamped to 0..255) with
 *       {@code w_t * 2^(f_t) / c_r <= FP8MAX}, i.e. the group's max lands in the top FP8 binade,
 *       (FP8MAX/2, FP8MAX]. That is what prevents <b>zero collapse</b>: every non-zero group has a code of magnitude
 *       above FP8MAX/2. It holds while {@code f_t <= 255}, i.e. for groups down to about {@code 2^-245} times their
 *       row's max (any two normal floats of one row closer than that; 2^40 apart is far inside).
 *   <li>Quantise {@code v = w * s_t} elementwise with {@link Fp8} (RNE, saturating), {@code s_t = 2^(f_t - k) / c_r}
 *       rounded once to float32 ({@link #encodeScale}): one multiply per value, the same on the CPU and the GPU.
 *       Values with {@code |v| > FP8MAX} are counted as saturated (0 by construction; the count is a check).
 * </ol>
 * The pre-scale {@code 2^k} and the fine exponent are both per-group powers of two, so only their combination is
 * stored (as {@code f_t}); since the fine exponent is chosen after the pre-scale from the transformed absmax,
 * the pre-scale cancels exactly: <b>alpha does not change the payload</b> (bit for bit, except when groups hold
 * float32 subnormals that the pre-scale makes normal). What alpha changes is the range the float32 transform
 * works in. This is the honest reading of ASH with a per-group scalar pre-scale and a per-group transform: a
 * scalar commutes with H.
 */
public final class TacoKernels {
  private TacoKernels() {}

  /** Pre-scaled group maxima are kept in [2^-SAFE, 2^(SAFE+1)) before the transform. */
  private static final int SAFE = 100;

  /**
   * Number of groups per row, {@code ceil(cols / G)}, for any {@code cols >= 0} ({@code cols + G - 1} would overflow
   * from {@code 2^31 - G + 1} up, and {@code fp8-tensor}'s one group spanning a tensor of over 2^30 values reached it).
   */
  public static int groupsPerRow(int cols, int groupSize) {
    return cols / groupSize + (cols % groupSize == 0 ? 0 : 1);
  }

  /** log2 of the coarse-scale headroom {@code beta}: {@code ceil(log2(G)/2) + 1} with Hadamard, 1 without. */
  public static int logBeta(int groupSize, boolean hadamard) {
    int lg = 31 - Integer.numberOfLeadingZeros(groupSize);
    return hadamard ? (lg + 1) / 2 + 1 : 1;
  }

  /** floor(log2(|a|)) for a finite non-zero float, subnormals included. */
  public static int ilogb(float a) {
    int e = Math.getExponent(a);
    return e >= Float.MIN_EXPONENT ? e : Math.getExponent(a * 0x1p64f) - 64;
  }

  /**
   * The coarse scale {@code max(A * (1/FP8MAX) * beta, MIN_NORMAL)} (one rounding per step) of a row with finite
   * absmax {@code A} (class doc, step 1).
   */
  public static float coarseScale(float rowAbsMax, int groupSize, int format, boolean hadamard) {
    return Math.max(Math.scalb(rowAbsMax * (1f / Fp8.maxValue(format)), logBeta(groupSize, hadamard)),
        Float.MIN_NORMAL);
  }

  /**
   * The ASH pre-scale exponent {@code k} of a group with (finite, non-zero) absmax {@code a}: {@code round(-alpha *
   * ilogb(a))}, clamped so that {@code a * 2^k} lies in [2^-100, 2^101) (see class doc, step 2).
   */
  public static int preScaleExponent(float a, float alpha) {
    int l = ilogb(a);
    int k = Math.round(-alpha * l);
    return Math.min(Math.max(k, -SAFE - l), SAFE - l);
  }

  /**
   * {@code 1 / mant(c)} (rounded) for a positive normal {@code c}, {@code mant(c)} in [1, 2) its significand: the
   * per-row factor of {@link #fineExponent} and {@link #encodeScale}.
   */
  public static float inverseMantissa(float c) {
    return 1f / Float.intBitsToFloat(Float.floatToRawIntBits(c) & 0x7FFFFF | 0x3F800000);
  }

  /**
   * The fine exponent {@code f_t} in 0..255 (class doc, step 4) of a group whose transformed, pre-scaled absmax is
   * {@code m > 0}, pre-scale exponent {@code k}, coarse scale {@code c > 0} (normal) with {@code inv =
   * inverseMantissa(c)}: the largest {@code f} with {@code y * 2^(f-k-e(c)) <= FP8MAX}, {@code y = m * inv} (rounded;
   * normal, as {@code m >= 2^-104}), found on {@code y}'s exponent and significand bits, so no step can overflow.
   */
  public static int fineExponent(float m, float c, float inv, int k, int format) {
    int y = Float.floatToRawIntBits(m * inv);
    int over = (y & 0x7FFFFF) > (Float.floatToRawIntBits(Fp8.maxValue(format)) & 0x7FFFFF) ? 1 : 0;
    int n = Fp8.maxExponent(format) - ((y >>> 23) - 127) - over;
    return Math.min(Math.max(n + k + Math.getExponent(c), 0), 255);
  }

  /**
   * The encode multiplier {@code s ~ 2^(f-k) / c} of a group (class doc, step 5: codes are {@code fp8(w * s)} for its
   * pre-scaled, transformed values {@code w}): {@code inv * 2^(f-k-e(c))} ({@code inv = inverseMantissa(c)}; an
   * exponent add when the result is a normal float, else {@code Math.scalb}), then lowered by an ulp while
   * {@code m * s > FP8MAX} (the roundings of {@code inv} and {@code y} may put the max an ulp above it), so that no
   * finite group saturates. Finite for every finite input: {@code s ~ FP8MAX / m} with {@code m} in [2^-104, 2^105]
   * (the pre-scale clamp and the WHT's sqrt(G)).
   *
   * @param m the group's transformed absmax, {@code c} the row's coarse scale (positive normal), {@code f} the fine
   *     exponent, {@code k} the pre-scale exponent
   */
  public static float encodeScale(float m, float c, float inv, int f, int k, int format) {
    int e = f - k - Math.getExponent(c);
    int bits = Float.floatToRawIntBits(inv);
    int biased = (bits >>> 23) + e;
    float s = biased >= 1 && biased <= 254 ? Float.intBitsToFloat(bits + (e << 23)) : Math.scalb(inv, e);
    for (int i = 0; i < 4 && m * s > Fp8.maxValue(format); i++) { // at most 2 in practice; bounded all the same
      s = Float.intBitsToFloat(Float.floatToRawIntBits(s) - 1);
    }
    return s;
  }

  /**
   * Decodes one value {@code d} (an FP8 value after the inverse transform) of a group with coarse scale {@code c > 0}
   * and fine exponent {@code f}: {@code d * ds} with {@code ds = decodeScale(c, f)} when {@code ds} is a normal float
   * (one rounding: one multiply per value), else {@code scalb(d * mant(c), e(c) - f)} (groups more than 2^126 below
   * float32's range top would lose {@code ds} to underflow); not clamped.
   */
  public static float decodeValue(float d, float ds, float c, int f) {
    if (ds >= Float.MIN_NORMAL) {
      return d * ds;
    }
    int ec = Math.getExponent(c);
    return Math.scalb(d * Math.scalb(c, -ec), ec - f);
  }

  /** The decode multiplier {@code c * 2^-f} of a group, rounded once ({@link #decodeValue}). */
  public static float decodeScale(float c, int f) {
    return Math.scalb(c, -f);
  }

  /**
   * Phase 1: per row, the coarse scale {@code c_r} (see class doc), written as float32 LE at
   * {@code out[scaleOff + 4r]}. Computed from the finite values only; a row holding NaN/Inf gets {@code -c_r}
   * (at least {@code MIN_NORMAL}), which tells both phases to skip the transform for that row.
   *
   * @param x input, {@code rows x cols} row-major from {@code xOff}; NaN/Inf only under the propagate policy
   * @param format {@link Fp8#E4M3} or {@link Fp8#E5M2}
   */
  public static void rowScales(float[] x, int xOff, int rows, int cols, int groupSize, int format, boolean hadamard,
      byte[] out, int scaleOff) {
    for (@Parallel int r = 0; r < rows; r++) {
      float a = 0f;
      boolean special = false;
      int base = xOff + r * cols;
      for (int i = 0; i < cols; i++) {
        float e = Math.abs(x[base + i]);
        if (e <= Float.MAX_VALUE) {
          a = Math.max(a, e);
        } else {
          special = true;
        }
      }
      float c = 0f;
      if (a > 0f || special) {
        c = coarseScale(a, groupSize, format, hadamard);
      }
      Bytes.putFloat(out, scaleOff + 4 * r, special ? -c : c);
    }
  }

  /**
   * Phase 2: per group, ASH pre-scale, WHT, fine exponent and FP8 codes (see class doc). Reads the coarse scales
   * written by {@link #rowScales} at {@code out[scaleOff ..]}.
   *
   * @param alpha ASH strength in [0, 1]
   * @param dualScale write a per-group fine exponent at {@code fineOff} (false: taco-no-ds, every group uses
   *     {@code f_t = 0}, i.e. the row's coarse scale only, and nothing is written at {@code fineOff})
   * @param work scratch, at least {@code rows*ng*G} floats (group {@code t} uses {@code [t*G, t*G+G)})
   * @param sat per-group saturation counts out, at least {@code rows*ng} ints
   */
  public static void encodeGroups(float[] x, int xOff, int rows, int cols, int groupSize, int format, float alpha,
      boolean hadamard, boolean dualScale, float[] work, int[] sat, byte[] out, int scaleOff, int fineOff,
      int codeOff) {
    float fp8Max = Fp8.maxValue(format);
    int ng = groupsPerRow(cols, groupSize);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int src = xOff + r * cols + c0;
      int w = t * groupSize;
      int codes = codeOff + t * groupSize;
      float a = 0f;
      for (int i = 0; i < len; i++) {
        float e = Math.abs(x[src + i]);
        if (e <= Float.MAX_VALUE) {
          a = Math.max(a, e);
        }
      }
      float c = Bytes.getFloat(out, scaleOff + 4 * r);
      boolean transform = hadamard && Float.floatToRawIntBits(c) >= 0;
      c = Math.abs(c);
      int s = 0;
      if (a == 0f) {
        if (dualScale) {
          out[fineOff + t] = 0;
        }
        for (int i = 0; i < groupSize; i++) {
          out[codes + i] = i < len ? nonFiniteCode(x[src + i], format) : 0; // 0, or the NaN/Inf code
        }
      } else {
        int k = preScaleExponent(a, alpha);
        for (int i = 0; i < groupSize; i++) {
          work[w + i] = i < len ? Math.scalb(x[src + i], k) : 0f;
        }
        if (transform) {
          Hadamard.fwht(work, w, groupSize);
        }
        float m = 0f;
        for (int i = 0; i < groupSize; i++) {
          float e = Math.abs(work[w + i]);
          if (e <= Float.MAX_VALUE) {
            m = Math.max(m, e);
          }
        }
        float inv = inverseMantissa(c);
        int f = dualScale ? fineExponent(m, c, inv, k, format) : 0;
        float es = encodeScale(m, c, inv, f, k, format);
        if (dualScale) {
          out[fineOff + t] = (byte) f;
        }
        for (int i = 0; i < groupSize; i++) {
          float v = work[w + i] * es;
          if (Math.abs(v) > fp8Max && v <= Float.MAX_VALUE && v >= -Float.MAX_VALUE) {
            s++;
          }
          out[codes + i] = Float.isInfinite(v) ? nonFiniteCode(v, format) : Fp8.encode(v, format);
        }
      }
      sat[t] = s;
    }
  }

  /** The code of a non-finite value: NaN for NaN (and for Inf in E4M3, which has none), Inf in E5M2; 0 for finite. */
  private static byte nonFiniteCode(float v, int format) {
    if (!Float.isInfinite(v)) {
      return Float.isNaN(v) ? Fp8.encode(v, format) : 0;
    }
    int sign = v < 0 ? 0x80 : 0;
    return (byte) (sign | (format == Fp8.E4M3 ? 0x7F : 0x7C));
  }

  /**
   * Decompress (and optionally accumulate): {@code out[outOff + r*cols + c] (+)= x^[r][c]}. The payload must have
   * been validated ({@link #firstInvalid}); padding is dropped.
   *
   * A negative coarse scale marks a row sent untransformed (it held NaN/Inf); NaN/Inf codes decode to NaN/Inf.
   *
   * @param dualScale as in {@link #encodeGroups}: false means there are no fine exponents ({@code f_t = 0})
   * @param work scratch, at least {@code rows*ng*G} floats
   */
  public static void decodeGroups(byte[] in, int scaleOff, int fineOff, int codeOff, int rows, int cols,
      int groupSize, int format, boolean hadamard, boolean dualScale, float[] work, float[] out, int outOff,
      boolean accumulate) {
    int ng = groupsPerRow(cols, groupSize);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int dst = outOff + r * cols + c0;
      int w = t * groupSize;
      int codes = codeOff + t * groupSize;
      float c = Bytes.getFloat(in, scaleOff + 4 * r);
      boolean transform = hadamard && Float.floatToRawIntBits(c) >= 0;
      c = Math.abs(c);
      if (c == 0f) {
        for (int i = 0; i < len; i++) {
          out[dst + i] = accumulate ? out[dst + i] : 0f;
        }
      } else {
        int f = dualScale ? in[fineOff + t] & 0xFF : 0;
        float ds = decodeScale(c, f);
        for (int i = 0; i < groupSize; i++) {
          work[w + i] = Fp8.decode(in[codes + i], format);
        }
        if (transform) {
          Hadamard.fwht(work, w, groupSize);
        }
        for (int i = 0; i < len; i++) {
          // Clamp: a value within one FP8 step of the float32 max may round past it; never decode a finite code
          // to Inf (an Inf code stays Inf, NaN stays NaN).
          float d = work[w + i];
          float v = decodeValue(d, ds, c, f);
          if (Float.isInfinite(v) && !Float.isInfinite(d)) {
            v = Math.copySign(Float.MAX_VALUE, v);
          }
          out[dst + i] = accumulate ? out[dst + i] + v : v;
        }
      }
    }
  }

  /**
   * Decompress-reduce, step 1 of 2 (docs/design.md §3.5): adds one payload's dequantised codes to a rotated-domain
   * accumulator, <em>without</em> the inverse transform: for every group {@code t = r*ng + g} of a row whose coarse
   * scale {@code c_r} is not zero, {@code acc[accOff + t*G + i] += decodeValue(fp8(code[t*G + i]), decodeScale(c_r,
   * f_t), c_r, f_t)} for {@code i < G}; a row with {@code c_r = 0} adds nothing. The transform is linear and every
   * scale is per group, so summing the peers here and transforming the sum once ({@link #finishReduce}) equals, up to
   * float rounding, decoding each peer and summing. The caller must not mix in rows sent untransformed (negative
   * coarse scale, NaN/Inf rows under the propagate policy): it decodes those rows fully instead.
   *
   * @param acc {@code rows * ng * G} floats ({@code ng = ceil(cols/G)}; the padding of each row's last group
   *     included, since the transform mixes it), added to
   * @param dualScale as in {@link #encodeGroups}
   */
  public static void dequantAccumulate(byte[] in, int scaleOff, int fineOff, int codeOff, int rows, int cols,
      int groupSize, int format, boolean dualScale, float[] acc, int accOff) {
    int ng = groupsPerRow(cols, groupSize);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      float c = Math.abs(Bytes.getFloat(in, scaleOff + 4 * r));
      if (c != 0f) {
        int f = dualScale ? in[fineOff + t] & 0xFF : 0;
        float ds = decodeScale(c, f);
        int codes = codeOff + t * groupSize;
        int a = accOff + t * groupSize;
        for (int i = 0; i < groupSize; i++) {
          acc[a + i] += decodeValue(Fp8.decode(in[codes + i], format), ds, c, f);
        }
      }
    }
  }

  /**
   * Decompress-reduce, step 2 of 2 (docs/design.md §3.5): the inverse transform of the accumulated sum, once per group:
   * {@code sum[sumOff + r*cols + j] = H(acc)[r*ngG + j]} for {@code j < cols}, with {@code H} the orthonormal WHT of each
   * group ({@link Hadamard#fwht}, applied in place to {@code acc}) when {@code hadamard}, else the identity. The
   * caller then adds its own exact contribution, {@code sum + own}. Not clamped: a sum beyond float32's range is
   * +-Inf.
   *
   * @param acc {@code rows * ngG} floats from {@link #dequantAccumulate}, overwritten by the transform
   */
  public static void finishReduce(float[] acc, int accOff, int rows, int cols, int groupSize, boolean hadamard,
      float[] sum, int sumOff) {
    int ng = groupsPerRow(cols, groupSize);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int a = accOff + t * groupSize;
      if (hadamard) {
        Hadamard.fwht(acc, a, groupSize);
      }
      for (int i = 0; i < len; i++) {
        sum[sumOff + r * cols + c0 + i] = acc[a + i];
      }
    }
  }

  /**
   * Validates a body (after its checksum): every coarse scale is +0 or a finite normal positive float, and no FP8
   * code is NaN/Inf. Fine exponents need no check (all 256 values are valid). With {@code nonFinite} (the
   * header's flag 0x80), scales may also be negative normals (untransformed rows) and codes may be NaN/Inf.
   *
   * @return -1 if valid; {@code r} for a bad scale of row {@code r}; {@code rows + j} for a bad code at index j
   */
  public static long firstInvalid(byte[] in, int scaleOff, int codeOff, int rows, int nCodes, int format,
      boolean nonFinite) {
    for (int r = 0; r < rows; r++) {
      float c = Bytes.getFloat(in, scaleOff + 4 * r);
      float m = nonFinite ? Math.abs(c) : c;
      if (!(c == 0f && Float.floatToRawIntBits(c) == 0) && !(m >= Float.MIN_NORMAL && m <= Float.MAX_VALUE)) {
        return r;
      }
    }
    for (int j = 0; !nonFinite && j < nCodes; j++) {
      if (Fp8.isNonFinite(in[codeOff + j], format)) {
        return (long) rows + j;
      }
    }
    return -1;
  }
}
