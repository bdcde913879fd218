package dev.taco.kernels;

/**
 * Per-group absmax quantisation, the kernels behind the baselines of docs/design.md §3: {@code int8-group} (Flash
 * Communication), {@code int4-group}, {@code fp8-group}, {@code fp8-tensor} (one group spanning the tensor, called
 * as a {@code 1 x n} view with {@code G = n}) and {@code hadamard-int8} (QuaRot / QuIP# style: orthonormal WHT of
 * each group, then int8).
 *
 * <h2>Numerics</h2>
 * Groups of {@code G} contiguous values along each row ({@code ng = ceil(cols/G)} per row, the last one possibly
 * short). Per group {@code t} the float32 absmax {@code a} of its <em>finite</em> values is stored (after the
 * transform when there is one); the codes are {@code q = Q(x / a * QMAX)} and decode is
 * {@code x^ = D(q) / QMAX * a}, where for the code kinds:
 * <ul>
 *   <li>{@link #INT8}: QMAX 127, {@code Q = rint} clamped to [-127, 127] (round to nearest even), one byte;
 *   <li>{@link #INT4}: QMAX 7, {@code Q = rint} clamped to [-7, 7], two codes a byte (element {@code 2j} in the low
 *       nibble, {@code 2j+1} in the high nibble, two's complement);
 *   <li>{@link #E4M3}: QMAX 448, {@code Q} = OCP E4M3 round-to-nearest-even ({@link Fp8#encodeE4M3}), one byte.
 * </ul>
 * Storing the absmax rather than {@code a / QMAX} keeps every step clear of float32 overflow and underflow; since
 * {@code |x / a| <= 1}, no finite value saturates. An all-zero group has {@code a = 0} and codes 0, decoding to
 * exact zeros.
 *
 * <h2>Non-finite values</h2>
 * The callers refuse NaN/Inf input unless their policy is {@code propagate}. Then the scale is computed from the
 * finite values only and a non-finite value is written as the marker code: -128 ({@link #INT8}), -8
 * ({@link #INT4}) or the E4M3 NaN code {@code 0x7F | sign} ({@link #E4M3}), all of which decode to NaN (these
 * formats have no infinity). With the Hadamard transform, a group holding a non-finite value is sent
 * <em>untransformed</em> (the transform would smear the NaN over the group) and marked by a negative stored
 * scale ({@code -a}); its other values keep the plain int8 error.
 *
 * <h2>Layout</h2>
 * {@code rows*ng} float32 LE scales at {@code scaleOff}; codes at {@code codeOff} in rows of
 * {@link #codeStride} codes: {@code cols} (int8/fp8), {@code cols} rounded up to even (int4, so that no byte is
 * shared by two rows), or {@code ng*G} (Hadamard: groups are zero-padded to G, since the transform mixes the
 * padding). Kernel style as in docs/design.md §5: {@link Parallel} loop over groups, primitive arrays, no allocation.
 */
public final class GroupKernels {
  private GroupKernels() {}

  /** Code kind: int8 in [-127, 127], one byte a value. */
  public static final int INT8 = 0;
  /** Code kind: int4 in [-7, 7], two values a byte. */
  public static final int INT4 = 1;
  /** Code kind: OCP FP8 E4M3, one byte a value. */
  public static final int E4M3 = 2;

  /** Largest code magnitude of {@code kind}: 127, 7 or 448. */
  public static float qmax(int kind) {
    return kind == INT8 ? 127f : kind == INT4 ? 7f : Fp8.E4M3_MAX;
  }

  /**
   * Codes per row in the body (see class doc); a long, since a row of nearly 2^31 values padded to whole groups or an
   * even count passes 2^31 - 1 (the codec then refuses the size).
   */
  public static long codeStride(int cols, int groupSize, int kind, boolean hadamard) {
    if (hadamard) {
      return (long) TacoKernels.groupsPerRow(cols, groupSize) * groupSize;
    }
    return kind == INT4 ? cols + (long) (cols & 1) : cols;
  }

  /** Code bytes of a {@code rows x cols} body (may exceed 2^31 for a forged header: long). */
  public static long codeBytes(int rows, int cols, int groupSize, int kind, boolean hadamard) {
    long codes = (long) rows * codeStride(cols, groupSize, kind, hadamard);
    return kind == INT4 ? codes / 2 : codes;
  }

  /**
   * Encodes {@code rows x cols} floats from {@code x[xOff]} into scales and codes.
   *
   * @param groupSize G (any positive value; a power of two when {@code hadamard})
   * @param kind {@link #INT8}, {@link #INT4} or {@link #E4M3}
   * @param hadamard transform each zero-padded group with {@link Hadamard#fwht} first
   * @param work scratch of {@code rows*ng*G} floats when {@code hadamard}, else unused (may be empty)
   */
  public static void encode(float[] x, int xOff, int rows, int cols, int groupSize, int kind, boolean hadamard,
      float[] work, byte[] out, int scaleOff, int codeOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    int stride = (int) codeStride(cols, groupSize, kind, hadamard); // the body fits an array: so does a row
    float qm = qmax(kind);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int src = xOff + r * cols + c0;
      int code = r * stride + c0;
      if (!hadamard) {
        encodeGroup(x, src, len, qm, kind, out, scaleOff + 4 * t, codeOff, code);
        continue;
      }
      float a = 0f;
      boolean special = false;
      for (int i = 0; i < len; i++) {
        float e = Math.abs(x[src + i]);
        if (e <= Float.MAX_VALUE) {
          a = Math.max(a, e);
        } else {
          special = true;
        }
      }
      float stored;
      int w = t * groupSize;
      for (int i = 0; i < groupSize; i++) {
        work[w + i] = i < len ? x[src + i] : 0f;
      }
      if (special) {
        stored = -a;
      } else {
        Hadamard.fwht(work, w, groupSize);
        a = 0f;
        for (int i = 0; i < groupSize; i++) {
          a = Math.max(a, Math.abs(work[w + i]));
        }
        stored = a;
      }
      Bytes.putFloat(out, scaleOff + 4 * t, stored);
      writeCodes(work, w, groupSize, a, qm, kind, out, codeOff, code);
    }
  }

  /**
   * One group without a transform, as {@link #encode} writes it: the absmax {@code a} of the finite values among
   * {@code x[src .. src + len)} at {@code out[scaleAt]} (float32 LE), then the codes {@code Q(x / a * qm)} from code
   * index {@code code} of the code region at {@code codeOff} (int4: two a byte). A device function for the GPU's
   * two-shot kernels too ({@code kernels.gpu.GroupTwoShotKernels}), so both write the same bytes.
   */
  public static void encodeGroup(float[] x, int src, int len, float qm, int kind, byte[] out, int scaleAt,
      int codeOff, int code) {
    float a = 0f;
    for (int i = 0; i < len; i++) {
      float e = Math.abs(x[src + i]);
      if (e <= Float.MAX_VALUE) {
        a = Math.max(a, e);
      }
    }
    Bytes.putFloat(out, scaleAt, a);
    writeCodes(x, src, len, a, qm, kind, out, codeOff, code);
  }

  /** The codes {@code Q(v / a * qm)} of {@code v[vOff .. vOff + m)} from code index {@code code} (int4: two a byte). */
  private static void writeCodes(float[] v, int vOff, int m, float a, float qm, int kind, byte[] out, int codeOff,
      int code) {
    for (int i = 0; i < m; i += 2) {
      int q0 = quantise(v[vOff + i], a, qm, kind);
      int q1 = i + 1 < m ? quantise(v[vOff + i + 1], a, qm, kind) : 0;
      if (kind == INT4) {
        out[codeOff + ((code + i) >> 1)] = (byte) ((q0 & 0xF) | (q1 << 4));
      } else {
        out[codeOff + code + i] = (byte) q0;
        if (i + 1 < m) {
          out[codeOff + code + i + 1] = (byte) q1;
        }
      }
    }
  }

  /** One code: {@code Q(x / a * qm)}; 0 when {@code a = 0}; the marker for a non-finite x (the GPU kernels call it too). */
  public static int quantise(float x, float a, float qm, int kind) {
    if (!(Math.abs(x) <= Float.MAX_VALUE)) {
      return kind == INT8 ? -128 : kind == INT4 ? -8 : Fp8.encodeE4M3(Math.copySign(Float.NaN, x));
    }
    float s = a == 0f ? 0f : x / a * qm;
    if (kind == E4M3) {
      return Fp8.encodeE4M3(s);
    }
    return (int) Math.max(-qm, Math.min(qm, (float) Math.rint(s)));
  }

  /** The value of a code: {@code D(q)}, NaN for a marker (the GPU's two-shot kernels decode with it too). */
  public static float dequantise(int q, int kind) {
    if (kind == E4M3) {
      return Fp8.decodeE4M3((byte) q);
    }
    return q == (kind == INT8 ? -128 : -8) ? Float.NaN : q;
  }

  /** The code at index {@code j} of the code region (sign-extended; int4 nibbles unpacked). */
  private static int codeAt(byte[] in, int codeOff, long j, int kind) {
    if (kind == INT4) {
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
      float a = Bytes.getFloat(in, scaleOff + 4 * t);
      if (hadamard) {
        int w = t * groupSize;
        for (int i = 0; i < groupSize; i++) {
          work[w + i] = dequantise(codeAt(in, codeOff, code + i, kind), kind) / qm * Math.abs(a);
        }
        if (Float.floatToRawIntBits(a) >= 0) { // sign bit clear: transformed group
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

  /**
   * Validates a body (after its checksum). Without {@code nonFinite}: every scale is finite and {@code >= +0}, and
   * no code is a marker (-128, -8, E4M3 NaN). With it, markers are allowed, and so are negative scales (only with
   * {@code hadamard}: an untransformed group); int4 padding nibbles are not checked.
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
        if (Float.isNaN(dequantise(codeAt(in, codeOff, j, kind), kind))) {
          return nScales + j;
        }
      }
    }
    return -1;
  }
}
