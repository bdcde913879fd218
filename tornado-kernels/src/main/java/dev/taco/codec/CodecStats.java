package dev.taco.codec;

/**
 * Per-tensor quality figures of a codec round trip (docs/design.md §3), all computed in float64.
 *
 * <p>Two zero-collapse figures, because they answer different questions. The element-level rate (docs/design.md §3's
 * definition) counts every non-zero input decoded as exactly 0; it is not 0 even for a good FP8 codec, since
 * values below a group's quantisation step (about 2^-17 of the group max for E4M3 without Hadamard) and exact
 * cancellations in the inverse Hadamard transform both give 0. The group-level rate is the failure Dual-Scale
 * quantisation is built to prevent (docs/design.md §3.3 (b)): a group holding a non-zero value decoded as all zeros.
 *
 * @param n number of elements, {@code rows*cols}
 * @param relL2 relative L2 error {@code ||y - x|| / ||x||} (0 if both are zero; +Inf if only x is zero)
 * @param snrDb signal-to-noise ratio {@code 10 log10(||x||^2 / ||y - x||^2)} in dB (+Inf for an exact round trip)
 * @param cosine cosine similarity of x and y (1 if both are zero)
 * @param maxAbsErr {@code max |y_i - x_i|}
 * @param zeroCollapseRate fraction of the non-zero inputs decoded as exactly 0 (0 if there are none)
 * @param groupCollapseRate fraction of the groups ({@code G} contiguous values along a row, the last one of a row
 *     possibly short) holding a non-zero input that decode to all zeros (0 if there are none)
 * @param saturated encode-side count of values clipped to the format's largest finite value
 *     ({@link EncodeResult#saturated})
 * @param bytesPerElement payload bytes (header included) divided by n
 */
public record CodecStats(int n, double relL2, double snrDb, double cosine, double maxAbsErr,
    double zeroCollapseRate, double groupCollapseRate, long saturated, double bytesPerElement) {

  /**
   * The relative L2 error alone of one encode/decode of the {@code rows x cols} tensor {@code x} (from index 0) through
   * {@code codec}: {@link #measure}'s {@code relL2}, the same bits, without the other statistics (a calibration
   * compares dozens of candidate plans by this one number).
   *
   * @throws IllegalArgumentException as the codec's encode
   */
  public static double relL2(AbstractCodec codec, float[] x, int rows, int cols) {
    byte[] buf = new byte[codec.encodedSize(rows, cols)];
    int bytes = codec.encode(x, 0, rows, cols, buf, 0);
    float[] y = new float[rows * cols];
    codec.decode(buf, 0, bytes, y, 0, false);
    double[] s = squares(x, y, y.length);
    return s[0] == 0 ? (s[1] == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(s[1] / s[0]);
  }

  /**
   * {@code {x·x, e·e}}, {@code e = y - x}, over the first {@code n} values, in double: four running sums each (value
   * {@code i} into sum {@code i % 4}), added pairwise at the end, since one running sum waits out every add's latency
   * and a calibration sums half a million squares per candidate plan.
   */
  static double[] squares(float[] x, float[] y, int n) {
    double x0 = 0, x1 = 0, x2 = 0, x3 = 0, e0 = 0, e1 = 0, e2 = 0, e3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
      double a0 = x[i], a1 = x[i + 1], a2 = x[i + 2], a3 = x[i + 3];
      double d0 = y[i] - a0, d1 = y[i + 1] - a1, d2 = y[i + 2] - a2, d3 = y[i + 3] - a3;
      x0 += a0 * a0;
      x1 += a1 * a1;
      x2 += a2 * a2;
      x3 += a3 * a3;
      e0 += d0 * d0;
      e1 += d1 * d1;
      e2 += d2 * d2;
      e3 += d3 * d3;
    }
    for (; i < n; i++) {
      double a = x[i], d = y[i] - a;
      x0 += a * a;
      e0 += d * d;
    }
    return new double[] {(x0 + x1) + (x2 + x3), (e0 + e1) + (e2 + e3)};
  }

  /**
   * Computes the figures for {@code x} and its decoded {@code y}, both {@code rows x cols} row-major from index 0.
   *
   * @param groupSize G for the group-level collapse rate (any positive value; use the codec's)
   * @param payloadBytes payload size in bytes
   * @param saturated saturation count reported by the encoder
   */
  public static CodecStats of(float[] x, float[] y, int rows, int cols, int groupSize, long payloadBytes,
      long saturated) {
    int n = rows * cols;
    double[] sq = squares(x, y, n); // relL2's sums, so both give the same bits
    double xx = sq[0];
    double ee = sq[1];
    double yy = 0;
    double xy = 0;
    double maxAbs = 0;
    long nonZero = 0;
    long collapsed = 0;
    for (int i = 0; i < n; i++) {
      double a = x[i];
      double b = y[i];
      double d = b - a;
      yy += b * b;
      xy += a * b;
      maxAbs = Math.max(maxAbs, Math.abs(d));
      if (a != 0) {
        nonZero++;
        if (b == 0) {
          collapsed++;
        }
      }
    }
    long groups = 0;
    for (int r = 0; r < rows; r++) {
      for (int c0 = 0; c0 < cols; c0 += groupSize) {
        boolean any = false;
        for (int c = c0; c < Math.min(cols, c0 + groupSize); c++) {
          any |= x[r * cols + c] != 0;
        }
        groups += any ? 1 : 0;
      }
    }
    long dead = collapsedGroups(x, y, rows, cols, groupSize);
    double rel = xx == 0 ? (ee == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(ee / xx);
    double snr = ee == 0 ? Double.POSITIVE_INFINITY : 10 * Math.log10(xx / ee); // exact, all-zero input included
    double cos = xx == 0 && yy == 0 ? 1 : xy / Math.sqrt(xx * yy);
    return new CodecStats(n, rel, snr, cos, maxAbs, nonZero == 0 ? 0 : (double) collapsed / nonZero,
        groups == 0 ? 0 : (double) dead / groups, saturated, n == 0 ? 0 : (double) payloadBytes / n);
  }

  /**
   * Encodes and decodes {@code x} ({@code rows x cols}) with {@code codec} and measures the round trip; the group
   * size for the group-level collapse rate is the codec's (64 for codecs without groups).
   *
   * @throws IllegalArgumentException as {@link Codec#encode}
   */
  public static CodecStats measure(AbstractCodec codec, float[] x, int rows, int cols) {
    byte[] buf = new byte[codec.encodedSize(rows, cols)];
    EncodeResult r = codec.encodeWithStats(x, 0, rows, cols, buf, 0);
    float[] y = new float[rows * cols];
    codec.decode(buf, 0, r.bytes(), y, 0, false);
    int g = codec.groupSize() > 0 ? codec.groupSize() : 64;
    return of(x, y, rows, cols, g, r.bytes(), r.saturated());
  }

  /**
   * The number of groups ({@code G} contiguous values along a row; the last one of a row may be short) that hold a
   * non-zero input but decode to all zeros. {@code x}, {@code y}: {@code rows x cols} row-major from index 0.
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
    return String.format("n=%d relL2=%.4e snr=%.2fdB cos=%.6f maxAbs=%.3e collapse(el)=%.2e collapse(grp)=%.2e "
        + "sat=%d B/el=%.4f", n, relL2, snrDb, cosine, maxAbsErr, zeroCollapseRate, groupCollapseRate, saturated,
        bytesPerElement);
  }
}
