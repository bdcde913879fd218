package dev.taco.kernels;

/**
 * Per-group absmax quantisation, the kernels behind the baselines of docs/design.md §3: {@code int8-group} (Flash
 * Communication), {@code int4-group}, {@code fp8-group}, {@code fp8-tensor} (one group spanning the tensor, called
 * as a {@code 1 x n} view with {@code G = n}), {@code hadamard-int8} (QuaRot / QuIP# style: orthonormal WHT of
 * each group, then int8), and the block-scaled 4-bit floats {@code mxfp4} and {@code nvfp4}.
 *
 * <h2>Numerics</h2>
 * Groups of {@code G} contiguous values along each row ({@code ng = ceil(cols/G)} per row, the last one possibly
 * short). Per group {@code t} a float scale {@code a} follows from the absmax {@code m} of its <em>finite</em>
 * values (after the transform when there is one); the codes are {@code q = Q(x / a * QMAX)} and decode is
 * {@code x^ = D(q) / QMAX * a}, where for the code kinds:
 * <ul>
 *   <li>{@link #INT8}: {@code a = m}, QMAX 127, {@code Q = rint} clamped to [-127, 127] (round to nearest even), one
 *       byte;
 *   <li>{@link #INT4}: {@code a = m}, QMAX 7, {@code Q = rint} clamped to [-7, 7], two codes a byte (element
 *       {@code 2j} in the low nibble, {@code 2j+1} in the high nibble, two's complement);
 *   <li>{@link #E4M3}: {@code a = m}, QMAX 448, {@code Q} = OCP E4M3 round-to-nearest-even ({@link Fp8#encodeE4M3}),
 *       one byte;
 *   <li>{@link #MXFP4} (OCP MX v1.0, G = 32): {@code a = X = 2^(floor(log2 m) - 2)} (at least 2^-127), the block's
 *       E8M0 shared scale ({@link Fp4#mxScaleCode}); QMAX 1, {@code Q} = E2M1 round-to-nearest-even saturating at
 *       +-6 ({@link Fp4#encodeE2M1}); nibbles packed as int4's. Magnitudes in (6X, 8X) are clipped to 6X: the spec's
 *       rule puts the block's maximum in [4X, 8X);
 *   <li>{@link #NVFP4} (G = 16, NVIDIA's two-level scaling with the second level per row): per row the absmax
 *       {@code A} of its groups' {@code m}; per group the E4M3 block scale {@code s = E4M3(m / A * 448)} (the
 *       block's {@code m / 6} in units of the row's decode scale {@code A / (6 * 448)}, so the row's largest block
 *       scale is 448, E4M3's top), {@code a = E4M3(s) * (A / 2688)}; QMAX 1, {@code Q} as MXFP4's. Where E4M3 rounded
 *       {@code s} down, values up to {@code 6 (1 + 2^-4) a} are clipped to {@code 6a}; a group below about
 *       {@code 2^-19 A} gets {@code s = 0} and decodes to zeros.
 * </ul>
 * For the integer and E4M3 kinds storing the absmax rather than {@code a / QMAX} keeps every step clear of float32
 * overflow and underflow; since {@code |x / a| <= 1}, no finite value saturates. An all-zero group has codes 0,
 * decoding to exact zeros. The E2M1 kinds count the values they clip ({@link #encode}'s {@code clipped}); their input
 * is limited to finite magnitudes up to {@link #FP4_MAX_INPUT}, so that neither the transform's sums nor a decoder's
 * can overflow float32.
 *
 * <h2>Non-finite values</h2>
 * The callers refuse NaN/Inf input unless their policy is {@code propagate}. Then the scale is computed from the
 * finite values only and a non-finite value is written as the marker code: -128 ({@link #INT8}), -8
 * ({@link #INT4}), the E4M3 NaN code {@code 0x7F | sign} ({@link #E4M3}) or the E2M1 nibble {@code 0x8}, -0
 * ({@link #MXFP4}, {@link #NVFP4}: a finite value that rounds to zero is always sent as +0, so this code is free), all
 * of which decode to NaN (these formats have no infinity). With the Hadamard transform, a group holding a non-finite
 * value is sent <em>untransformed</em> (the transform would smear the NaN over the group), marked by a negative
 * stored scale ({@code -a}) for the float scales and, for the E2M1 kinds, whose scales have no sign, by the marker
 * codes it holds; its other values keep the untransformed error.
 *
 * <h2>Layout</h2>
 * The scale region at {@code scaleOff} ({@link #scaleBytes}): {@code rows*ng} float32 LE scales; for
 * {@link #MXFP4} {@code rows*ng} E8M0 bytes; for {@link #NVFP4} {@code rows} float32 LE row absmaxes, then
 * {@code rows*ng} E4M3 bytes. Codes at {@code codeOff} in rows of {@link #codeStride} codes: {@code cols}
 * (int8/fp8), {@code cols} rounded up to even (int4 and the E2M1 kinds, so that no byte is shared by two rows), or
 * {@code ng*G} (Hadamard: groups are zero-padded to G, since the transform mixes the padding). Kernel style as in
 * docs/design.md §5: {@link Parallel} loops over groups (and rows, for NVFP4's row absmax), primitive arrays, no
 * allocation.
 */
public final class GroupKernels {
  private GroupKernels() {}

  /** Code kind: int8 in [-127, 127], one byte a value. */
  public static final int INT8 = 0;
  /** Code kind: int4 in [-7, 7], two values a byte. */
  public static final int INT4 = 1;
  /** Code kind: OCP FP8 E4M3, one byte a value. */
  public static final int E4M3 = 2;
  /** Code kind: OCP MXFP4, E2M1 two values a byte, one E8M0 scale byte per group of 32. */
  public static final int MXFP4 = 3;
  /** Code kind: NVFP4, E2M1 two values a byte, one E4M3 scale byte per group of 16 and one float32 per row. */
  public static final int NVFP4 = 4;

  /**
   * The largest finite magnitude the E2M1 kinds take, 2^119 (about 6.6e35): the transformed absmax stays below
   * 2^122, so MXFP4's scale stays at most {@link #MX_MAX_SCALE} and NVFP4's row absmax at most {@link #NV_MAX_ROW}.
   */
  public static final float FP4_MAX_INPUT = 0x1p119f;

  /**
   * The largest valid MXFP4 scale code, 247 ({@code 2^120}): its values, up to {@code 6 * 2^120}, stay finite through
   * the inverse transform's sums of 32.
   */
  public static final int MX_MAX_SCALE = 127 + 120;

  /** The largest valid NVFP4 row absmax, 2^123: decoded values stay below {@code 2^123 (1 + 2^-20)}, and their sums of 16. */
  public static final float NV_MAX_ROW = 0x1p123f;

  /** NVFP4's row decode scale divisor {@code 6 * 448}: E2M1's largest value times E4M3's. */
  static final float NV_ROW_SPAN = Fp4.E2M1_MAX * Fp8.E4M3_MAX;

  /** Largest code magnitude of {@code kind}: 127, 7 or 448; 1 for the E2M1 kinds (their codes are values of {@code x / a}). */
  public static float qmax(int kind) {
    return kind == INT8 ? 127f : kind == INT4 ? 7f : kind == E4M3 ? Fp8.E4M3_MAX : 1f;
  }

  /** True for the E2M1 kinds, {@link #MXFP4} and {@link #NVFP4}. */
  public static boolean fp4(int kind) {
    return kind == MXFP4 || kind == NVFP4;
  }

  /** True for the kinds with two codes a byte: {@link #INT4} and the E2M1 kinds. */
  public static boolean nibbles(int kind) {
    return kind == INT4 || fp4(kind);
  }

  /** The group size the format fixes: 32 ({@link #MXFP4}), 16 ({@link #NVFP4}); 0 for the other kinds (any G). */
  public static int blockSize(int kind) {
    return kind == MXFP4 ? 32 : kind == NVFP4 ? 16 : 0;
  }

  /**
   * Codes per row in the body (see class doc); a long, since a row of nearly 2^31 values padded to whole groups or an
   * even count passes 2^31 - 1 (the codec then refuses the size).
   */
  public static long codeStride(int cols, int groupSize, int kind, boolean hadamard) {
    if (hadamard) {
      return (long) TacoKernels.groupsPerRow(cols, groupSize) * groupSize;
    }
    return nibbles(kind) ? cols + (long) (cols & 1) : cols;
  }

  /** Code bytes of a {@code rows x cols} body (may exceed 2^31 for a forged header: long). */
  public static long codeBytes(int rows, int cols, int groupSize, int kind, boolean hadamard) {
    long codes = (long) rows * codeStride(cols, groupSize, kind, hadamard);
    return nibbles(kind) ? codes / 2 : codes;
  }

  /** Bytes of the scale region of a {@code rows x cols} body (see the class doc's layout). */
  public static long scaleBytes(int rows, int cols, int groupSize, int kind) {
    long groups = (long) rows * TacoKernels.groupsPerRow(cols, groupSize);
    return kind == MXFP4 ? groups : kind == NVFP4 ? 4L * rows + groups : 4 * groups;
  }

  /** Where the scale of group {@code t} of a {@code rows}-row body is, from the scale region at {@code scaleOff}. */
  public static int scaleAt(int scaleOff, int rows, int t, int kind) {
    return kind == MXFP4 ? scaleOff + t : kind == NVFP4 ? scaleOff + 4 * rows + t : scaleOff + 4 * t;
  }

  /**
   * Encodes {@code rows x cols} floats from {@code x[xOff]} into scales and codes. For {@link #NVFP4} the row
   * absmaxes must be in the scale region already ({@link #rowMaxima}).
   *
   * @param groupSize G (any positive value; a power of two when {@code hadamard}; the format's for the E2M1 kinds)
   * @param kind {@link #INT8}, {@link #INT4}, {@link #E4M3}, {@link #MXFP4} or {@link #NVFP4}
   * @param hadamard transform each zero-padded group with {@link Hadamard#fwht} first
   * @param work scratch of {@code rows*ng*G} floats when {@code hadamard}, else unused (may be empty)
   * @param clipped out: per group, how many of its values were clipped to the largest code (E2M1 kinds; the others
   *     write 0), {@code rows*ng} ints
   */
  public static void encode(float[] x, int xOff, int rows, int cols, int groupSize, int kind, boolean hadamard,
      float[] work, byte[] out, int scaleOff, int codeOff, int[] clipped) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    int stride = (int) codeStride(cols, groupSize, kind, hadamard); // the body fits an array: so does a row
    float qm = qmax(kind);
    int scales = scaleAt(scaleOff, rows, 0, kind); // group t's scale at scales + width * t
    int width = fp4(kind) ? 1 : 4;
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int src = xOff + r * cols + c0;
      int code = r * stride + c0;
      float rowMax = kind == NVFP4 ? Bytes.getFloat(out, scaleOff + 4 * r) : 0f;
      if (!hadamard) {
        int n = encodeGroup(x, src, len, qm, kind, rowMax, out, scales + width * t, codeOff, code);
        clipped[t] = n;
        continue;
      }
      int w = t * groupSize;
      boolean special = transform(x, src, len, groupSize, work, w);
      float m = groupMax(work, w, groupSize, special);
      float a = putScale(out, scales + width * t, special && !fp4(kind) ? -m : m, rowMax, kind);
      int n = writeCodes(work, w, groupSize, Math.abs(a), qm, kind, out, codeOff, code);
      clipped[t] = n;
    }
  }

  /**
   * {@link #NVFP4}'s first pass: per row the absmax {@code A} of its groups' absmaxes ({@link #groupMax}, after the
   * transform when {@code hadamard}), float32 LE at {@code out[scaleOff + 4r]}. Arguments as {@link #encode}.
   */
  public static void rowMaxima(float[] x, int xOff, int rows, int cols, int groupSize, boolean hadamard,
      float[] work, byte[] out, int scaleOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    for (@Parallel int r = 0; r < rows; r++) {
      float rowMax = 0f;
      for (int g = 0; g < ng; g++) {
        int c0 = g * groupSize;
        int len = Math.min(groupSize, cols - c0);
        int src = xOff + r * cols + c0;
        if (hadamard) {
          int w = (r * ng + g) * groupSize;
          rowMax = Math.max(rowMax, groupMax(work, w, groupSize, transform(x, src, len, groupSize, work, w)));
        } else {
          rowMax = Math.max(rowMax, groupMax(x, src, len, true));
        }
      }
      Bytes.putFloat(out, scaleOff + 4 * r, rowMax);
    }
  }

  /**
   * {@code work[w .. w + G)} = the group {@code x[src .. src + len)} zero-padded to G, Walsh-Hadamard transformed
   * unless it holds NaN/Inf; returns whether it does (the group then goes untransformed).
   */
  private static boolean transform(float[] x, int src, int len, int groupSize, float[] work, int w) {
    boolean special = false;
    for (int i = 0; i < groupSize; i++) {
      work[w + i] = i < len ? x[src + i] : 0f;
      special |= !(Math.abs(work[w + i]) <= Float.MAX_VALUE);
    }
    if (!special) {
      Hadamard.fwht(work, w, groupSize);
    }
    return special;
  }

  /**
   * The absmax of {@code v[off .. off + n)}: of its finite values when {@code finiteOnly}, else of all of them (a
   * transformed group's, where an overflow in the transform shows as a non-finite maximum).
   */
  private static float groupMax(float[] v, int off, int n, boolean finiteOnly) {
    float m = 0f;
    for (int i = 0; i < n; i++) {
      float e = Math.abs(v[off + i]);
      if (!finiteOnly || e <= Float.MAX_VALUE) {
        m = Math.max(m, e);
      }
    }
    return m;
  }

  /**
   * One group without a transform, as {@link #encode} writes it: its scale from the absmax {@code m} of the finite
   * values among {@code x[src .. src + len)} at {@code out[scaleAt]} ({@link #putScale}; {@code rowMax}: NVFP4's row
   * absmax, else unused), then the codes {@code Q(x / a * qm)} from code index {@code code} of the code region at
   * {@code codeOff} (int4 and E2M1: two a byte). Returns how many values were clipped ({@link #writeCodes}). A device
   * function for the GPU's two-shot kernels too ({@code kernels.gpu.GroupTwoShotKernels}), so both write the same
   * bytes.
   */
  public static int encodeGroup(float[] x, int src, int len, float qm, int kind, float rowMax, byte[] out,
      int scaleAt, int codeOff, int code) {
    float a = putScale(out, scaleAt, groupMax(x, src, len, true), rowMax, kind);
    return writeCodes(x, src, len, a, qm, kind, out, codeOff, code);
  }

  /**
   * Writes the scale of a group of absmax {@code m} at {@code out[at]} and returns the scale {@code a} its codes are
   * quantised against (see the class doc): {@code m} itself as float32 LE (integer and E4M3 kinds), the E8M0 byte of
   * {@link Fp4#mxScaleCode} ({@link #MXFP4}), or the E4M3 block scale relative to the row's absmax {@code rowMax}
   * ({@link #NVFP4}).
   */
  public static float putScale(byte[] out, int at, float m, float rowMax, int kind) {
    if (kind == MXFP4) {
      int c = Fp4.mxScaleCode(m);
      out[at] = (byte) c;
      return Fp4.decodeE8M0(c);
    }
    if (kind == NVFP4) {
      int c = quantise(m, rowMax, Fp8.E4M3_MAX, E4M3);
      out[at] = (byte) c;
      return nvScale(c, rowMax);
    }
    Bytes.putFloat(out, at, m);
    return m;
  }

  /**
   * The scale {@code a} stored at {@code in[at]} as {@link #putScale} wrote it (the float itself for the integer and
   * E4M3 kinds, sign included).
   */
  public static float getScale(byte[] in, int at, float rowMax, int kind) {
    return kind == MXFP4 ? Fp4.decodeE8M0(in[at] & 0xFF)
        : kind == NVFP4 ? nvScale(in[at] & 0xFF, rowMax) : Bytes.getFloat(in, at);
  }

  /** {@link #NVFP4}: the scale of a group of E4M3 block scale {@code s} in a row of absmax {@code rowMax}. */
  public static float nvScale(int s, float rowMax) {
    return Fp8.decodeE4M3((byte) s) * (rowMax / NV_ROW_SPAN);
  }

  /**
   * The codes {@code Q(v / a * qm)} of {@code v[vOff .. vOff + m)} from code index {@code code} (int4, E2M1: two a
   * byte); returns how many the E2M1 kinds clipped ({@link #clips}).
   */
  private static int writeCodes(float[] v, int vOff, int m, float a, float qm, int kind, byte[] out, int codeOff,
      int code) {
    int clipped = 0;
    for (int i = 0; i < m; i += 2) {
      int q0 = quantise(v[vOff + i], a, qm, kind);
      int q1 = i + 1 < m ? quantise(v[vOff + i + 1], a, qm, kind) : 0;
      clipped += clips(q0, v[vOff + i], a, kind) + (i + 1 < m ? clips(q1, v[vOff + i + 1], a, kind) : 0);
      if (nibbles(kind)) {
        out[codeOff + ((code + i) >> 1)] = (byte) ((q0 & 0xF) | (q1 << 4));
      } else {
        out[codeOff + code + i] = (byte) q0;
        if (i + 1 < m) {
          out[codeOff + code + i + 1] = (byte) q1;
        }
      }
    }
    return clipped;
  }

  /**
   * 1 if {@code x}, coded as {@code q}, was clipped to E2M1's largest value: {@code |x / a| > 6} (E2M1 kinds; only a
   * code of magnitude 6 can be one), else 0.
   */
  static int clips(int q, float x, float a, int kind) {
    return fp4(kind) && (q & 7) == 7 && Math.abs(x / a) > Fp4.E2M1_MAX ? 1 : 0;
  }

  /**
   * One code: {@code Q(x / a * qm)}; 0 when {@code a = 0}; the marker for a non-finite x (the GPU kernels call it
   * too). E2M1 codes are nibbles (0..15, never 8).
   */
  public static int quantise(float x, float a, float qm, int kind) {
    if (!(Math.abs(x) <= Float.MAX_VALUE)) {
      return kind == INT8 ? -128 : kind == E4M3 ? Fp8.encodeE4M3(Math.copySign(Float.NaN, x)) : -8;
    }
    float s = a == 0f ? 0f : x / a * qm;
    if (kind == E4M3) {
      return Fp8.encodeE4M3(s);
    }
    if (fp4(kind)) {
      int c = Fp4.encodeE2M1(s);
      return (c & 7) == 0 ? 0 : c; // -0 is the marker: a value that rounds to zero goes as +0
    }
    return (int) Math.max(-qm, Math.min(qm, (float) Math.rint(s)));
  }

  /**
   * The value of a code: {@code D(q)}, NaN for a marker (the GPU's two-shot kernels decode with it too). E2M1 codes
   * are read from the low nibble of {@code q}.
   */
  public static float dequantise(int q, int kind) {
    if (kind == E4M3) {
      return Fp8.decodeE4M3((byte) q);
    }
    if (fp4(kind)) {
      return (q & 0xF) == 8 ? Float.NaN : Fp4.decodeE2M1(q);
    }
    return q == (kind == INT8 ? -128 : -8) ? Float.NaN : q;
  }

  /** The code at index {@code j} of the code region (sign-extended; int4 and E2M1 nibbles unpacked). */
  private static int codeAt(byte[] in, int codeOff, long j, int kind) {
    if (nibbles(kind)) {
      int b = in[codeOff + (int) (j >> 1)];
      return (j & 1) == 0 ? (b << 28) >> 28 : b >> 4;
    }
    return in[codeOff + (int) j];
  }

  /**
   * Decodes (or accumulates into) {@code out[outOff ..]}, {@code rows x cols}; the body must have been validated by
   * {@link #firstInvalid}. Arguments as {@link #encode}; {@code work} is scratch of {@code rows*ng*G} floats when
   * {@code hadamard}.
   */
  public static void decode(byte[] in, int scaleOff, int codeOff, int rows, int cols, int groupSize, int kind,
      boolean hadamard, float[] work, float[] out, int outOff, boolean accumulate) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    int stride = (int) codeStride(cols, groupSize, kind, hadamard); // the body fits an array: so does a row
    float qm = qmax(kind);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int dst = outOff + r * cols + c0;
      int code = r * stride + c0;
      float rowMax = kind == NVFP4 ? Bytes.getFloat(in, scaleOff + 4 * r) : 0f;
      float a = getScale(in, scaleAt(scaleOff, rows, t, kind), rowMax, kind);
      if (hadamard) {
        int w = t * groupSize;
        for (int i = 0; i < groupSize; i++) {
          work[w + i] = dequantise(codeAt(in, codeOff, code + i, kind), kind) / qm * Math.abs(a);
        }
        // an untransformed group: a negative float scale, or (E2M1 kinds, unsigned scales) a marker among its codes
        if (fp4(kind) ? !holdsNaN(work, w, groupSize) : Float.floatToRawIntBits(a) >= 0) {
          Hadamard.fwht(work, w, groupSize);
        }
        for (int i = 0; i < len; i++) {
          out[dst + i] = accumulate ? out[dst + i] + work[w + i] : work[w + i];
        }
      } else {
        for (int i = 0; i < len; i++) {
          float v = dequantise(codeAt(in, codeOff, code + i, kind), kind) / qm * a;
          out[dst + i] = accumulate ? out[dst + i] + v : v;
        }
      }
    }
  }

  /** Whether code {@code q} (as {@link #codeAt} reads it) is the NaN marker: {@link #dequantise} gives NaN. */
  private static boolean isMarker(int q, int kind) {
    return kind == INT8 ? q == -128 : kind == E4M3 ? (q & 0x7F) == 0x7F : (q & 0xF) == 8;
  }

  private static boolean holdsNaN(float[] v, int off, int n) {
    boolean nan = false;
    for (int i = 0; i < n; i++) {
      nan |= Float.isNaN(v[off + i]);
    }
    return nan;
  }

  /**
   * Validates a body (after its checksum). Without {@code nonFinite}: every float32 scale is finite and
   * {@code >= +0}, and no code is a marker (-128, -8, E4M3 NaN, E2M1 0x8). With it, markers are allowed, and so are
   * negative scales (only with {@code hadamard}: an untransformed group); int4 and E2M1 padding nibbles are not
   * checked. The E2M1 kinds' scales are {@link #firstInvalidScale}'s (pass {@code nScales = 0}).
   *
   * @return -1 if valid; {@code t} for a bad scale of group {@code t}; {@code nScales + j} for a bad code j
   */
  public static long firstInvalid(byte[] in, int scaleOff, int codeOff, int nScales, long nCodes, int kind,
      boolean hadamard, boolean nonFinite) {
    for (int t = 0; t < nScales; t++) {
      float a = Bytes.getFloat(in, scaleOff + 4 * t);
      boolean negative = Float.floatToRawIntBits(a) < 0;
      if (!(Math.abs(a) <= Float.MAX_VALUE) || (negative && !(hadamard && nonFinite))) {
        return t;
      }
    }
    if (!nonFinite) {
      for (long j = 0; j < nCodes; j++) {
        if (isMarker(codeAt(in, codeOff, j, kind), kind)) {
          return nScales + j;
        }
      }
    }
    return -1;
  }

  /**
   * Validates the scale region at {@code scaleOff} of an E2M1 body of {@code rows} rows of {@code ng} groups (after its
   * checksum): {@link #MXFP4}, every E8M0 code at most {@link #MX_MAX_SCALE} (so none is NaN); {@link #NVFP4}, every row
   * absmax finite, {@code >= +0} and at most {@link #NV_MAX_ROW}, every E4M3 block scale non-negative and not NaN.
   *
   * @return -1 if valid; {@code r} for a bad row absmax of row {@code r} (NVFP4); {@code rows + t} for a bad scale of
   *     group {@code t}
   */
  public static long firstInvalidScale(byte[] in, int scaleOff, int rows, int ng, int kind) {
    for (int r = 0; kind == NVFP4 && r < rows; r++) {
      float a = Bytes.getFloat(in, scaleOff + 4 * r);
      if (!(a <= NV_MAX_ROW) || Float.floatToRawIntBits(a) < 0) {
        return r;
      }
    }
    for (int t = 0; t < rows * ng; t++) {
      int c = in[scaleAt(scaleOff, rows, t, kind)] & 0xFF;
      if (kind == MXFP4 ? c > MX_MAX_SCALE : c >= 0x7F) { // E4M3: 0x7F is NaN, 0x80 up negative
        return (long) rows + t;
      }
    }
    return -1;
  }
}
