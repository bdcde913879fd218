package dev.taco.codec;

/**
 * Per-tensor quality figures of a codec round trip (DESIGN §3), all computed in float64.
 *
 * @param n number of elements
 * @param relL2 relative L2 error {@code ||y - x|| / ||x||} (0 if both are zero; +Inf if only x is zero)
 * @param snrDb signal-to-noise ratio {@code 10 log10(||x||^2 / ||y - x||^2)} in dB (+Inf for an exact round trip)
 * @param cosine cosine similarity of x and y (1 if both are zero)
 * @param maxAbsErr {@code max |y_i - x_i|}
 * @param zeroCollapseRate fraction of the non-zero inputs that decode to exactly 0 (DESIGN §3 definition;
 *     element level; 0 if x has no non-zero value). See {@link #collapsedGroups} for the group-level count.
 * @param saturated encode-side count of values clipped to the format's largest finite value
 *     ({@link EncodeResult#saturated})
 * @param bytesPerElement payload bytes (header included) divided by n
 */
public record CodecStats(int n, double relL2, double snrDb, double cosine, double maxAbsErr,
    double zeroCollapseRate, long saturated, double bytesPerElement) {

  /**
   * Computes the figures for {@code x[0..n)} and its decoded {@code y[0..n)}.
   *
   * @param payloadBytes payload size in bytes
   * @param saturated saturation count reported by the encoder
   */
  public static CodecStats of(float[] x, float[] y, int n, long payloadBytes, long saturated) {
    double xx = 0;
    double yy = 0;
    double xy = 0;
    double ee = 0;
    double maxAbs = 0;
    long nonZero = 0;
    long collapsed = 0;
    for (int i = 0; i < n; i++) {
      double a = x[i];
      double b = y[i];
      double d = b - a;
      xx += a * a;
      yy += b * b;
      xy += a * b;
      ee += d * d;
      maxAbs = Math.max(maxAbs, Math.abs(d));
      if (a != 0) {
        nonZero++;
        if (b == 0) {
          collapsed++;
        }
      }
    }
    double rel = xx == 0 ? (ee == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(ee / xx);
    double snr = 10 * Math.log10(xx / ee);
    double cos = xx == 0 && yy == 0 ? 1 : xy / Math.sqrt(xx * yy);
    return new CodecStats(n, rel, snr, cos, maxAbs, nonZero == 0 ? 0 : (double) collapsed / nonZero, saturated,
        n == 0 ? 0 : (double) payloadBytes / n);
  }

  /**
   * Encodes and decodes {@code x} ({@code rows x cols}) with {@code codec} and measures the round trip.
   *
   * @throws IllegalArgumentException as {@link Codec#encode}
   */
  public static CodecStats measure(AbstractCodec codec, float[] x, int rows, int cols) {
    byte[] buf = new byte[codec.encodedSize(rows, cols)];
    EncodeResult r = codec.encodeWithStats(x, 0, rows, cols, buf, 0);
    float[] y = new float[rows * cols];
    codec.decode(buf, 0, r.bytes(), y, 0, false);
    return of(x, y, rows * cols, r.bytes(), r.saturated());
  }

  /**
   * Group-level zero collapse: the number of groups (G contiguous values along a row; the last one of a row may be
   * short) that hold a non-zero input but decode to all zeros.
   */
  public static long collapsedGroups(float[] x, float[] y, int rows, int cols, int groupSize) {
    long count = 0;
    for (int r = 0; r < rows; r++) {
      for (int c0 = 0; c0 < cols; c0 += groupSize) {
        boolean anyX = false;
        boolean anyY = false;
        for (int c = c0; c < Math.min(cols, c0 + groupSize); c++) {
          anyX |= x[r * cols + c] != 0;
          anyY |= y[r * cols + c] != 0;
        }
        if (anyX && !anyY) {
          count++;
        }
      }
    }
    return count;
  }

  @Override
  public String toString() {
    return String.format("n=%d relL2=%.4e snr=%.2fdB cos=%.6f maxAbs=%.3e collapse=%.3e sat=%d B/el=%.4f", n, relL2,
        snrDb, cosine, maxAbsErr, zeroCollapseRate, saturated, bytesPerElement);
  }
}
