package dev.taco.runtime.model;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.CodecStats;
import dev.taco.codec.Codecs;
import dev.taco.collective.Communicator;
import dev.taco.collective.CompressedCommunicator;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The tensor-parallel all-reduces of one rank, per collective site, with TACO's data-driven reshaping (DESIGN §3.1).
 *
 * <p>A site is one all-reduce of the model: {@code layer3.mlp.fwd} is the row-parallel fc2 output of block 3 in the
 * forward pass, {@code layer3.attn.bwd} the gradient of the attention input in the backward pass. Each site has a
 * plan: the codec's group size G, whether the Walsh–Hadamard transform is on, and an optional channel permutation
 * that deals the loudest channels round-robin over the groups of a row so no group holds two outliers. The first
 * {@code calibrationSteps} tensors seen at a site calibrate it: every candidate plan is measured (relative L2 error of
 * one encode/decode), the errors are summed over ranks with an exact all-reduce so every rank picks the same plan,
 * and the plan is frozen; {@code recalibrateInterval > 0} starts a new calibration every that many uses.
 *
 * <p>Without calibration (or for a codec without a group size) every site uses the one communicator given. The
 * tensor at a site is (rows, cols) row-major, cols = hidden size; groups run along cols.
 */
public final class CollectiveSites {
  /** Number of {@link Layout}s a calibration tries per candidate codec. */
  private static final int NL = Layout.values().length;

  /** Group sizes a calibration tries. */
  static final int[] GROUP_SIZES = {32, 64, 128, 256};

  /** One site's frozen plan and the error it measured (summed over ranks, averaged over the calibration tensors). */
  public record Plan(String codec, int groupSize, boolean hadamard, Layout layout, double relL2) {}

  /**
   * How a site's (rows, cols) tensor is laid out on the wire, i.e. along which axis its groups of G run:
   * {@code IN_ORDER} along the hidden axis as computed, {@code PERMUTED} along the hidden axis after the spreading
   * channel permutation, {@code TOKEN_AXIS} along the token axis (the tensor is sent transposed).
   */
  public enum Layout { IN_ORDER, PERMUTED, TOKEN_AXIS }

  /**
   * Mean codec error over the tensors sampled at the sites of one direction ({@code fwd} or {@code bwd}): one
   * encode/decode of this rank's all-reduce input through the codec and plan its site uses.
   *
   * @param rel_l2 ||decode(encode(x)) - x|| / ||x||
   * @param snr_db 10 log10(||x||^2 / ||err||^2)
   * @param zero_collapse_rate fraction of non-zero inputs decoded as exactly 0
   * @param saturated values that hit the format's largest finite value, summed
   * @param bytes_per_element payload bytes over elements
   * @param samples tensors measured
   */
  public record SampledError(double rel_l2, double snr_db, double zero_collapse_rate, long saturated,
      double bytes_per_element, int samples) {}

  private final Communicator exact;
  private final Communicator fixed;
  private final String spec;
  private final int calibrationSteps;
  private final int recalibrateInterval;
  private final List<String> candidates = new ArrayList<>();
  private final Map<String, Site> sites = new LinkedHashMap<>();
  private final AbstractCodec defaultCodec;
  private final Map<String, double[]> sampled = new LinkedHashMap<>();
  private boolean sampling;

  /**
   * @param exact the exact transport (float32, used for the plan agreement and under every codec)
   * @param spec the codec name given by the user ({@code fp32} = no codec)
   * @param calibrationSteps tensors per site to calibrate on; 0 disables calibration
   * @param recalibrateInterval uses of a site between calibrations; 0 = calibrate once
   */
  public CollectiveSites(Communicator exact, String spec, int calibrationSteps, int recalibrateInterval) {
    if (calibrationSteps < 0) throw new IllegalArgumentException("calibration steps must be >= 0, got " + calibrationSteps);
    if (recalibrateInterval < 0) throw new IllegalArgumentException("--recalibrate-interval must be >= 0, got " + recalibrateInterval);
    this.exact = exact;
    this.spec = spec;
    this.defaultCodec = spec.equals("fp32") ? null : Codecs.byName(spec);
    this.fixed = defaultCodec == null ? exact : new CompressedCommunicator(exact, defaultCodec);
    this.calibrationSteps = calibrationSteps;
    this.recalibrateInterval = recalibrateInterval;
    if (calibrationSteps > 0) {
      String base = spec.contains(":") ? spec + "," : spec + ":";
      if (spec.startsWith("taco")) {
        for (int g : GROUP_SIZES) for (String h : new String[] {"on", "off"}) candidates.add(base + "g=" + g + ",hadamard=" + h);
      } else if (spec.startsWith("int8-group")) {
        for (int g : GROUP_SIZES) candidates.add(base + "g=" + g);
      }
    }
  }

  /** Every site through {@code comm} as it is (no codec of its own, no calibration). */
  public static CollectiveSites fixed(Communicator comm) {
    return new CollectiveSites(comm, comm, "fixed", 0, 0);
  }

  private CollectiveSites(Communicator exact, Communicator fixed, String spec, int calibrationSteps, int recalibrateInterval) {
    this.exact = exact;
    this.fixed = fixed;
    this.defaultCodec = null;
    this.spec = spec;
    this.calibrationSteps = calibrationSteps;
    this.recalibrateInterval = recalibrateInterval;
  }

  public int rank() {
    return exact.rank();
  }

  public int worldSize() {
    return exact.worldSize();
  }

  /** The codec name this rank's sites were built from. */
  public String spec() {
    return spec;
  }

  /** Bytes this rank has sent through all sites. */
  public long bytesSent() {
    return exact.bytesSent();
  }

  /** The plan of every site calibrated so far, by site name (insertion order: first use). */
  public Map<String, Plan> plans() {
    Map<String, Plan> out = new LinkedHashMap<>();
    sites.forEach((name, s) -> {
      if (s.plan != null) out.put(name, s.plan);
    });
    return out;
  }

  /** While on, every all-reduce also measures its codec's error on this rank's input (see {@link #sampledErrors}). */
  public void setSampling(boolean on) {
    sampling = on;
  }

  /** The sampled codec error by direction ({@code fwd}, {@code bwd}); empty when nothing was sampled. */
  public Map<String, SampledError> sampledErrors() {
    Map<String, SampledError> out = new LinkedHashMap<>();
    sampled.forEach((dir, a) -> out.put(dir, new SampledError(a[0] / a[5], a[1] / a[5], a[2] / a[5], (long) a[3],
        a[4] / a[5], (int) a[5])));
    return out;
  }

  private void sample(String name, AbstractCodec codec, float[] buf, int rows, int cols) {
    // one row, as the compressed all-reduce hands the codec its chunks (1 x len): same groups, same bytes
    CodecStats st = CodecStats.measure(codec, Arrays.copyOf(buf, rows * cols), 1, rows * cols);
    double[] a = sampled.computeIfAbsent(name.substring(name.lastIndexOf('.') + 1), k -> new double[6]);
    a[0] += st.relL2();
    a[1] += st.snrDb();
    a[2] += st.zeroCollapseRate();
    a[3] += st.saturated();
    a[4] += st.bytesPerElement();
    a[5]++;
  }

  /**
   * Sum all-reduce of the (rows, cols) tensor {@code buf[0, rows*cols)} at site {@code name}, through that site's plan.
   */
  public void allReduce(String name, float[] buf, int rows, int cols) {
    try {
      allReduceAt(name, buf, rows, cols);
    } catch (IllegalArgumentException e) {
      // the codec refused the tensor (NaN/Inf): say which collective site it was
      throw new IllegalArgumentException("all-reduce at " + name + ": " + e.getMessage(), e);
    }
  }

  private void allReduceAt(String name, float[] buf, int rows, int cols) {
    int n = rows * cols;
    if (candidates.isEmpty()) {
      if (sampling && defaultCodec != null) sample(name, defaultCodec, buf, rows, cols);
      fixed.allReduce(buf, 0, n);
      return;
    }
    Site site = sites.computeIfAbsent(name, k -> new Site());
    if (site.uses % Math.max(1, recalibrateInterval) == 0 && (recalibrateInterval > 0 || site.uses == 0)) {
      site.startCalibration();
    }
    site.uses++;
    if (site.calibrating > 0) site.measure(buf, rows, cols);
    Communicator comm = site.comm != null ? site.comm : fixed;
    AbstractCodec codec = site.codec != null ? site.codec : defaultCodec;
    if (site.layout == Layout.IN_ORDER) {
      if (sampling) sample(name, codec, buf, rows, cols);
      comm.allReduce(buf, 0, n);
      return;
    }
    float[] tmp = site.scratch(n);
    toWire(buf, tmp, site.layout, site.perm, rows, cols);
    if (sampling) sample(name, codec, tmp, rows, cols);
    comm.allReduce(tmp, 0, n);
    fromWire(tmp, buf, site.layout, site.perm, rows, cols);
  }

  /** Lays the (rows, cols) tensor {@code src} out as {@code layout} sends it, into {@code dst}. */
  static void toWire(float[] src, float[] dst, Layout layout, int[] perm, int rows, int cols) {
    if (layout == Layout.PERMUTED) permute(src, dst, perm, rows, cols, false);
    else transpose(src, dst, rows, cols);
  }

  /** Inverse of {@link #toWire}. */
  static void fromWire(float[] src, float[] dst, Layout layout, int[] perm, int rows, int cols) {
    if (layout == Layout.PERMUTED) permute(src, dst, perm, rows, cols, true);
    else transpose(src, dst, cols, rows);
  }

  /** dst(cols, rows) = src(rows, cols)^T. */
  static void transpose(float[] src, float[] dst, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
      for (int j = 0; j < cols; j++) dst[j * rows + r] = src[r * cols + j];
    }
  }

  /** dst[r, j] = src[r, perm[j]] (or the inverse: dst[r, perm[j]] = src[r, j]). */
  static void permute(float[] src, float[] dst, int[] perm, int rows, int cols, boolean inverse) {
    for (int r = 0; r < rows; r++) {
      int o = r * cols;
      for (int j = 0; j < cols; j++) {
        if (inverse) dst[o + perm[j]] = src[o + j];
        else dst[o + j] = src[o + perm[j]];
      }
    }
  }

  /**
   * The permutation that deals channels, loudest first, round-robin over the {@code cols / g} groups of a row: slot
   * {@code j} of the permuted row holds channel {@code perm[j]}. Null when a row holds one group.
   */
  static int[] spreadingPermutation(double[] channelEnergy, int g) {
    int cols = channelEnergy.length;
    int groups = cols / g;
    if (groups < 2 || cols % g != 0) return null;
    Integer[] order = new Integer[cols];
    for (int j = 0; j < cols; j++) order[j] = j;
    Arrays.sort(order, (a, b) -> Double.compare(channelEnergy[b], channelEnergy[a]));
    int[] perm = new int[cols];
    for (int i = 0; i < cols; i++) perm[(i % groups) * g + i / groups] = order[i];
    return perm;
  }

  /** One site's state: calibration sums, then the frozen plan. */
  private final class Site {
    int uses;
    int calibrating;
    int seen;
    double[] errors; // per candidate x Layout
    double[] energy;
    Plan plan;
    Layout layout = Layout.IN_ORDER;
    AbstractCodec codec;
    Communicator comm;
    int[] perm;
    float[] scratch;

    void startCalibration() {
      calibrating = calibrationSteps;
      seen = 0;
      errors = new double[candidates.size() * NL];
      energy = null;
    }

    float[] scratch(int n) {
      if (scratch == null || scratch.length < n) scratch = new float[n];
      return scratch;
    }

    /** Adds this rank's errors for every candidate plan on this tensor; freezes the plan after the last one. */
    void measure(float[] buf, int rows, int cols) {
      int n = rows * cols;
      float[] x = Arrays.copyOf(buf, n);
      // channel energies summed over ranks, so every rank derives the same permutation
      float[] e = new float[cols];
      for (int r = 0; r < rows; r++) for (int j = 0; j < cols; j++) e[j] += x[r * cols + j] * x[r * cols + j];
      exact.allReduce(e, 0, cols);
      if (energy == null) energy = new double[cols];
      for (int j = 0; j < cols; j++) energy[j] += e[j];
      float[] err = new float[errors.length];
      float[] px = new float[n];
      for (int c = 0; c < candidates.size(); c++) {
        AbstractCodec codec = Codecs.byName(candidates.get(c));
        int[] p = spreadingPermutation(toDouble(e), groupSize(c));
        for (Layout l : Layout.values()) {
          int i = NL * c + l.ordinal();
          if (l == Layout.PERMUTED && p == null) {
            err[i] = Float.POSITIVE_INFINITY;
            continue;
          }
          float[] wire = l == Layout.IN_ORDER ? x : px;
          if (l != Layout.IN_ORDER) toWire(x, px, l, p, rows, cols);
          err[i] = (float) CodecStats.measure(codec, wire, 1, n).relL2(); // 1 x n, as on the wire
        }
      }
      exact.allReduce(err, 0, err.length);
      for (int i = 0; i < err.length; i++) errors[i] += err[i];
      seen++;
      if (--calibrating == 0) freeze(cols);
    }

    private void freeze(int cols) {
      double min = Double.POSITIVE_INFINITY;
      for (double e : errors) min = Math.min(min, e);
      // among the plans within 1 % of the lowest error, take the cheapest: largest G, then no permutation, then
      // no Hadamard transform
      int best = -1;
      for (int i = 0; i < errors.length; i++) {
        if (!(errors[i] <= min * 1.01)) continue;
        if (best < 0 || cheaper(i, best)) best = i;
      }
      int c = best / NL;
      layout = Layout.values()[best % NL];
      String codecSpec = candidates.get(c);
      codec = Codecs.byName(codecSpec);
      int g = groupSize(c);
      comm = new CompressedCommunicator(exact, codec, g);
      perm = layout == Layout.PERMUTED ? spreadingPermutation(energy, g) : null;
      int ranks = exact.worldSize();
      plan = new Plan(codecSpec, g, hadamard(c), layout, errors[best] / (seen * ranks));
    }
  }

  /** True if plan index {@code a} (candidate x permutation) costs less than {@code b}. */
  private boolean cheaper(int a, int b) {
    int ga = groupSize(a / NL), gb = groupSize(b / NL);
    if (ga != gb) return ga > gb;
    if (a % NL != b % NL) return a % NL < b % NL; // in order, then permuted, then transposed: less data movement
    return !hadamard(a / NL) && hadamard(b / NL);
  }

  private boolean hadamard(int candidate) {
    String s = candidates.get(candidate);
    return s.startsWith("taco") && !s.contains("hadamard=off");
  }

  private int groupSize(int candidate) {
    String s = candidates.get(candidate);
    int i = s.indexOf("g=");
    int end = s.indexOf(',', i);
    return Integer.parseInt(s.substring(i + 2, end < 0 ? s.length() : end));
  }

  private static double[] toDouble(float[] a) {
    double[] d = new double[a.length];
    for (int i = 0; i < a.length; i++) d[i] = a[i];
    return d;
  }
}
