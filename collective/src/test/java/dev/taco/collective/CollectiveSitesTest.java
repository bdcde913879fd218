package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.codec.CodecStats;
import dev.taco.codec.Codecs;
import dev.taco.codec.NonFiniteInputException;
import dev.taco.collective.Site.Block;
import dev.taco.collective.Site.Direction;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Per-site plans: the channel permutation, calibration agreement across ranks, and the all-reduce through plans. */
class CollectiveSitesTest {
  static final Site ATTN0 = new Site.Layer(0, Block.ATTENTION, false, Direction.FORWARD);
  static final Site ATTN2 = new Site.Layer(2, Block.ATTENTION, false, Direction.FORWARD);
  static final Site MLP0 = new Site.Layer(0, Block.MLP, false, Direction.FORWARD);
  static final Site MLP1 = new Site.Layer(1, Block.MLP, false, Direction.FORWARD);
  static final Site GATHER0 = new Site.Layer(0, Block.ATTENTION, true, Direction.FORWARD);

  static final int ROWS = 64, COLS = 256;

  /** A (ROWS, COLS) activation-like tensor: Gaussian, with a few loud channels packed into the first group. */
  static float[] activations(long seed, int rank) {
    SplittableRandom rng = new SplittableRandom(seed * 31 + rank);
    float[] x = new float[ROWS * COLS];
    for (int r = 0; r < ROWS; r++) {
      for (int j = 0; j < COLS; j++) {
        double v = rng.nextGaussian();
        if (j < 4) v *= 300; // outlier channels, adjacent: one group of 32 holds all of them
        x[r * COLS + j] = (float) v;
      }
    }
    return x;
  }

  @Test
  void spreadingPermutationIsAPermutationThatSeparatesTheLoudestChannels() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    SplittableRandom rng = new SplittableRandom(seed);
    double[] energy = new double[COLS];
    for (int j = 0; j < COLS; j++) energy[j] = rng.nextDouble();
    int[] loud = {3, 4, 5, 6, 7, 8, 9, 10};
    for (int j : loud) energy[j] = 1000 + j;
    int g = 32, groups = COLS / g;
    int[] perm = CollectiveSites.spreadingPermutation(energy, g);
    assertThat(perm).isNotNull();
    int[] sorted = perm.clone();
    Arrays.sort(sorted);
    for (int j = 0; j < COLS; j++) assertThat(sorted[j]).as("seed %d", seed).isEqualTo(j);
    boolean[] groupHasLoud = new boolean[groups];
    for (int slot = 0; slot < COLS; slot++) {
      for (int l : loud) {
        if (perm[slot] == l) {
          assertThat(groupHasLoud[slot / g]).as("two loud channels in group %d, seed %d", slot / g, seed)
              .isFalse();
          groupHasLoud[slot / g] = true;
        }
      }
    }
    assertThat(CollectiveSites.spreadingPermutation(energy, COLS)).as("one group per row: nothing to spread").isNull();
  }

  @Test
  void calibrationAgreesAcrossRanksBeatsTheDefaultAndStaysWithinTheCodecBound() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    int world = 2;
    float[][] inputs = {activations(seed, 0), activations(seed, 1)};
    double[] exact = new double[ROWS * COLS];
    for (float[] in : inputs) for (int i = 0; i < exact.length; i++) exact[i] += in[i];
    List<Object[]> out = LocalGroup.run(world, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "taco", 1, 0);
      float[] buf = inputs[comm.rank()].clone();
      sites.allReduce(MLP0, buf, ROWS, COLS);
      return new Object[] {buf, sites.plans()};
    });
    @SuppressWarnings("unchecked") Map<String, CollectiveSites.CalibratedPlan> p0 = (Map<String, CollectiveSites.CalibratedPlan>) out
        .get(0)[1];
    assertThat(out.get(1)[1]).as("every rank freezes the same plan").isEqualTo(p0);
    CollectiveSites.CalibratedPlan plan = p0.get("layer0.mlp.fwd");
    assertThat(plan).isNotNull();
    // the default plan's error on the same tensors, for comparison
    double defaultErr = 0;
    for (float[] in : inputs) defaultErr += CodecStats.measure(Codecs.byName("taco"), in, ROWS, COLS).relL2();
    // calibration takes the cheapest plan within 1 % of the lowest error, which the default plan bounds
    assertThat(plan.relL2()).isLessThanOrEqualTo(defaultErr / world * 1.0101);
    float[] got = (float[]) out.get(0)[0];
    assertThat(got).isEqualTo((float[]) out.get(1)[0]);
    double num = 0, den = 0;
    for (int i = 0; i < got.length; i++) {
      assertThat(Float.isFinite(got[i])).isTrue();
      num += (got[i] - exact[i]) * (got[i] - exact[i]);
      den += exact[i] * exact[i];
    }
    assertThat(Math.sqrt(num / den)).as("two E4M3 quantisations").isLessThan(0.06);
  }

  @Test
  void planAtChoosesWhatAllReduceChoosesAndFetchesTheTensorOnlyWhenItMustBeMeasured() {
    // the GPU's path: the sites choose the plans, the device moves the data. Two calibration steps, a recalibration
    // every 4 uses, sampling on at the 6th use: the host copy is asked for at uses 1, 2, 5, 6 (calibration) and 6
    // (sampling, the same copy), and the plans and sampled errors equal those of the host path on the same tensors
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    List<Object[]> out = LocalGroup.run(2, comm -> {
      CollectiveSites host = new CollectiveSites(comm, "taco", 2, 4), device = new CollectiveSites(comm, "taco", 2, 4);
      List<Integer> fetched = new ArrayList<>();
      List<String> hostPlans = new ArrayList<>(), devicePlans = new ArrayList<>();
      for (int use = 1; use <= 8; use++) {
        float[] x = activations(seed + use, comm.rank());
        host.setSampling(use == 6);
        device.setSampling(use == 6);
        final int u = use;
        Plan p = device.planAt(ATTN0, (first, count) -> {
          fetched.add(u);
          return CollectiveSites.Rows.of(x, COLS).copy(first, count);
        }, ROWS, COLS, CollectiveKind.ALL_REDUCE);
        devicePlans.add(p.describe());
        host.allReduce(ATTN0, x.clone(), ROWS, COLS);
        hostPlans.add(host.plan(ATTN0).describe());
      }
      return new Object[] {fetched, hostPlans, devicePlans, host.plans(), device.plans(), host.sampledErrors(),
          device.sampledErrors()};
    });
    for (Object[] r : out) {
      assertThat(r[0]).as("uses whose tensor came to the host").isEqualTo(List.of(1, 2, 5, 6));
      // planAt returns the plan its use runs with, which is the host path's plan after that use (the default until
      // the first calibration freezes one, then the frozen one: a recalibration keeps it until it freezes anew)
      assertThat(r[2]).as("plans use by use").isEqualTo(r[1]);
      assertThat(r[4]).isEqualTo(r[3]);
      assertThat(r[6]).isEqualTo(r[5]);
    }
    assertThat(((Map<?, ?>) out.get(0)[5])).as("rank 0 sampled").isNotEmpty();
    assertThat(out.get(1)[4]).as("both ranks froze the same plans").isEqualTo(out.get(0)[4]);
    List<Object> one = LocalGroup.run(1,
        comm -> new CollectiveSites(comm, "taco", 1, 0).planAt(ATTN0, (first, count) -> {
          throw new AssertionError("one rank: nothing to measure, so no host copy");
        }, ROWS, COLS, CollectiveKind.ALL_REDUCE).describe());
    assertThat(one).containsExactly(Plan.of(Codecs.byName("taco")).describe());
  }

  @Test
  void aLayoutThatMovesTheTensorMustSaveATenthOfTheError() {
    // errors[codec * 3 + layout], layouts in order, permuted, token-axis; two codecs
    double inf = Double.POSITIVE_INFINITY;
    assertThat(CollectiveSites.layout(new double[] {1.0, 0.99, 0.95, 1.2, 1.1, 0.92}))
        .as("token axis 8 %% better: in order").isZero();
    assertThat(CollectiveSites.layout(new double[] {1.0, 0.99, 0.89, 1.2, 1.1, 0.95}))
        .as("token axis 11 %% better").isEqualTo(WireLayout.TOKEN_AXIS.ordinal());
    assertThat(CollectiveSites.layout(new double[] {1.0, 0.99, 0.9, 1.2, 1.1, 0.95}))
        .as("token axis exactly 10 %% better").isEqualTo(WireLayout.TOKEN_AXIS.ordinal());
    assertThat(CollectiveSites.layout(new double[] {1.0, 0.8, 0.85, 1.2, 1.1, 0.95}))
        .as("both past the bar: the lower").isEqualTo(WireLayout.PERMUTED.ordinal());
    assertThat(CollectiveSites.layout(new double[] {inf, 5.0, inf, inf, inf, 7.0}))
        .as("no in-order plan applies").isEqualTo(WireLayout.PERMUTED.ordinal());
    assertThat(CollectiveSites.layout(new double[] {0.5, inf, inf, 1.0, 0.2, 0.46}))
        .as("the best of each layout counts, not the same codec's").isEqualTo(WireLayout.PERMUTED.ordinal());
    assertThat(CollectiveSites.layout(new double[] {0.5, Double.NaN, 0.3, 1.0, 1.0, 1.0}))
        .as("NaN never wins").isEqualTo(WireLayout.TOKEN_AXIS.ordinal());
    assertThat(CollectiveSites.layout(new double[] {Double.NaN, 0.6, 1.0, 0.5, 0.7, 1.0}))
        .as("nor hides a layout's finite best").isZero();
  }

  @Test
  void int8GroupsRunAlongTokensWhenChannelsDifferInScale() {
    // INT8 per group suffers when a group mixes loud and quiet channels; groups along the token axis hold one
    // channel each, so calibration must pick that layout (FP8's error is nearly scale-free, INT8's is not)
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    List<Object> plans = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "int8-group", 1, 0);
      sites.allReduce(ATTN0, activations(seed, comm.rank()), ROWS, COLS);
      return sites.plans().get("layer0.attn.fwd");
    });
    CollectiveSites.CalibratedPlan plan = (CollectiveSites.CalibratedPlan) plans.get(0);
    assertThat(plan.layout()).isEqualTo("token-axis");
    assertThat(plans.get(1)).isEqualTo(plan);
  }

  @Test
  void aWireColumnLimitKeepsCalibrationOffLayoutsTheCollectivesWouldRefuse() {
    // 256 tokens x 64 channels, four of them loud and adjacent (as activations()): int8 groups along a row mix loud
    // and quiet channels, so the token axis (one channel per group, 256 wire columns) wins; a GPU-like limit of 255 wire columns
    // must make calibration freeze another layout, on every rank alike, and count its measurements; a limit no
    // layout meets is a clear error naming the site
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    int rows = 256, cols = 64;
    java.util.function.IntFunction<float[]> tensor = rank -> { // as activations(), with more tokens than channels
      SplittableRandom n = new SplittableRandom(seed * 31 + rank);
      float[] x = new float[rows * cols];
      for (int i = 0; i < x.length; i++) x[i] = (float) (n.nextGaussian() * (i % cols < 4 ? 300 : 1));
      return x;
    };
    for (int limit : new int[] {Integer.MAX_VALUE, rows - 1}) {
      List<Object[]> out = LocalGroup.run(2, comm -> {
        CollectiveSites sites = new CollectiveSites(comm, "int8-group", 2, 0, limit);
        long[] m = new long[4];
        m[0] = sites.calibrationMeasurements();
        sites.allReduce(ATTN0, tensor.apply(comm.rank()), rows, cols);
        m[1] = sites.calibrationMeasurements();
        sites.allReduce(ATTN0, tensor.apply(comm.rank()), rows, cols);
        m[2] = sites.calibrationMeasurements();
        sites.allReduce(ATTN0, tensor.apply(comm.rank()), rows, cols); // frozen: nothing measured
        m[3] = sites.calibrationMeasurements();
        return new Object[] {sites.plans().get("layer0.attn.fwd"), m};
      });
      CollectiveSites.CalibratedPlan plan = (CollectiveSites.CalibratedPlan) out.get(0)[0];
      if (limit == Integer.MAX_VALUE) assertThat(plan.layout()).as("no limit").isEqualTo("token-axis");
      else assertThat(plan.layout()).as("limit %d", limit).isNotEqualTo("token-axis");
      assertThat(Double.isFinite(plan.relL2())).isTrue();
      assertThat(out.get(1)[0]).isEqualTo(plan);
      assertThat((long[]) out.get(0)[1]).containsExactly(0, 1, 2, 2);
    }
    assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
      new CollectiveSites(comm, "int8-group", 1, 0, cols - 1).allReduce(ATTN0, tensor.apply(comm.rank()),
          rows, cols);
      return null;
    })).hasMessageContaining("all-reduce at layer0.attn.fwd").hasMessageContaining("at most 63 columns on the wire");
    assertThatThrownBy(() -> new CollectiveSites(null, "taco", 1, 0, 0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxWireCols");
  }

  @Test
  void fp32SitesAreExact() {
    List<float[]> out = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "fp32", 2, 0);
      float[] buf = activations(5, comm.rank());
      sites.allReduce(ATTN0, buf, ROWS, COLS);
      assertThat(sites.plans()).isEmpty();
      return buf;
    });
    float[] a = activations(5, 0), b = activations(5, 1);
    for (int i = 0; i < a.length; i++) assertThat(out.get(0)[i]).isEqualTo(a[i] + b[i]);
  }

  @Test
  void oneRankSendsNothingSoItQuantisesCalibratesAndSamplesNothing() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    List<Object[]> out = LocalGroup.run(1, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "taco", 2, 0);
      sites.setSampling(true);
      float[] buf = activations(seed, 0);
      sites.allReduce(MLP0, buf, ROWS, COLS);
      return new Object[] {buf, sites.plans(), sites.sampledErrors(), sites.bytesSent()};
    });
    assertThat((float[]) out.get(0)[0]).as("seed " + seed).isEqualTo(activations(seed, 0));
    assertThat((Map<?, ?>) out.get(0)[1]).isEmpty();
    assertThat((Map<?, ?>) out.get(0)[2]).isEmpty();
    assertThat((long) out.get(0)[3]).isZero();
  }

  @Test
  void calibrationKeepsWhatTheUserFixed() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    for (String spec : new String[] {"taco:g=64", "taco:hadamard=on", "taco-no-hadamard", "int8-group:g=64"}) {
      List<Object> plans = LocalGroup.run(2, comm -> {
        CollectiveSites sites = new CollectiveSites(comm, spec, 1, 0);
        sites.allReduce(MLP0, activations(seed, comm.rank()), ROWS, COLS);
        return sites.plans().get("layer0.mlp.fwd");
      });
      CollectiveSites.CalibratedPlan plan = (CollectiveSites.CalibratedPlan) plans.get(0);
      String where = spec + " seed " + seed + ": " + plan;
      if (spec.contains("g=64")) assertThat(plan.groupSize()).as(where).isEqualTo(64);
      if (spec.contains("hadamard=on")) assertThat(plan.hadamard()).as(where).isTrue();
      if (spec.equals("taco-no-hadamard")) assertThat(plan.hadamard()).as(where).isFalse();
      assertThat(plan.codec()).as(where)
          .startsWith(spec.substring(0, spec.indexOf(':') < 0 ? spec.length() : spec.indexOf(':')));
    }
  }

  @Test
  void nanAtASiteIsRefusedAsNonFiniteNamingTheSite() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
      float[] x = activations(seed, comm.rank());
      if (comm.rank() == 1) x[3 * COLS + 5] = Float.NaN;
      new CollectiveSites(comm, "taco", 0, 0).allReduce(ATTN2, x, ROWS, COLS);
      return null;
    })).as("seed " + seed).isInstanceOf(NonFiniteInputException.class)
        .hasMessageContaining("all-reduce at layer2.attn.fwd").hasMessageContaining("non-finite input NaN");
  }

  @Test
  void oneRankChecksShapesAsManyRanksDo() {
    var comm = LocalGroup.create(1).get(0);
    CollectiveSites sites = new CollectiveSites(comm, "taco", 0, 0);
    assertThatThrownBy(() -> sites.allReduce(MLP0, new float[10], ROWS, COLS))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("all-reduce at layer0.mlp.fwd: all-reduce: the tensor holds 10 values");
    assertThatThrownBy(() -> sites.allGather(GATHER0, new float[ROWS * COLS], ROWS, COLS, new float[5]))
        .hasMessageContaining("all-gather at layer0.attn.gather.fwd").hasMessageContaining("the output holds 5 values");
    assertThatThrownBy(() -> sites.reduceScatter(ATTN0, new float[ROWS * COLS], ROWS, 0, new float[1]))
        .hasMessageContaining("reduce-scatter at layer0.attn.fwd");
    float[] x = activations(7, 0), shard = new float[ROWS * COLS];
    sites.reduceScatter(ATTN0, x, ROWS, COLS, shard);
    assertThat(shard).as("one rank's reduce-scatter is a copy").isEqualTo(x);
    assertThat(sites.bytesSent()).isZero();
    comm.close();
  }

  @Test
  void badArgumentsAreRejected() {
    var comm = LocalGroup.create(1).get(0);
    assertThatThrownBy(() -> new CollectiveSites(comm, "taco", -1, 0))
        .hasMessageContaining("calibration steps must be >= 0");
    assertThatThrownBy(() -> new CollectiveSites(comm, "taco", 1, -5))
        .hasMessageContaining("--recalibrate-interval must be >= 0");
    assertThatThrownBy(() -> new CollectiveSites(comm, "zstd", 1, 0)).isInstanceOf(IllegalArgumentException.class);
    comm.close();
  }

  /** A checkpoint's site state that cannot be this run's: refused by name, not restored. */
  @Test
  void restoringNegativeCountsOrUnknownPlansIsRefusedNamingTheSite() {
    var comm = LocalGroup.create(2).get(0); // restoring talks to no other rank
    CollectiveSites sites = new CollectiveSites(comm, "taco", 2, 0);
    java.util.function.BiFunction<Integer, String[], CollectiveSites.SiteState> state = (uses,
        plan) -> new CollectiveSites.SiteState(uses, 0, 0, null, null, plan[0], plan[1], null, 0.1);
    String[] good = {"taco:g=128", "in-order"};
    assertThatThrownBy(() -> sites.restore(Map.of("layer0.attn.fwd", state.apply(-3, good))))
        .hasMessageContaining("site layer0.attn.fwd: negative counts (uses -3");
    assertThatThrownBy(
        () -> sites.restore(Map.of("layer1.mlp.fwd", state.apply(2, new String[] {"bogus", "in-order"}))))
        .hasMessageContaining("bogus");
    assertThatThrownBy(() -> sites.restore(Map.of("layer1.mlp.fwd", state.apply(2, new String[] {"taco", "sideways"}))))
        .hasMessageContaining("site layer1.mlp.fwd: unknown wire layout sideways");
    for (double bad : new double[] {Double.NaN, -1e6}) { // a corrupt calibration in progress: refused, not frozen
      double[] sums = new double[24];
      java.util.Arrays.fill(sums, 0.5);
      sums[2] = bad;
      assertThatThrownBy(() -> sites.restore(Map.of("layer1.mlp.fwd",
          new CollectiveSites.SiteState(3, 1, 1, sums, null, null, null, null, 0))))
          .hasMessage("site layer1.mlp.fwd: a calibration error sum of " + bad + " (sums are non-negative, +Inf where"
              + " a plan does not apply): the checkpoint is corrupt");
    }
    sites.restore(Map.of("layer0.attn.fwd", state.apply(2, good)));
    assertThat(sites.plan(ATTN0).describe()).startsWith("taco:").contains("g=128");
    assertThat(sites.plans()).as("listed as this run's once it has used the site").isEmpty();
    assertThat(sites.state()).as("and kept for the next checkpoint either way").containsOnlyKeys("layer0.attn.fwd");
    // a run that calibrates nothing checks the state as strictly, and keeps none of it
    var alone = LocalGroup.create(1).get(0);
    CollectiveSites none = new CollectiveSites(alone, "taco", 0, 0);
    assertThatThrownBy(() -> none.restore(Map.of("layer0.attn.fwd", state.apply(-3, good))))
        .hasMessageContaining("negative counts");
    none.restore(Map.of("layer0.attn.fwd", state.apply(2, good)));
    assertThat(none.state()).isEmpty();
    alone.close();
    comm.close();
  }

  /**
   * A checkpoint of a calibrated TP run resumes where this run calibrates nothing (one rank, --calibration-steps 0):
   * nothing is restored, the sites send with the codec's defaults as such a run does from its start; where it
   * calibrates over other candidate plans, a calibration in progress is refused naming the site and what to do, a
   * frozen site is not; a restored token-axis plan at a site that is now a reduce-scatter calibrates anew.
   */
  @Test
  void aCheckpointsSitesRestoreWhereThisRunCalibratesNothingOrOverOtherCandidates() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    // two ranks, two calibration steps: after one use MLP1 is calibrating, after two ATTN0 has frozen its plan
    List<Map<String, CollectiveSites.SiteState>> saved = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "taco", 2, 0);
      for (int use = 0; use < 2; use++) {
        sites.allReduce(ATTN0, activations(seed + use, comm.rank()), ROWS, COLS);
      }
      sites.allReduce(MLP1, activations(seed + 7, comm.rank()), ROWS, COLS);
      return sites.state();
    });
    Map<String, CollectiveSites.SiteState> state = saved.get(0);
    assertThat(state.get(MLP1.name()).calibrating()).as("seed %d", seed).isEqualTo(1);
    assertThat(state.get(ATTN0.name()).calibrating()).isZero();
    String frozen = state.get(ATTN0.name()).codec();
    String defaults = Plan.of(Codecs.byName("taco")).describe();
    for (String why : new String[] {"one rank", "--calibration-steps 0"}) {
      List<Object[]> again = LocalGroup.run(why.equals("one rank") ? 1 : 2, comm -> {
        CollectiveSites sites = new CollectiveSites(comm, "taco", why.equals("one rank") ? 2 : 0, 0);
        sites.restore(state);
        float[] x = activations(seed + 9, comm.rank());
        sites.allReduce(MLP1, x, ROWS, COLS);
        sites.allReduce(ATTN0, x, ROWS, COLS);
        return new Object[] {sites.state(), sites.plans(), sites.plan(ATTN0).describe()};
      });
      assertThat((Map<?, ?>) again.get(0)[0]).as(why + ": nothing restored").isEmpty();
      assertThat((Map<?, ?>) again.get(0)[1]).as(why + ": no plan listed as chosen").isEmpty();
      assertThat(again.get(0)[2]).as(why + ": the codec's defaults").isEqualTo(defaults);
    }
    // a frozen token-axis plan restored at a site that is now a reduce-scatter (sequence parallelism turned on)
    CollectiveSites.SiteState tokenAxis = new CollectiveSites.SiteState(2, 0, 2, null, null, "taco:g=256,hadamard=off",
        "token-axis", null, 0.02);
    List<String> rs = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "taco", 1, 0);
      sites.restore(Map.of("layer0.attn.fwd", tokenAxis));
      float[] shard = new float[ROWS / 2 * COLS];
      sites.reduceScatter(ATTN0, activations(seed + 11, comm.rank()), ROWS, COLS, shard);
      for (float v : shard) assertThat(Float.isFinite(v)).isTrue();
      return sites.plan(ATTN0).describe();
    });
    assertThat(rs.get(0)).as("calibrated anew, not token-axis").doesNotContain("token-axis").isEqualTo(rs.get(1));
    assertThat(frozen).isNotNull();
    // taco:g=64 calibrates over fewer plans: the frozen site restores, the one in progress cannot go on
    var comm = LocalGroup.create(2).get(0); // restoring talks to no other rank
    CollectiveSites fixedG = new CollectiveSites(comm, "taco:g=64", 2, 0);
    fixedG.restore(Map.of(ATTN0.name(), state.get(ATTN0.name())));
    assertThat(fixedG.state().get(ATTN0.name()).codec()).isEqualTo(frozen);
    assertThatThrownBy(() -> fixedG.restore(Map.of(MLP1.name(), state.get(MLP1.name()))))
        .hasMessageContaining(
            "site layer1.mlp.fwd was calibrating (1 of 2 tensors seen) over 24 candidate plans, this run's codec"
                + " has 6")
        .hasMessageContaining("resume with the --compression the checkpoint was written with");
    comm.close();
  }

  /**
   * Evaluation passes neither calibrate, nor count as uses, nor sample: the plan a site uses for training, and when it
   * recalibrates, do not depend on how often the run evaluates.
   */
  @Test
  void evaluationUsesTheCurrentPlanWithoutCalibratingCountingOrSampling() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    List<Object[]> out = LocalGroup.run(2, comm -> {
      CollectiveSites plain = new CollectiveSites(comm, "taco", 1, 3),
          evaluated = new CollectiveSites(comm, "taco", 1, 3);
      List<String> plainPlans = new ArrayList<>(), evaluatedPlans = new ArrayList<>();
      for (int use = 0; use < 7; use++) {
        float[] x = activations(seed + use, comm.rank());
        plain.allReduce(ATTN0, x.clone(), ROWS, COLS);
        plainPlans.add(plain.plan(ATTN0).describe());
        evaluated.setEvaluating(true);
        evaluated.setSampling(true);
        Plan during = evaluated.planAt(ATTN0, (first, count) -> {
          throw new AssertionError("an evaluation asked for the tensor (calibration or sampling)");
        }, ROWS, COLS, CollectiveKind.ALL_REDUCE);
        evaluated.setEvaluating(false);
        evaluated.setSampling(false);
        assertThat(during.describe()).as("use %d, seed %d", use, seed)
            .isEqualTo(use == 0 ? Plan.of(Codecs.byName("taco")).describe() : evaluatedPlans.getLast());
        evaluated.allReduce(ATTN0, x.clone(), ROWS, COLS);
        evaluatedPlans.add(evaluated.plan(ATTN0).describe());
      }
      return new Object[] {plainPlans, evaluatedPlans, evaluated.state().get(ATTN0.name()).uses(),
          evaluated.sampledErrors()};
    });
    for (Object[] r : out) {
      assertThat(r[1]).as("seed %d", seed).isEqualTo(r[0]);
      assertThat(r[2]).as("training uses only").isEqualTo(7);
      assertThat((Map<?, ?>) r[3]).as("nothing sampled").isEmpty();
    }
  }

  /**
   * A plan is released (the device collectives free its buffers) once no site uses it any more, and not before: two
   * sites on the codec's defaults, each moving to its calibrated plan at its second use.
   */
  @Test
  void aPlanIsReleasedOnceTheLastSiteStopsUsingIt() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    List<List<String>> out = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "taco", 2, 0);
      List<String> events = new ArrayList<>();
      sites.onRelease(p -> events.add("released " + p.describe()));
      for (int use = 0; use < 2; use++) {
        for (Site site : new Site[] {ATTN0, MLP0}) {
          float[] x = activations(seed + use, comm.rank());
          events.add(site.name() + " "
              + sites.planAt(site, CollectiveSites.Rows.of(x, COLS), ROWS, COLS, CollectiveKind.ALL_REDUCE).describe());
        }
      }
      return events;
    });
    String defaults = Plan.of(Codecs.byName("taco")).describe();
    List<String> e = out.get(0);
    assertThat(e.subList(0, 2)).as("seed %d", seed).containsExactly(ATTN0.name() + " " + defaults,
        MLP0.name() + " " + defaults);
    assertThat(e.get(2)).as("calibrated").startsWith(ATTN0.name() + " ").isNotEqualTo(ATTN0.name() + " " + defaults);
    assertThat(e).as("released once, when the last site left it").filteredOn(x -> x.startsWith("released"))
        .containsExactly("released " + defaults);
    assertThat(e).hasSize(5);
    assertThat(e.get(3)).isEqualTo("released " + defaults);
    assertThat(e.get(4)).startsWith(MLP0.name() + " ").isNotEqualTo(MLP0.name() + " " + defaults);
    assertThat(out.get(1)).isEqualTo(e);
  }

  @Test
  void collectiveKindsCarryNcclTestsBusFactorsAndTheirLayoutRule() {
    assertThat(CollectiveKind.ALL_REDUCE.busBandwidthFactor(8)).isEqualTo(2.0 * 7 / 8);
    assertThat(CollectiveKind.ALL_GATHER.busBandwidthFactor(8)).isEqualTo(7.0 / 8);
    assertThat(CollectiveKind.REDUCE_SCATTER.busBandwidthFactor(2)).isEqualTo(0.5);
    assertThat(CollectiveKind.ALL_GATHER.messageBytes(1000, 8)).as("the gathered whole").isEqualTo(8000);
    assertThat(CollectiveKind.ALL_REDUCE.messageBytes(1000, 8)).isEqualTo(1000);
    assertThat(CollectiveKind.REDUCE_SCATTER.messageBytes(1000, 8)).isEqualTo(1000);
    assertThat(CollectiveKind.ALL_REDUCE.mayUseTokenAxis()).isTrue();
    assertThat(CollectiveKind.ALL_GATHER.mayUseTokenAxis()).isFalse();
    assertThat(CollectiveKind.REDUCE_SCATTER.label()).isEqualTo("reduce-scatter");
  }

  @Test
  void sitesAreNamedAsReportsAndCheckpointsStoreThem() {
    assertThat(new Site.Layer(3, Block.MLP, false, Direction.FORWARD).name()).isEqualTo("layer3.mlp.fwd");
    assertThat(new Site.Layer(0, Block.ATTENTION, true, Direction.BACKWARD).name()).isEqualTo("layer0.attn.gather.bwd");
    assertThat(new Site.Gradient("h.0.mlp.c_fc.weight").name()).isEqualTo("dp.h.0.mlp.c_fc.weight");
    assertThat(new Site.Gradient("x").direction()).isEqualTo(Direction.BACKWARD);
    assertThatThrownBy(() -> new Site.Layer(-1, Block.MLP, false, Direction.FORWARD))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("-1");
    assertThatThrownBy(() -> new Site.Gradient(" ")).isInstanceOf(IllegalArgumentException.class);
  }

  /**
   * A tensor of more rows than {@link CollectiveSites#SAMPLE_ROWS}: each calibration step reads one block of that many
   * rows (a different block each step, the same on every rank), never the whole tensor, and the plan chosen on the
   * blocks is as good on the whole tensor as the plan a whole-tensor calibration chooses (within 2 % relative L2).
   */
  @Test
  void calibrationReadsABlockOfRowsAndChoosesAsWellAsTheWholeTensor() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    int rows = 4 * CollectiveSites.SAMPLE_ROWS, cols = 128;
    java.util.function.IntFunction<float[]> tensor = rank -> {
      SplittableRandom rng = new SplittableRandom(seed * 17 + rank);
      float[] x = new float[rows * cols];
      for (int i = 0; i < x.length; i++) {
        int j = i % cols;
        x[i] = (float) (rng.nextGaussian() * (j % 37 == 5 ? 200 : 1) * (1 + (i / cols) % 5)); // outlier channels
      }
      return x;
    };
    List<Object[]> out = LocalGroup.run(2, comm -> {
      float[] x = tensor.apply(comm.rank());
      List<String> reads = new ArrayList<>();
      CollectiveSites sampled = new CollectiveSites(comm, "taco", 2, 0);
      for (int use = 0; use < 2; use++) {
        sampled.planAt(ATTN0, (first, count) -> {
          reads.add(first + "+" + count);
          return CollectiveSites.Rows.of(x, cols).copy(first, count);
        }, rows, cols, CollectiveKind.ALL_REDUCE);
      }
      return new Object[] {reads, sampled.plan(ATTN0), sampled.calibrationSeconds()};
    });
    assertThat(out.get(0)[0]).as("seed %d", seed).isEqualTo(
        List.of("0+" + CollectiveSites.SAMPLE_ROWS, CollectiveSites.SAMPLE_ROWS + "+" + CollectiveSites.SAMPLE_ROWS));
    assertThat(out.get(1)[1]).as("every rank chooses alike").isEqualTo(out.get(0)[1]);
    assertThat((double) out.get(0)[2]).isPositive();
    // the whole tensor's error of the chosen plan against the best any candidate reaches on the whole tensor
    Plan chosen = (Plan) out.get(0)[1];
    HostWire wire = new HostWire(LocalGroup.create(1).get(0));
    double best = Double.POSITIVE_INFINITY, got = Double.NaN;
    for (int g : new int[] {32, 64, 128}) {
      for (boolean h : new boolean[] {true, false}) {
        Plan p = Plan.of(((dev.taco.codec.TacoCodec) Codecs.byName("taco")).with(g, h));
        for (Plan q : new Plan[] {p, p.tokenAxis()}) {
          double e = 0;
          for (int rank = 0; rank < 2; rank++) e += wholeError(wire, q, tensor.apply(rank), rows, cols);
          best = Math.min(best, e);
        }
      }
    }
    for (int rank = 0; rank < 2; rank++)
      got = (Double.isNaN(got) ? 0 : got) + wholeError(wire, chosen, tensor.apply(rank),
          rows, cols);
    assertThat(got).as("seed %d: %s on the whole tensor", seed, chosen.describe()).isLessThanOrEqualTo(best * 1.02);
  }

  private static double wholeError(HostWire wire, Plan p, float[] x, int rows, int cols) {
    boolean t = p.layout() == WireLayout.TOKEN_AXIS;
    float[] w = new float[x.length];
    wire.toWire(p, x, rows, cols, w);
    return CodecStats.measure(p.codec(), w, t ? cols : rows, t ? rows : cols).relL2();
  }

  /**
   * {@code auto}: on a slow link it compresses, with a plan whose calibrated error passes the gate; on an infinitely fast
   * one it keeps bf16 ({@code none}), since any codec's work then costs more than its bytes save; a tighter gate turns
   * away the plans above it; every rank chooses alike.
   */
  @Test
  void autoCompressesWhereItPaysWithinTheFidelityGate() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    for (String link : new String[] {"0.2", "inf"}) {
      for (double gate : new double[] {0.05, 0.01}) {
        List<CollectiveSites.CalibratedPlan> out = LocalGroup.run(2, comm -> {
          CollectiveSites sites = new CollectiveSites(comm, CollectiveSites.AUTO, 2, 0).gate(FidelityGate.of(gate))
              .pricing(modelPricing(dev.taco.collective.link.LinkProfiles.byName(link)));
          for (int use = 0; use < 3; use++) sites.allReduce(ATTN0, activations(seed + use, comm.rank()), ROWS, COLS);
          return sites.plans().get(ATTN0.name());
        });
        CollectiveSites.CalibratedPlan p = out.get(0);
        String what = "seed " + seed + ", link " + link + ", gate " + gate + ": " + p;
        assertThat(out.get(1)).as(what).isEqualTo(p);
        assertThat(p.choice()).as(what).startsWith("predicted ms:").contains("none");
        assertThat(p.relL2()).as(what).isLessThanOrEqualTo(gate);
        if (link.equals("inf")) assertThat(p.codec()).as(what).isEqualTo("none");
        else assertThat(p.codec()).as(what).isNotEqualTo("none");
      }
    }
    // the same calibration priced again on another link, without measuring again
    List<String> flips = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, CollectiveSites.AUTO, 1, 0)
          .pricing(modelPricing(dev.taco.collective.link.LinkProfiles.byName("0.2")));
      float[] x = activations(seed, comm.rank());
      sites.allReduce(ATTN0, x.clone(), ROWS, COLS);
      String slow = sites.plan(ATTN0).codec().name();
      sites.reprice(modelPricing(dev.taco.collective.link.LinkProfiles.byName("inf")));
      return slow + " then " + sites.plan(ATTN0).codec().name() + " " + sites.calibrationMeasurements();
    });
    assertThat(flips.get(0)).as("seed %d", seed).doesNotStartWith("none").endsWith(" then none 1");
  }

  /** A (ROWS, COLS) Gaussian tensor without outliers: the 4-bit floats' error on it is about 10 %. */
  static float[] gaussian(long seed, int rank) {
    SplittableRandom rng = new SplittableRandom(seed * 31 + rank);
    float[] x = new float[ROWS * COLS];
    for (int i = 0; i < x.length; i++) x[i] = (float) rng.nextGaussian();
    return x;
  }

  /** The codec {@code auto} froze at each of {@code sites}, on every rank, fed {@code tensor} at each for 3 uses. */
  private static List<List<String>> autoCodecs(int world, FidelityGate gate, Pricing pricing,
      java.util.function.BiFunction<Integer, Integer, float[]> tensor, Site... sites) {
    return LocalGroup.run(world, comm -> {
      CollectiveSites auto = new CollectiveSites(comm, CollectiveSites.AUTO, 2, 0).gate(gate).pricing(pricing);
      for (int use = 0; use < 3; use++) {
        for (Site s : sites) auto.allReduce(s, tensor.apply(use, comm.rank()), ROWS, COLS);
      }
      List<String> codecs = new ArrayList<>();
      for (Site s : sites) {
        CollectiveSites.CalibratedPlan p = auto.plans().get(s.name());
        codecs.add(p.codec() + " rel L2 " + p.relL2() + "; " + p.choice());
      }
      return codecs;
    });
  }

  /**
   * {@code auto} among the 4-bit floats too: on a slow link, where bytes decide, a gate that admits their error (about
   * 10 % here) gets one of them, the fewest bytes; a gate below it turns both away (they are not even priced) and gets
   * an 8-bit plan; every rank chooses alike.
   */
  @Test
  void autoSendsAFourBitFloatWhereTheGateAdmitsItAndNotWhereItForbidsIt() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    Pricing slow = modelPricing(dev.taco.collective.link.LinkProfiles.byName("0.2"));
    for (double bound : new double[] {0.25, 0.05}) {
      List<List<String>> out = autoCodecs(2, FidelityGate.of(bound), slow, (use, rank) -> gaussian(seed + use, rank),
          ATTN0);
      String what = "seed " + seed + ", gate " + bound + ": " + out.get(0);
      assertThat(out.get(1)).as(what).isEqualTo(out.get(0));
      String chosen = out.get(0).get(0);
      double relL2 = Double.parseDouble(chosen.replaceAll(".* rel L2 ([^;]*);.*", "$1"));
      if (bound > 0.1) {
        assertThat(chosen).as(what).matches("(mx|nv)fp4:hadamard=o(n|ff) .*").contains(" mxfp4 ", " nvfp4 ");
        assertThat(relL2).as(what).isGreaterThan(0.05).isLessThanOrEqualTo(bound);
      } else {
        assertThat(chosen).as(what).doesNotContain("fp4");
        assertThat(relL2).as(what).isLessThanOrEqualTo(bound);
      }
    }
  }

  /**
   * {@code --auto-max-error activations=A,gradients=B}: a forward and a backward site fed the same tensors choose by
   * their own direction's bound, a 4-bit float where it is loose and an 8-bit plan where it is tight, either way round.
   */
  @Test
  void aForwardAndABackwardSiteOnTheSameTensorsChooseByTheirOwnGate() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    Site fwd = ATTN0, bwd = new Site.Layer(0, Block.ATTENTION, false, Direction.BACKWARD);
    Pricing slow = modelPricing(dev.taco.collective.link.LinkProfiles.byName("0.2"));
    for (String gate : new String[] {"activations=0.05,gradients=0.25", "activations=0.25,gradients=0.05"}) {
      List<List<String>> out = autoCodecs(2, FidelityGate.parse(gate), slow, (use, rank) -> gaussian(seed + use, rank),
          fwd, bwd);
      String what = "seed " + seed + ", " + gate + ": " + out.get(0);
      assertThat(out.get(1)).as(what).isEqualTo(out.get(0));
      boolean gradientsLoose = gate.endsWith("0.25");
      assertThat(out.get(0).get(gradientsLoose ? 1 : 0)).as(what).matches("(mx|nv)fp4.*");
      assertThat(out.get(0).get(gradientsLoose ? 0 : 1)).as(what).doesNotContain("fp4");
      assertThat(out.get(0).get(0)).as(what).contains("(fwd gate rel L2 <= " + (gradientsLoose ? "0.05" : "0.25"));
      assertThat(out.get(0).get(1)).as(what).contains("(bwd gate rel L2 <= " + (gradientsLoose ? "0.25" : "0.05"));
    }
  }

  /**
   * {@code nccl-fp8} is calibrated by the error of its FP8 ring sum over the ranks, not of one cast: where a pricing
   * makes it the fastest, the error {@code auto} reports for it at an all-reduce is that of the nccl-fp8 all-reduce
   * itself on the same tensors (the calibration sample is the whole tensor here), above one cast's at R = 4; at an
   * all-gather it is no candidate.
   */
  @Test
  void ncclFp8IsCalibratedByItsRingSumsErrorAndOnlyAtAnAllReduce() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    int world = 4;
    Pricing ncclFirst = (plan, kind, rows, cols) -> plan.groupScaled() ? 1e-6 : 1e-3;
    List<Object[]> out = LocalGroup.run(world, comm -> {
      CollectiveSites auto = new CollectiveSites(comm, CollectiveSites.AUTO, 1, 0).gate(FidelityGate.of(1))
          .pricing(ncclFirst);
      float[] x = gaussian(seed, comm.rank());
      auto.allReduce(ATTN0, x.clone(), ROWS, COLS);
      auto.allGather(GATHER0, x, ROWS, COLS, new float[world * ROWS * COLS]);
      float[] got = x.clone(), sum = x.clone();
      new CollectiveSites(comm, "nccl-fp8", 0, 0).allReduce(ATTN0, got, ROWS, COLS);
      comm.allReduce(sum, 0, sum.length);
      double ee = 0, ss = 0;
      for (int i = 0; i < sum.length; i++) {
        ee += (got[i] - (double) sum[i]) * (got[i] - (double) sum[i]);
        ss += (double) sum[i] * sum[i];
      }
      return new Object[] {auto.plans().get(ATTN0.name()), auto.plans().get(GATHER0.name()), Math.sqrt(ee / ss),
          CodecStats.relL2(new dev.taco.codec.NcclFp8Codec(), x, ROWS, COLS)};
    });
    CollectiveSites.CalibratedPlan reduce = (CollectiveSites.CalibratedPlan) out.get(0)[0];
    CollectiveSites.CalibratedPlan gather = (CollectiveSites.CalibratedPlan) out.get(0)[1];
    double collective = (double) out.get(0)[2], oneCast = (double) out.get(0)[3];
    String what = "seed " + seed + ": " + reduce + " / " + gather + ", the collective's error " + collective
        + ", one cast's " + oneCast;
    assertThat(reduce.codec()).as(what).isEqualTo("nccl-fp8");
    assertThat(reduce.layout()).as(what).isEqualTo("in-order");
    assertThat(reduce.relL2()).as(what).isCloseTo(collective, org.assertj.core.data.Percentage.withPercentage(1e-3))
        .isGreaterThan(oneCast);
    assertThat(gather.codec()).as(what).isNotEqualTo("nccl-fp8");
    assertThat(gather.choice()).as(what).doesNotContain("nccl-fp8");
    for (Object[] r : out) assertThat(r[0]).as(what).isEqualTo(reduce);
  }

  /**
   * The bytes of training steps, by collective kind and direction, as a report shows them: each collective's bytes
   * under its kind and its site's direction, the exact gradient all-reduces under their own label, nothing while
   * counting is off.
   */
  @Test
  void trainingBytesAreCountedByKindAndDirection() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    Site bwd = new Site.Layer(0, Block.MLP, false, Direction.BACKWARD);
    List<Object[]> out = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "taco", 0, 0);
      float[] x = gaussian(seed, comm.rank());
      sites.allReduce(ATTN0, x.clone(), ROWS, COLS); // not a training step's: not counted
      sites.setCountingTraining(true);
      long[] sent = new long[4];
      long before = sites.bytesSent();
      sites.allReduce(ATTN0, x.clone(), ROWS, COLS);
      sent[0] = sites.bytesSent() - before;
      before = sites.bytesSent();
      sites.allReduce(bwd, x.clone(), ROWS, COLS);
      sites.allReduce(bwd, x.clone(), ROWS, COLS);
      sent[1] = sites.bytesSent() - before;
      before = sites.bytesSent();
      sites.allGather(GATHER0, x, ROWS, COLS, new float[2 * ROWS * COLS]);
      sent[2] = sites.bytesSent() - before;
      before = sites.bytesSent();
      sites.allReduceExact(x.clone(), 0, COLS);
      sent[3] = sites.bytesSent() - before;
      sites.setCountingTraining(false);
      sites.allReduce(bwd, x.clone(), ROWS, COLS);
      return new Object[] {sites.trainingBytesByKind(), sent};
    });
    for (Object[] r : out) {
      long[] sent = (long[]) r[1];
      assertThat(Arrays.stream(sent).min().getAsLong()).as("seed %d", seed).isPositive();
      @SuppressWarnings("unchecked") Map<String, Long> byKind = (Map<String, Long>) r[0];
      assertThat(byKind).as("seed %d", seed).containsExactly(Map.entry("all-reduce fwd", sent[0]),
          Map.entry("all-reduce bwd", sent[1]), Map.entry("all-gather fwd", sent[2]),
          Map.entry(CollectiveSites.EXACT_GRADIENTS, sent[3]));
    }
  }

  /**
   * A pricing without timing noise for the chooser's tests: the payload's two phases on {@code link} plus 1 ns per value
   * of codec work (none for bf16, whose packing the model leaves out).
   */
  static Pricing modelPricing(dev.taco.collective.link.LinkProfile link) {
    return (plan, kind, rows, cols) -> {
      long payload = plan.codec().encodedSize(rows, cols);
      double work = plan.codec().name().equals("none") ? 0 : 1e-9 * rows * cols;
      return 2 * link.phaseSeconds(payload, 2) + work;
    };
  }

  /**
   * Host pricing: an exact plan costs its phases alone (no codec work), an all-reduce two phases and an all-gather one,
   * at the link's bandwidth; a codec costs its phases plus a positive codec work.
   */
  @Test
  void hostPricingAddsTheLinksPhasesToTheCodecsWork() {
    var link = dev.taco.collective.link.LinkProfiles.byName("2");
    HostPricing p = new HostPricing(link, 2);
    long exact = 4L * ROWS * COLS, taco = Codecs.byName("taco").encodedSize(ROWS, COLS);
    assertThat(p.seconds(Plan.EXACT, CollectiveKind.ALL_REDUCE, ROWS, COLS))
        .isCloseTo(2 * link.phaseSeconds(exact, 2), org.assertj.core.data.Offset.offset(1e-12));
    assertThat(p.seconds(Plan.EXACT, CollectiveKind.ALL_GATHER, ROWS, COLS))
        .isCloseTo(link.phaseSeconds(2 * exact, 2), org.assertj.core.data.Offset.offset(1e-12));
    assertThat(p.seconds(Plan.of(Codecs.byName("taco")), CollectiveKind.ALL_REDUCE, ROWS, COLS))
        .isGreaterThan(2 * link.phaseSeconds(taco, 2));
    assertThat(HostPricing.memoryLink().busbw(1 << 20)).isPositive();
  }

}
