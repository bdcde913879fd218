package dev.taco.collective;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Bf16Codec;
import dev.taco.codec.CodecStats;
import dev.taco.codec.Codecs;
import dev.taco.codec.Fp8TensorCodec;
import dev.taco.codec.GroupQuantCodec;
import dev.taco.codec.Int8GroupCodec;
import dev.taco.codec.MxFp4Codec;
import dev.taco.codec.NcclFp8Codec;
import dev.taco.codec.NonFiniteInputException;
import dev.taco.codec.NvFp4Codec;
import dev.taco.codec.TacoCodec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The collectives of one rank, per collective site, with TACO's data-driven reshaping (docs/design.md §3.1): a site's
 * plan is chosen, calibrated, sampled, cached, checkpointed and released here, for the host collectives (run here, on
 * float arrays) and the device ones alike ({@code device.DeviceSiteCollectives} asks {@link #planAt} for the plan and
 * moves the data; {@link #onRelease} tells it when a plan's buffers can go).
 *
 * <p>A site ({@link Site}) is one collective of the model: {@code layer3.mlp.fwd} is the row-parallel fc2 output of
 * block 3 in the forward pass, {@code layer3.attn.bwd} the gradient of the attention input in the backward pass. Each
 * site has a typed {@link Plan}: the codec (group size G, Walsh–Hadamard transform on or off) and the wire layout (in order, a channel
 * permutation that deals the loudest channels round-robin over the groups of a row so no group holds two outliers, or
 * the token axis). The first {@code calibrationSteps} tensors seen at a site calibrate it: every candidate plan is
 * measured (relative L2 error of one encode/decode of the {@code rows x cols} tensor, one coarse scale per row as on
 * the wire), the errors are summed over ranks with an exact all-reduce so every rank picks the same plan, and the plan
 * is frozen; {@code recalibrateInterval > 0} starts a new calibration every that many uses. Evaluation passes
 * ({@link #setEvaluating}) are not uses.
 *
 * <p>Without calibration (or for a codec without a group size) every site uses the codec as given. The collectives are
 * {@link TwoShot}'s over a {@link HostWire} on the exact transport. With one rank nothing is sent, so nothing is
 * quantised, calibrated or sampled.
 */
public final class CollectiveSites {
  private static final Logger LOG = LoggerFactory.getLogger(CollectiveSites.class);

  /**
   * The error a permuted or token-axis layout must save, as a fraction of the in-order layout's, for a codec's
   * calibration to take it: those layouts move the tensor before and after every collective (on an H100 at hidden
   * 1024, TP = 2, token-axis plans cost 2 ms a step over in-order ones, a tenth of the step), and on GPT-2-like
   * activations most sites gain only 1 to 9 % from them (bench/results/gpu-e2e.md). {@code auto} prices the layouts
   * instead.
   */
  static final double LAYOUT_GAIN = 0.10;

  /** Group sizes a calibration tries. */
  static final java.util.List<Integer> GROUP_SIZES = dev.taco.codec.PayloadHeader.GROUP_SIZES;

  private static final WireLayout[] LAYOUTS = WireLayout.values();

  /**
   * Token rows a calibration step or a codec-error sample reads of a site's tensor: a contiguous block (the token axis
   * keeps its structure), the same on every rank, a different one at each calibration step. A calibration step then
   * costs the same at any micro-batch and sequence length (a GPT-2-small tensor of 8192 rows is read a sixteenth
   * at a time; the default CPU run's 1024 rows half at a time), and a GPU copies only these rows to the host. Half a
   * million values a site and step estimate a relative error far closer than the 1 % its choice rounds to, at half the
   * host time of 1024 rows.
   */
  public static final int SAMPLE_ROWS = 512;

  /**
   * The {@code --compression} that chooses per site among {@code none}, {@code fp8-tensor}, {@code int8-group}, the
   * {@code taco} plans, {@code mxfp4} and {@code nvfp4} (Hadamard on and off) and, at an all-reduce in order,
   * {@code nccl-fp8} (its calibrated error that of the FP8 ring sum, {@link NcclFp8Error}): the one of least predicted
   * time ({@link #pricing}) among those whose calibrated error passes the fidelity gate of the site's direction
   * ({@link #gate}); {@code none} (bf16) until a site has calibrated.
   */
  public static final String AUTO = "auto";

  /**
   * How much faster than bf16 a codec's predicted time must be for {@link #AUTO} to send it: 5 %, above the noise of
   * the measured work (on a loaded host two runs' predictions of the same plan differed by several per cent).
   */
  public static final double AUTO_MARGIN = 0.05;

  /** A site's tensor where it lives (a host array, device memory), for the rows a calibration or sample reads. */
  @FunctionalInterface
  public interface Rows {
    /**
     * Rows {@code [first, first + count)} of the {@code rows x cols} tensor, {@code count x cols} values row-major, a
     * copy the caller may keep.
     */
    float[] copy(int first, int count);

    /** The rows of {@code tensor}, a {@code ? x cols} host array from index 0. */
    static Rows of(float[] tensor, int cols) {
      return (first, count) -> Arrays.copyOfRange(tensor, first * cols, (first + count) * cols);
    }
  }

  /**
   * One site's frozen plan as the report shows it, with the error it measured (summed over ranks, averaged over the
   * calibration tensors).
   *
   * @param codec the codec spec ({@code taco:e4m3,g=256,alpha=1.0,hadamard=off})
   * @param groupSize G
   * @param hadamard whether the codec transforms its groups
   * @param layout the wire layout ({@code in-order}, {@code permuted}, {@code token-axis})
   * @param relL2 mean relative L2 error of one encode/decode on the calibration tensors
   * @param choice with {@code --compression auto}, why: each codec's best predicted milliseconds (and the candidates
   *     the fidelity gate turned away); null otherwise
   */
  public record CalibratedPlan(String codec, int groupSize, boolean hadamard, String layout, double relL2,
      String choice) {
    static CalibratedPlan of(Plan p, double relL2, String choice) {
      return new CalibratedPlan(p.codec().toString(), p.codec().groupSize(), transforms(p.codec()), p.layout().label(),
          relL2, choice);
    }
  }

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
  private final HostWire wire;
  private final Plan fixed;
  private final String spec;
  private final int calibrationSteps;
  private final int recalibrateInterval;
  private final List<AbstractCodec> candidates = new ArrayList<>();
  private final Map<String, SiteData> sites = new LinkedHashMap<>();
  /** The plan each site used last: a plan no site uses any more is released ({@link #onRelease}). */
  private final Map<String, Plan> inUse = new LinkedHashMap<>();
  private final List<Consumer<Plan>> releaseListeners = new ArrayList<>();
  private final Map<String, double[]> sampled = new LinkedHashMap<>();
  private boolean sampling;
  private boolean evaluating;
  private long measurements;
  private long calibrationNanos;
  private final int maxWireCols;
  private final Map<String, Long> bytesByKind = new LinkedHashMap<>();
  private boolean countingTraining;
  private final boolean auto;
  private Pricing pricing;
  private FidelityGate gate = FidelityGate.of(FidelityGate.DEFAULT);

  /**
   * @param exact the exact transport (float32: the plan agreement, and the bytes of every codec)
   * @param spec the codec name given by the user ({@code fp32} = no codec, exact)
   * @param calibrationSteps tensors per site to calibrate on; 0 disables calibration
   * @param recalibrateInterval uses of a site between calibrations; 0 = calibrate once
   * @throws IllegalArgumentException for an unknown codec or a negative count
   */
  public CollectiveSites(Communicator exact, String spec, int calibrationSteps, int recalibrateInterval) {
    this(exact, spec, calibrationSteps, recalibrateInterval, Integer.MAX_VALUE);
  }

  /**
   * As {@link #CollectiveSites(Communicator, String, int, int)}, for collectives that take at most {@code maxWireCols}
   * columns on the wire (the GPU kernels' limit, {@code TwoShotGpuKernels.MAX_COLS}): a candidate plan whose layout
   * puts more there (the token axis of a tensor with more rows) counts as infinitely bad, so calibration never freezes
   * a plan the collectives would refuse.
   *
   * @throws IllegalArgumentException also if {@code maxWireCols < 1}
   */
  public CollectiveSites(Communicator exact, String spec, int calibrationSteps, int recalibrateInterval,
      int maxWireCols) {
    if (maxWireCols < 1) throw new IllegalArgumentException("maxWireCols must be >= 1, got " + maxWireCols);
    this.maxWireCols = maxWireCols;
    if (calibrationSteps < 0)
      throw new IllegalArgumentException("calibration steps must be >= 0, got " + calibrationSteps);
    if (recalibrateInterval < 0)
      throw new IllegalArgumentException("--recalibrate-interval must be >= 0, got " + recalibrateInterval);
    this.exact = exact;
    this.wire = new HostWire(exact);
    this.spec = spec;
    this.auto = spec.equals(AUTO);
    Codecs.Spec parsed = spec.equals("fp32") || auto ? null : Codecs.parse(spec);
    AbstractCodec codec = auto ? new Bf16Codec() : parsed == null ? null : parsed.codec();
    this.fixed = Plan.of(codec);
    this.calibrationSteps = calibrationSteps;
    this.recalibrateInterval = recalibrateInterval;
    if (auto && calibrationSteps > 0 && exact.worldSize() > 1) {
      candidates.add(new Bf16Codec());
      candidates.add(new Fp8TensorCodec());
      for (int g : GROUP_SIZES) candidates.add(new Int8GroupCodec(g));
      TacoCodec taco = (TacoCodec) Codecs.byName("taco");
      for (int g : GROUP_SIZES) for (boolean h : new boolean[] {true, false}) candidates.add(taco.with(g, h));
      for (boolean h : new boolean[] {true, false}) {
        candidates.add(new MxFp4Codec(h, AbstractCodec.NonFinite.REFUSE));
        candidates.add(new NvFp4Codec(h, AbstractCodec.NonFinite.REFUSE));
      }
      candidates.add(new NcclFp8Codec()); // an all-reduce's, in order (SiteData.candidate)
    } else if (calibrationSteps > 0 && exact.worldSize() > 1 && calibrates(spec)) {
      // what the user fixed stays fixed: an explicit g= keeps G, an explicit hadamard= or an ablation (taco-no-*)
      // keeps the transform; calibration searches the rest, and the wire layout
      for (int g : GROUP_SIZES) {
        if (parsed.groupSize() != null && g != codec.groupSize()) continue;
        if (codec instanceof TacoCodec t) {
          boolean fixedH = parsed.hadamard() != null || !(t.name().equals("taco") || t.name().equals("taco-no-ds"));
          for (boolean h : fixedH ? new boolean[] {t.hadamard()} : new boolean[] {true, false})
            candidates.add(t.with(g, h));
        } else if (codec instanceof Int8GroupCodec c) {
          candidates.add(c.withGroupSize(g));
        }
      }
    }
  }

  /**
   * Whether sites of codec {@code spec} calibrate (given calibration steps and more than one rank): the codecs with a
   * group size and a plan to choose, {@code taco*} and {@code int8-group}; {@code fp32} and the others do not.
   *
   * @throws IllegalArgumentException for an unknown codec
   */
  public static boolean calibrates(String spec) {
    if (spec.equals(AUTO)) return true;
    if (spec.equals("fp32")) return false;
    AbstractCodec c = Codecs.byName(spec);
    return c instanceof TacoCodec || c instanceof Int8GroupCodec;
  }

  /** Every site exact (float32, no codec, no calibration) over {@code comm}. */
  public static CollectiveSites fixed(Communicator comm) {
    return new CollectiveSites(comm, "fp32", 0, 0);
  }

  /** This rank in the tensor-parallel group, 0..R-1. */
  public int rank() {
    return exact.rank();
  }

  /** R, the tensor-parallel group's size. */
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

  /**
   * The plan of every site calibrated so far that this run has used, by site name (insertion order: first use; a
   * restored site this run has no collective at, such as a sequence-parallel all-gather's in a run without it, is
   * left out).
   */
  public Map<String, CalibratedPlan> plans() {
    Map<String, CalibratedPlan> out = new LinkedHashMap<>();
    sites.forEach((name, s) -> {
      if (s.plan != null && s.used) out.put(name, CalibratedPlan.of(s.plan, s.relL2, s.choice));
    });
    return out;
  }

  /**
   * One site's whole state, as a checkpoint stores it ({@code train.Checkpoint}): its use count, a calibration in
   * progress (steps left, tensors seen, the error sums per candidate plan, the channel energies) and the frozen plan
   * (codec spec as {@link AbstractCodec#toString}, wire layout label, permutation) with its error. Restoring it
   * makes the site choose exactly what it would have chosen had the run not stopped.
   */
  public record SiteState(int uses, int calibrating, int seen, double[] errors, double[] energy, String codec,
      String layout, int[] permutation, double relL2) {}

  /** Every site's state, by name, in first-use order (see {@link SiteState}). */
  public Map<String, SiteState> state() {
    Map<String, SiteState> out = new LinkedHashMap<>();
    sites.forEach((name, st) -> out.put(name, new SiteState(st.uses, st.calibrating, st.seen,
        st.errors == null ? null : st.errors.clone(), st.energy == null ? null : st.energy.clone(),
        st.plan == null ? null : st.plan.exact() ? "fp32" : st.plan.codec().toString(),
        st.plan == null ? null : st.plan.layout().label(), st.plan == null ? null : st.plan.permutation(), st.relL2)));
    return out;
  }

  /**
   * Restores the sites' state saved by {@link #state} (a resumed run). Call before the first collective.
   *
   * <p>A run that calibrates nothing (one rank, {@code --calibration-steps 0}, a codec without a group size) restores
   * nothing: it sends with the codec's defaults, as it would have from its start.
   *
   * @throws IllegalArgumentException if a saved count is negative, a saved plan names an unknown codec or layout, or a
   *     calibration in progress does not match this codec's candidate plans (the checkpoint was written with another
   *     --compression)
   */
  public void restore(Map<String, SiteState> saved) {
    sites.clear();
    Map<String, SiteData> restored = new LinkedHashMap<>();
    saved.forEach((name, st) -> {
      if (st.uses() < 0 || st.calibrating() < 0 || st.seen() < 0) {
        throw new IllegalArgumentException("site " + name + ": negative counts (uses " + st.uses() + ", calibrating "
            + st.calibrating() + ", seen " + st.seen() + ")");
      }
      SiteData site = new SiteData(name);
      site.uses = st.uses();
      site.calibrating = st.calibrating();
      site.seen = st.seen();
      // a calibration in progress goes on over the same candidate plans; a frozen site's error sums are spent (the
      // next calibration starts new ones)
      boolean inProgress = st.calibrating() > 0;
      if (inProgress && !candidates.isEmpty()
          && (st.errors() == null || st.errors().length != candidates.size() * LAYOUTS.length)) {
        throw new IllegalArgumentException("site " + name + " was calibrating (" + st.seen() + " of "
            + (st.seen() + st.calibrating()) + " tensors seen) over " + (st.errors() == null ? 0 : st.errors().length)
            + " candidate plans, this run's codec has " + candidates.size() * LAYOUTS.length + ": resume with the"
            + " --compression the checkpoint was written with, or let the calibration finish before changing it");
      }
      if (inProgress && st.errors() != null) {
        for (double e : st.errors()) {
          if (!(e >= 0)) { // a sum of relative errors: +Inf where a plan does not apply, never NaN or negative
            throw new IllegalArgumentException("site " + name + ": a calibration error sum of " + e
                + " (sums are non-negative, +Inf where a plan does not apply): the checkpoint is corrupt");
          }
        }
      }
      if (!inProgress) site.calibrating = 0;
      site.errors = inProgress && st.errors() != null ? st.errors().clone() : null;
      site.energy = inProgress && st.energy() != null ? st.energy().clone() : null;
      site.relL2 = st.relL2();
      if (st.codec() != null) {
        AbstractCodec codec = st.codec().equals("fp32") ? null : Codecs.byName(st.codec());
        WireLayout layout = null;
        for (WireLayout l : LAYOUTS) if (l.label().equals(st.layout())) layout = l;
        if (layout == null) throw new IllegalArgumentException("site " + name + ": unknown wire layout " + st.layout());
        site.plan = new Plan(codec, layout, st.permutation());
      }
      restored.put(name, site);
    });
    // checked either way; kept where this run calibrates: one that calibrates nothing sends with the codec's defaults
    // (or, with one rank, sends nothing)
    if (!candidates.isEmpty()) sites.putAll(restored);
  }

  /** The sites whose calibration has not finished (no plan of their own yet). */
  public int sitesCalibrating() {
    int n = 0;
    for (SiteData s : sites.values()) if (s.calibrating > 0) n++;
    return n;
  }

  /** The typed plan {@code site} uses now ({@link #fixed} plan before or without calibration). */
  public Plan plan(Site site) {
    SiteData s = sites.get(site.name());
    return s == null || s.plan == null ? fixed : s.plan;
  }

  /**
   * Calibration steps this rank has measured so far, over all sites (it grows only while some site calibrates: a
   * caller timing a step can tell whether host calibration work fell inside it).
   */
  public long calibrationMeasurements() {
    return measurements;
  }

  /**
   * Host seconds this rank has spent calibrating plans and sampling codec error (copying the sampled rows, encoding
   * and decoding every candidate, agreeing with the other ranks): the run's cost of choosing its plans.
   */
  public double calibrationSeconds() {
    return calibrationNanos / 1e9;
  }

  /** While on, every all-reduce also measures its codec's error on this rank's input (see {@link #sampledErrors}). */
  public void setSampling(boolean on) {
    sampling = on;
  }

  /**
   * While on (an evaluation pass), every site uses the plan it has now, without a calibration step, a counted use or a
   * sample: evaluation leaves the training's plans, and so its losses, as they would be without it (as
   * {@code --eval-interval} and {@code --eval-iters} must).
   */
  public void setEvaluating(boolean on) {
    evaluating = on;
  }

  /** The sampled codec error by direction ({@code fwd}, {@code bwd}); empty when nothing was sampled. */
  public Map<String, SampledError> sampledErrors() {
    Map<String, SampledError> out = new LinkedHashMap<>();
    sampled.forEach((dir, a) -> out.put(dir, new SampledError(a[0] / a[5], a[1] / a[5], a[2] / a[5], (long) a[3],
        a[4] / a[5], (int) a[5])));
    return out;
  }

  /**
   * Sum all-reduce of the {@code rows x cols} tensor {@code buf[0, rows*cols)} at {@code site}, in place, through that
   * site's plan.
   *
   * @throws IllegalArgumentException naming the site, if the codec refuses the tensor (NaN/Inf) or the shape is bad
   * @throws dev.taco.collective.CollectiveException if the transport fails
   */
  public void allReduce(Site site, float[] buf, int rows, int cols) {
    run(CollectiveKind.ALL_REDUCE, site, buf, rows, cols, plan -> TwoShot.allReduce(wire, plan, buf, rows, cols));
  }

  /**
   * One collective of {@code kind} at {@code site}: the site's plan for {@code tensor} ({@code rows x cols},
   * {@link #planAt}), then {@code op} with it, its bytes counted, a codec's refusal named with the kind and site.
   */
  private void run(CollectiveKind kind, Site site, float[] tensor, int rows, int cols, Consumer<Plan> op) {
    // one rank sends nothing: no plan, but the collective's checks of the shapes, then its copy (or nothing)
    boolean alone = worldSize() == 1;
    Plan plan = alone ? Plan.EXACT : planAt(site, Rows.of(tensor, cols), rows, cols, kind);
    long before = exact.bytesSent();
    try {
      op.accept(plan);
    } catch (IllegalArgumentException e) {
      throw atSite(kind + " at " + site.name(), e);
    }
    if (!alone) countTrainingBytes(kind, site.direction(), exact.bytesSent() - before);
  }

  /**
   * All-gather at {@code site} (sequence parallelism's "g" before a column-parallel linear, Korthikanti et al.
   * 2022 §4.2.2): every rank's {@code shardRows x cols} shard {@code shard[0, shardRows*cols)} into {@code out}
   * ({@code R*shardRows x cols}, rank q's rows at {@code q*shardRows}), through the site's plan (its own calibration;
   * the token-axis layout is not a candidate, since the shards are the rows). With one rank: a copy.
   *
   * @throws IllegalArgumentException naming the site, if the codec refuses the tensor (NaN/Inf) or a size is bad
   * @throws dev.taco.collective.CollectiveException if the transport fails
   */
  public void allGather(Site site, float[] shard, int shardRows, int cols, float[] out) {
    run(CollectiveKind.ALL_GATHER, site, shard, shardRows, cols,
        plan -> TwoShot.allGather(wire, plan, shard, shardRows, cols, out));
  }

  /**
   * Sum reduce-scatter at {@code site} (sequence parallelism's "ḡ" after a row-parallel linear): this rank
   * receives in {@code shard} the sum over ranks of rows {@code [rank*rows/R, (rank+1)*rows/R)} of the {@code rows x
   * cols} tensor {@code x}, through the site's plan (no token-axis layout). With one rank: a copy.
   *
   * @throws IllegalArgumentException naming the site, for rows not divisible by R, a tensor the codec refuses, or a
   *     bad size
   * @throws dev.taco.collective.CollectiveException if the transport fails
   */
  public void reduceScatter(Site site, float[] x, int rows, int cols, float[] shard) {
    run(CollectiveKind.REDUCE_SCATTER, site, x, rows, cols,
        plan -> TwoShot.reduceScatter(wire, plan, x, rows, cols, shard));
  }

  /**
   * Exact (float32) sum all-reduce of {@code buf[off, off+n)} over the TP group, outside any site: the parameter
   * gradients that sequence parallelism leaves partial on each rank (LayerNorms, embeddings), which must not be lossy.
   */
  public void allReduceExact(float[] buf, int off, int n) {
    if (worldSize() == 1) return;
    long before = exact.bytesSent();
    exact.allReduce(buf, off, n);
    countExactGradientBytes(exact.bytesSent() - before);
  }

  /** The bytes-by-kind label of the exact gradient all-reduces ({@link #allReduceExact}). */
  public static final String EXACT_GRADIENTS = "all-reduce (exact, gradients)";

  /**
   * Counts {@code bytes} this rank sent in a collective of {@code kind} at a site of {@code direction} into
   * {@link #trainingBytesByKind} (while counting is on), as {@code all-reduce fwd}, {@code reduce-scatter bwd}, ...: the
   * host collectives count their own, the device ones ({@code device.DeviceSiteCollectives}) theirs.
   */
  public void countTrainingBytes(CollectiveKind kind, Site.Direction direction, long bytes) {
    if (countingTraining) bytesByKind.merge(kind.label() + " " + direction.label(), bytes, Long::sum);
  }

  /** As {@link #countTrainingBytes}, for the exact gradient all-reduces ({@link #EXACT_GRADIENTS}). */
  public void countExactGradientBytes(long bytes) {
    if (countingTraining) bytesByKind.merge(EXACT_GRADIENTS, bytes, Long::sum);
  }

  /** While on (a training step, not an evaluation), the collectives' bytes count into {@link #trainingBytesByKind}. */
  public void setCountingTraining(boolean on) {
    countingTraining = on;
  }

  /**
   * Bytes this rank has sent in training steps by collective kind and direction ({@code all-reduce fwd}, {@code
   * all-reduce bwd}, {@code all-gather fwd}, {@code reduce-scatter bwd}, ..., and {@code all-reduce (exact,
   * gradients)}); calibration's agreement traffic left out.
   */
  public Map<String, Long> trainingBytesByKind() {
    return new LinkedHashMap<>(bytesByKind);
  }

  /**
   * The plan of the next collective at {@code site}, for a tensor that lives elsewhere (a GPU's collectives move
   * it): everything {@link #allReduce} does before it moves the data, i.e. a calibration step on this use and, while
   * sampling is on, the codec-error measurement, both on at most {@link #SAMPLE_ROWS} rows of the {@code rows x cols}
   * tensor, copied from {@code tensor} only when one of them needs them. Every rank must call it for the same sites in the same order
   * (a calibration step sums over ranks on the exact transport).
   *
   * <p>The site's previous plan, if no site uses it any more (it calibrated or recalibrated away), is handed to the
   * {@link #onRelease} listeners.
   *
   * @param kind an all-reduce, whose candidates include the token-axis layout ({@link CollectiveKind#mayUseTokenAxis}),
   *     or an all-gather / reduce-scatter, which split the rows over the ranks and take the other layouts only
   *     ({@code rows} is then the shard's rows for an all-gather, the whole tensor's for a reduce-scatter)
   * @throws IllegalArgumentException naming the kind and site, if a codec refuses the tensor (NaN/Inf)
   */
  public Plan planAt(Site site, Rows tensor, int rows, int cols, CollectiveKind kind) {
    if (worldSize() == 1) {
      return fixed;
    }
    Plan p = choose(site, tensor, rows, cols, kind);
    Plan before = inUse.put(site.name(), p);
    if (before != null && !before.equals(p) && !inUse.containsValue(before)) {
      for (Consumer<Plan> l : releaseListeners) l.accept(before);
    }
    return p;
  }

  /**
   * The cost model {@link #AUTO} chooses by (required before a site of an auto run calibrates).
   *
   * @return this
   */
  public CollectiveSites pricing(Pricing pricing) {
    this.pricing = java.util.Objects.requireNonNull(pricing, "pricing");
    return this;
  }

  /**
   * {@link #AUTO}'s fidelity gate: per direction, the largest mean relative L2 error a plan may have on the site's
   * calibration tensors ({@link FidelityGate#DEFAULT} for both until set).
   *
   * @return this
   */
  public CollectiveSites gate(FidelityGate gate) {
    this.gate = java.util.Objects.requireNonNull(gate, "gate");
    return this;
  }

  /**
   * {@link #AUTO}: chooses every calibrated site's plan again with {@code next} (a changed link model), from the errors
   * its calibration measured, without measuring again; superseded plans are released at the sites' next use. Every rank
   * must call it at the same point.
   */
  public void reprice(Pricing next) {
    if (!auto) throw new IllegalStateException("only --compression auto chooses by price");
    pricing(next);
    for (SiteData d : sites.values()) {
      if (d.plan != null && d.errors != null && d.calibrating == 0 && d.rows > 0) {
        d.adopt(d.fastest(d.rows, d.cols));
      }
    }
  }

  /** Whether this rank's sites choose per site by predicted time ({@link #AUTO}). */
  public boolean auto() {
    return auto;
  }

  /**
   * Registers {@code listener} to be told of every plan no site uses any more (a device collective frees the payload
   * buffers and graphs it built for it).
   */
  public void onRelease(Consumer<Plan> listener) {
    releaseListeners.add(java.util.Objects.requireNonNull(listener, "listener"));
  }

  /** The plan of this use of {@code site}: {@link #planAt} before the bookkeeping of plans in use. */
  private Plan choose(Site site, Rows tensor, int rows, int cols, CollectiveKind kind) {
    boolean tokenAxis = kind.mayUseTokenAxis();
    String name = site.name();
    try {
      float[] host = null;
      Plan plan = fixed;
      if (evaluating) {
        SiteData data = sites.get(name);
        return data == null || data.plan == null || !fits(data.plan, tokenAxis) ? fixed : data.plan;
      }
      if (!candidates.isEmpty()) {
        SiteData data = sites.computeIfAbsent(name, SiteData::new);
        data.kind = kind;
        data.direction = site.direction();
        data.used = true;
        if (data.plan != null && !fits(data.plan, tokenAxis)) {
          // a restored plan of another kind of collective (a checkpoint without sequence parallelism resumed with it:
          // the same site name, now a reduce-scatter) does not apply: the site calibrates anew
          data.plan = null;
          if (data.calibrating == 0) data.startCalibration();
        }
        if (data.uses % Math.max(1, recalibrateInterval) == 0 && (recalibrateInterval > 0 || data.uses == 0)) {
          data.startCalibration();
        }
        data.uses++;
        if (data.calibrating > 0) {
          long t0 = System.nanoTime();
          int first = Math.min(rows, SAMPLE_ROWS) * (data.seen % Math.max(1, rows / SAMPLE_ROWS));
          host = tensor.copy(first, Math.min(rows, SAMPLE_ROWS));
          data.measure(host, Math.min(rows, SAMPLE_ROWS), rows, cols);
          calibrationNanos += System.nanoTime() - t0;
        }
        if (data.plan != null) plan = data.plan;
      }
      if (sampling && !plan.exact()) {
        long t0 = System.nanoTime();
        int n = Math.min(rows, SAMPLE_ROWS);
        sample(site, plan, host != null ? host : tensor.copy(0, n), n, cols);
        calibrationNanos += System.nanoTime() - t0;
      }
      return plan;
    } catch (IllegalArgumentException e) {
      throw atSite(kind + " at " + name, e);
    }
  }

  /** Whether {@code plan} can serve a collective that takes the token-axis layout ({@code all-reduce}) or not. */
  private static boolean fits(Plan plan, boolean tokenAxis) {
    return tokenAxis || plan.layout() != WireLayout.TOKEN_AXIS;
  }

  /** {@code e} with {@code site} in front of its message, a codec's refusal of NaN/Inf keeping its type. */
  private static IllegalArgumentException atSite(String site, IllegalArgumentException e) {
    return e instanceof NonFiniteInputException n ? new NonFiniteInputException(site, n)
        : new IllegalArgumentException(site + ": " + e.getMessage(), e);
  }

  private void sample(Site site, Plan plan, float[] buf, int rows, int cols) {
    boolean t = plan.layout() == WireLayout.TOKEN_AXIS;
    CodecStats st = CodecStats.measure(plan.codec(), onWire(plan, buf, rows, cols), t ? cols : rows, t ? rows : cols);
    double[] a = sampled.computeIfAbsent(site.direction().label(), k -> new double[6]);
    a[0] += st.relL2();
    a[1] += st.snrDb();
    a[2] += st.zeroCollapseRate();
    a[3] += st.saturated();
    a[4] += st.bytesPerElement();
    a[5]++;
  }

  /** The {@code rows x cols} tensor as {@code plan} lays it out on the wire (a copy). */
  private float[] onWire(Plan plan, float[] buf, int rows, int cols) {
    float[] w = new float[rows * cols];
    wire.toWire(plan, buf, rows, cols, w);
    return w;
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

  /** Payload bytes of one rank's chunk under candidate plan {@code i} for a {@code rows x cols} tensor. */
  private long chunkBytes(int i, int rows, int cols) {
    boolean t = LAYOUTS[i % LAYOUTS.length] == WireLayout.TOKEN_AXIS;
    int wr = t ? cols : rows, wc = t ? rows : cols;
    return candidates.get(i / LAYOUTS.length).encodedSize((wr + worldSize() - 1) / worldSize(), wc);
  }

  private static boolean transforms(AbstractCodec c) {
    return c instanceof TacoCodec t && t.hadamard() || c instanceof GroupQuantCodec q && q.hadamard();
  }

  /** One site's state: calibration sums, then the frozen plan. */
  private final class SiteData {
    int uses;
    int calibrating;
    int seen;
    double[] errors; // per candidate x layout
    double[] energy;
    Plan plan;
    double relL2;
    CollectiveKind kind = CollectiveKind.ALL_REDUCE;
    Site.Direction direction = Site.Direction.FORWARD;
    String choice; // auto: why the plan was chosen
    final String name; // the site's, for messages
    int rows, cols; // the shape the plan was frozen for
    boolean used; // by this run (a restored site may have no collective in it)

    SiteData(String name) {
      this.name = name;
    }

    void startCalibration() {
      calibrating = calibrationSteps;
      seen = 0;
      errors = new double[candidates.size() * LAYOUTS.length];
      energy = null;
    }

    /**
     * The candidate plan of index {@code i} (candidate x layout), or null when it does not apply to this tensor (a
     * layout of groups for a codec without them; {@code nccl-fp8} but at an all-reduce, whose ring sum calibration
     * measures).
     */
    Plan candidate(int i, double[] channelEnergy) {
      AbstractCodec codec = candidates.get(i / LAYOUTS.length);
      if (codec.groupSize() <= 0 && LAYOUTS[i % LAYOUTS.length] != WireLayout.IN_ORDER) return null; // no groups
      if (codec instanceof NcclFp8Codec && kind != CollectiveKind.ALL_REDUCE) return null;
      return switch (LAYOUTS[i % LAYOUTS.length]) {
        case IN_ORDER -> Plan.of(codec);
        case PERMUTED -> {
          int[] p = spreadingPermutation(channelEnergy, codec.groupSize());
          yield p == null ? null : Plan.of(codec).permuted(p);
        }
        case TOKEN_AXIS -> Plan.of(codec).tokenAxis();
      };
    }

    /**
     * Adds this rank's errors for every candidate plan on {@code x}, {@code rows} rows (a sample) of a tensor of
     * {@code tensorRows}; freezes the plan after the last calibration step. The candidates are measured in parallel.
     */
    void measure(float[] x, int rows, int tensorRows, int cols) {
      // channel energies summed over ranks, so every rank derives the same permutation
      float[] e = new float[cols];
      for (int r = 0; r < rows; r++) for (int j = 0; j < cols; j++) e[j] += x[r * cols + j] * x[r * cols + j];
      exact.allReduce(e, 0, cols);
      if (energy == null) energy = new double[cols];
      for (int j = 0; j < cols; j++) energy[j] += e[j];
      double[] ed = new double[cols];
      for (int j = 0; j < cols; j++) ed[j] = e[j];
      float[] err = new float[errors.length];
      // the sample along the token axis, made once for every candidate that sends it that way
      float[] tokenMajor = kind.mayUseTokenAxis() && tensorRows <= maxWireCols
          ? onWire(Plan.EXACT.tokenAxis(), x, rows, cols)
          : null;
      // nccl-fp8's error is its ring sum's over every rank's sample: each rank computes the same, so the sum over
      // ranks below is R times it, as for the others' per-rank errors
      float[] everyRank = null;
      if (candidates.stream().anyMatch(c -> c instanceof NcclFp8Codec) && kind == CollectiveKind.ALL_REDUCE) {
        everyRank = new float[exact.worldSize() * rows * cols];
        exact.allGather(x, 0, rows * cols, everyRank, 0);
      }
      float[] ranks = everyRank;
      IntStream.range(0, err.length).parallel().forEach(i -> {
        Plan p = candidate(i, ed);
        boolean t = p != null && p.layout() == WireLayout.TOKEN_AXIS;
        if (p == null || (t && tokenMajor == null) || (!t && cols > maxWireCols)) { // does not apply, or too wide
          err[i] = Float.POSITIVE_INFINITY;
          return;
        }
        if (p.codec() instanceof NcclFp8Codec c) {
          err[i] = (float) NcclFp8Error.relL2(c, ranks, exact.worldSize(), rows, cols);
          return;
        }
        float[] w = t ? tokenMajor : p.layout() == WireLayout.PERMUTED ? onWire(p, x, rows, cols) : x;
        err[i] = (float) CodecStats.relL2(p.codec(), w, t ? cols : rows, t ? rows : cols);
      });
      exact.allReduce(err, 0, err.length);
      for (int i = 0; i < err.length; i++) errors[i] += err[i];
      seen++;
      measurements++;
      if (--calibrating == 0) freeze(tensorRows, cols);
    }

    private void freeze(int rows, int cols) {
      this.rows = rows;
      this.cols = cols;
      double min = Double.POSITIVE_INFINITY;
      for (double e : errors) if (e < min) min = e; // a NaN sum (a codec's NaN on finite input) never wins
      if (!Double.isFinite(min)) {
        throw new IllegalArgumentException("no candidate plan for a " + rows + " x " + cols + " tensor puts at most "
            + maxWireCols + " columns on the wire");
      }
      int best = auto ? fastest(rows, cols) : -1;
      int layout = auto ? -1 : layout(errors);
      double bar = auto ? 0 : layoutMin(errors, layout) * 1.01;
      // within the layout, among the plans within 1 % of its lowest error, take the cheapest: fewest bytes on the wire
      // for this shape, then no Hadamard transform
      for (int i = 0; i < errors.length && !auto; i++) {
        if (i % LAYOUTS.length != layout || !(errors[i] <= bar)) continue;
        if (best < 0 || cheaper(i, best, rows, cols)) best = i;
      }
      adopt(best);
    }

    /** Takes candidate {@code best} as the site's plan, with its mean calibrated error. */
    void adopt(int best) {
      plan = candidate(best, energy);
      relL2 = errors[best] / (seen * exact.worldSize());
    }

    /**
     * {@link #AUTO}: the candidate of least predicted time whose mean error passes the gate, the predictions averaged
     * over the ranks (each rank prices on its own hardware; all must choose alike), ties to fewer bytes; {@link #choice}
     * says each codec's best.
     */
    private int fastest(int rows, int cols) {
      if (pricing == null) throw new IllegalStateException("--compression auto needs a pricing of the collectives");
      int r = exact.worldSize();
      double maxError = gate.bound(direction);
      float[] price = new float[errors.length];
      for (int i = 0; i < errors.length; i++) {
        Plan p = candidate(i, energy);
        boolean passes = p != null && errors[i] / (seen * r) <= maxError;
        price[i] = passes ? (float) pricing.seconds(p, kind, rows, cols) : Float.POSITIVE_INFINITY;
      }
      exact.allReduce(price, 0, price.length);
      int best = -1;
      Map<String, Float> byCodec = new LinkedHashMap<>();
      for (int i = 0; i < price.length; i++) {
        if (!Float.isFinite(price[i])) continue;
        byCodec.merge(candidates.get(i / LAYOUTS.length).name(), price[i] / r, Math::min);
        if (best < 0 || price[i] < price[best] || price[i] == price[best] && cheaper(i, best, rows, cols)) best = i;
      }
      StringBuilder why = new StringBuilder("predicted ms:");
      byCodec.forEach((c, sec) -> why.append(String.format(java.util.Locale.ROOT, " %s %.3f", c, sec * 1e3)));
      why.append(String.format(java.util.Locale.ROOT, " (%s gate rel L2 <= %.3g)", direction.label(), maxError));
      if (best < 0) { // nothing passes a gate below bf16's own error: bf16, in order, and say so
        LOG.warn("{}: no plan's calibrated error passes the {} bound of --auto-max-error, {}: sending bf16 (none),"
            + " whose error is {}", name, direction == Site.Direction.FORWARD ? "activations" : "gradients", maxError,
            errors[0] / (seen * r));
        choice = why.append("; nothing passes the gate: none").toString();
        return 0;
      }
      // compress only where it pays beyond the predictions' noise: a codec must beat bf16 by AUTO_MARGIN
      if (!(candidates.get(best / LAYOUTS.length) instanceof Bf16Codec) && Float.isFinite(price[0])
          && price[best] > (1 - AUTO_MARGIN) * price[0]) {
        choice = why.append(String.format(java.util.Locale.ROOT, "; within %.0f %% of none: none", 100 * AUTO_MARGIN))
            .toString();
        return 0;
      }
      choice = why.toString();
      return best;
    }
  }

  /**
   * The layout (an index of {@link WireLayout}) a codec's calibration sends in, from the summed errors of its candidate
   * plans ({@code errors[codec * layouts + layout]}, +Inf where a plan does not apply): in order, unless another
   * layout's best plan has at least {@link #LAYOUT_GAIN} less error than in order's best (or no in-order plan applies);
   * of those layouts, the one of least error.
   */
  static int layout(double[] errors) {
    int layout = 0;
    double bar = layoutMin(errors, 0) * (1 - LAYOUT_GAIN), best = layoutMin(errors, 0);
    for (int l = 1; l < LAYOUTS.length; l++) {
      double m = layoutMin(errors, l);
      if (m <= bar && m < best) {
        layout = l;
        best = m;
      }
    }
    return layout;
  }

  /** The lowest of {@code errors} in layout {@code l}, NaN ignored (+Inf if none is finite). */
  private static double layoutMin(double[] errors, int l) {
    double m = Double.POSITIVE_INFINITY;
    for (int i = l; i < errors.length; i += LAYOUTS.length) if (errors[i] < m) m = errors[i];
    return m;
  }

  /**
   * True if plan index {@code a} (candidate x layout) costs less than {@code b} for a {@code rows x cols} tensor: fewer
   * payload bytes per rank chunk (a row shorter than G pads its group, so the largest G is not always the cheapest).
   */
  private boolean cheaper(int a, int b, int rows, int cols) {
    long ba = chunkBytes(a, rows, cols), bb = chunkBytes(b, rows, cols);
    if (ba != bb) return ba < bb;
    AbstractCodec ca = candidates.get(a / LAYOUTS.length), cb = candidates.get(b / LAYOUTS.length);
    if (a % LAYOUTS.length != b % LAYOUTS.length) return a % LAYOUTS.length < b % LAYOUTS.length;
    return !transforms(ca) && transforms(cb);
  }
}
