package dev.taco.kernels;

/**
 * Per-group symmetric INT8 quantisation (the {@code int8-group} baseline of DESIGN §3, as in Flash Communication).
 * Groups of {@code G} contiguous values along each row (the last group of a row may be shorter; no padding is
 * sent). Per group the float32 absmax {@code a} is stored (the scale is {@code a/127}); codes are
 * {@code q = rint(127 x / a)} in [-127, 127] (round to nearest even); decode {@code x^ = (q/127) a}. Storing the
 * absmax rather than {@code a/127} keeps every step clear of float32 overflow and underflow.
 *
 * <p>Body layout: {@code rows*ng} float32 LE absmaxes at {@code scaleOff}, then {@code rows*cols} int8 codes,
 * row-major, at {@code codeOff}. Kernel style as in DESIGN §5.
 */
public final class Int8Kernels {
  private Int8Kernels() {}

  /** Encodes {@code rows x cols} floats from {@code x[xOff]} (finite) into absmaxes and codes. */
  public static void encode(float[] x, int xOff, int rows, int cols, int groupSize, byte[] out, int scaleOff,
      int codeOff) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int src = xOff + r * cols + c0;
      int dst = codeOff + r * cols + c0;
      float a = 0f;
      for (int i = 0; i < len; i++) {
        a = Math.max(a, Math.abs(x[src + i]));
      }
      Bytes.putFloat(out, scaleOff + 4 * t, a);
      for (int i = 0; i < len; i++) {
        float q = a == 0f ? 0f : (float) Math.rint(x[src + i] / a * 127f);
        out[dst + i] = (byte) Math.max(-127f, Math.min(127f, q));
      }
    }
  }

  /** Decodes (or accumulates into) {@code out[outOff ..]}, {@code rows x cols}. The body must be validated. */
  public static void decode(byte[] in, int scaleOff, int codeOff, int rows, int cols, int groupSize, float[] out,
      int outOff, boolean accumulate) {
    int ng = TacoKernels.groupsPerRow(cols, groupSize);
    for (@Parallel int t = 0; t < rows * ng; t++) {
      int r = t / ng;
      int c0 = (t - r * ng) * groupSize;
      int len = Math.min(groupSize, cols - c0);
      int src = codeOff + r * cols + c0;
      int dst = outOff + r * cols + c0;
      float a = Bytes.getFloat(in, scaleOff + 4 * t);
      for (int i = 0; i < len; i++) {
        float v = in[src + i] / 127f * a;
        out[dst + i] = accumulate ? out[dst + i] + v : v;
      }
    }
  }

  /** @return -1 if every absmax is finite and &ge; 0 and no code is -128; else the index of the first bad scale
   *     ({@code t}) or {@code rows*ng + j} for code {@code j} */
  public static long firstInvalid(byte[] in, int scaleOff, int codeOff, int nScales, int nCodes) {
    for (int t = 0; t < nScales; t++) {
      float a = Bytes.getFloat(in, scaleOff + 4 * t);
      if (!(a >= 0f && a <= Float.MAX_VALUE) || Float.floatToRawIntBits(a) == 0x80000000) {
        return t;
      }
    }
    for (int j = 0; j < nCodes; j++) {
      if (in[codeOff + j] == Byte.MIN_VALUE) {
        return (long) nScales + j;
      }
    }
    return -1;
  }
}
