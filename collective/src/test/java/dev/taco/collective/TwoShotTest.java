package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Codecs;
import dev.taco.codec.NonFiniteInputException;
import dev.taco.codec.MalformedPayloadException;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The compressed collectives of {@link TwoShot} on the host ({@link HostWire} over the local transport): values within
 * each codec's bound of a float64 reference, bit-identical replicas, the bytes each plan puts on the wire, the identity
 * at one rank, and the failures (non-finite input, malformed payloads, shapes that differ across ranks).
 */
class TwoShotTest {

  /** A plan under test and its bound on ||result - exact|| / ||sum_q |x_q| || (two quantisations for all-reduce). */
  record Case(String label, Plan plan, double bound) {
    @Override
    public String toString() {
      return label;
    }
  }

  static final List<Case> CASES = List.of(
      new Case("fp32", Plan.EXACT, 1e-6),
      // bf16 keeps 8 significant bits: <= 2^-8 relative per rounding, two roundings in the all-reduce
      new Case("none", Plan.of(Codecs.byName("none")), 0x1p-7 * 1.01 + 1e-6),
      new Case("taco", Plan.of(Codecs.byName("taco")), 0.06),
      new Case("taco:e5m2", Plan.of(Codecs.byName("taco:e5m2")), 0.12),
      new Case("taco g=256 no hadamard", Plan.of(Codecs.byName("taco:g=256,hadamard=off")), 0.06),
      new Case("int8-group", Plan.of(Codecs.byName("int8-group")), 0.03));

  /** rows x cols shapes: 1 element, sizes not divisible by R or G, a row shorter than a group. */
  static final int[][] SHAPES = {{1, 1}, {3, 5}, {7, 100}, {12, 64}, {13, 130}};

  enum Op { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER }

  static Stream<Arguments> casesAndWorlds() {
    return CASES.stream().flatMap(c -> Stream.of(1, 2, 3, 4).map(r -> Arguments.of(c, r)));
  }

  /** Heavy-tailed values with exact zeros and a few loud channels; deterministic in its arguments. */
  static float[] input(long seed, int rank, int rows, int cols) {
    SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + rank * 7919L + rows * 31L + cols);
    float[] x = new float[rows * cols];
    for (int i = 0; i < x.length; i++) {
      double g = rnd.nextGaussian();
      x[i] = rnd.nextInt(16) == 0 ? 0f : (float) (g * Math.exp(rnd.nextGaussian()) * (i % cols % 17 == 3 ? 50 : 1));
    }
    return x;
  }

  /** Runs {@code op} on every rank with its own input; returns each rank's output and bytes sent. */
  static List<Object[]> run(Op op, Plan plan, int world, long seed, int rows, int cols) {
    return LocalGroup.run(world, comm -> {
      HostWire w = new HostWire(comm);
      float[] x = input(seed, comm.rank(), rows, cols);
      float[] out;
      switch (op) {
        case ALL_REDUCE -> {
          TwoShot.allReduce(w, plan, x, rows, cols);
          out = x;
        }
        case ALL_GATHER -> {
          out = new float[world * rows * cols];
          TwoShot.allGather(w, plan, x, rows, cols, out);
        }
        default -> {
          out = new float[rows / world * cols];
          TwoShot.reduceScatter(w, plan, x, rows, cols, out);
        }
      }
      return new Object[] {out, comm.bytesSent()};
    });
  }

  /** float64 reference of rank {@code rank}'s output: [0] the exact result, [1] sum of |terms| per element. */
  static double[][] reference(Op op, int world, long seed, int rows, int cols, int rank) {
    int n = rows * cols;
    int len = op == Op.ALL_REDUCE ? n : op == Op.ALL_GATHER ? world * n : n / world;
    double[][] ref = new double[2][len];
    for (int q = 0; q < world; q++) {
      float[] x = input(seed, q, rows, cols);
      for (int j = 0; j < len; j++) {
        double v = switch (op) {
          case ALL_REDUCE -> x[j];
          case ALL_GATHER -> j / n == q ? x[j % n] : 0;
          case REDUCE_SCATTER -> x[rank * len + j];
        };
        ref[0][j] += v;
        ref[1][j] += Math.abs(v);
      }
    }
    return ref;
  }

  /** Bytes one rank sends: chunk payloads per phase, the chunk shape fixed by the op (padding rows included). */
  static long expectedBytes(Op op, Plan plan, int world, int rows, int cols) {
    if (world == 1) return 0;
    return switch (op) {
      case ALL_REDUCE -> 2L * (world - 1) * HostWire.payloadBytes(plan, TwoShot.ceilDiv(rows, world), cols);
      case ALL_GATHER -> (long) (world - 1) * HostWire.payloadBytes(plan, rows, cols);
      case REDUCE_SCATTER -> (long) (world - 1) * HostWire.payloadBytes(plan, rows / world, cols);
    };
  }

  @ParameterizedTest(name = "{0} R={1}")
  @MethodSource("casesAndWorlds")
  void withinTheCodecBoundBitIdenticalReplicasAndBytesFromShapeAndPlan(Case c, int world) {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    for (int[] shape : SHAPES) {
      for (Op op : Op.values()) {
        int rows = op == Op.REDUCE_SCATTER ? shape[0] * world : shape[0];
        int cols = shape[1];
        List<Object[]> res = run(op, c.plan(), world, seed, rows, cols);
        for (int r = 0; r < world; r++) {
          float[] got = (float[]) res.get(r)[0];
          double[][] ref = reference(op, world, seed, rows, cols, r);
          String where = c + " " + op + " R=" + world + " " + rows + "x" + cols + " rank " + r + " seed " + seed;
          double err2 = 0, scale2 = 0;
          for (int j = 0; j < got.length; j++) {
            assertThat(Float.isFinite(got[j])).as(where + " element " + j).isTrue();
            err2 += (got[j] - ref[0][j]) * (got[j] - ref[0][j]);
            scale2 += ref[1][j] * ref[1][j];
          }
          assertThat(Math.sqrt(err2)).as(where + ": L2 error")
              .isLessThanOrEqualTo(c.bound() * Math.sqrt(scale2) + 1e-30);
          if (op != Op.REDUCE_SCATTER) {
            assertThat(got).as(where + ": same bits as rank 0").isEqualTo((float[]) res.get(0)[0]);
          }
          assertThat((long) res.get(r)[1]).as(where + ": bytes sent")
              .isEqualTo(expectedBytes(op, c.plan(), world, rows, cols));
        }
      }
    }
  }

  @Test
  void oneRankMovesNothingAndQuantisesNothing() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    Plan taco = Plan.of(Codecs.byName("taco"));
    for (Op op : Op.values()) {
      List<Object[]> res = run(op, taco, 1, seed, 7, 100);
      float[] x = input(seed, 0, 7, 100);
      assertThat((float[]) res.get(0)[0]).as(op + " at R=1, seed " + seed).isEqualTo(x);
      assertThat((long) res.get(0)[1]).as(op + " bytes").isZero();
    }
  }

  @Test
  void allReduceIsAllGatherOfReduceScatterBitForBit() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    int world = 4, rows = 16, cols = 192;
    Plan taco = Plan.of(Codecs.byName("taco"));
    List<float[]> viaHalves = LocalGroup.run(world, comm -> {
      HostWire w = new HostWire(comm);
      float[] shard = new float[rows / world * cols];
      TwoShot.reduceScatter(w, taco, input(seed, comm.rank(), rows, cols), rows, cols, shard);
      float[] out = new float[rows * cols];
      TwoShot.allGather(w, taco, shard, rows / world, cols, out);
      return out;
    });
    List<Object[]> direct = run(Op.ALL_REDUCE, taco, world, seed, rows, cols);
    for (int r = 0; r < world; r++) {
      assertThat((float[]) direct.get(r)[0]).as("rank " + r + " seed " + seed).isEqualTo(viaHalves.get(r));
    }
  }

  @Test
  void everyLayoutIsUndoneAfterTheAllReduce() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    int world = 3, rows = 10, cols = 128;
    AbstractCodec codec = Codecs.byName("taco:g=32");
    int[] perm = new int[cols];
    for (int j = 0; j < cols; j++) perm[j] = (j * 37) % cols;
    for (Plan plan : List.of(Plan.of(codec).permuted(perm), Plan.of(codec).tokenAxis())) {
      List<Object[]> res = run(Op.ALL_REDUCE, plan, world, seed, rows, cols);
      double[][] ref = reference(Op.ALL_REDUCE, world, seed, rows, cols, 0);
      float[] got = (float[]) res.get(0)[0];
      double err2 = 0, scale2 = 0;
      for (int j = 0; j < got.length; j++) {
        err2 += (got[j] - ref[0][j]) * (got[j] - ref[0][j]);
        scale2 += ref[1][j] * ref[1][j];
      }
      assertThat(Math.sqrt(err2 / scale2)).as(plan.describe() + " seed " + seed).isLessThan(0.06);
      assertThat((float[]) res.get(2)[0]).isEqualTo(got);
    }
    assertThatThrownBy(() -> run(Op.ALL_GATHER, Plan.of(codec).tokenAxis(), 2, seed, 4, 64))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("token-axis plans are for all-reduce");
  }

  @Test
  void reduceScatterNeedsRowsDivisibleByTheRanks() {
    assertThatThrownBy(() -> run(Op.REDUCE_SCATTER, Plan.EXACT, 3, 1, 7, 4))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("7 rows do not split over 3 ranks");
  }

  @Test
  void nonFiniteInputFailsOnItsRankAndAbortsThePeers() {
    Plan none = Plan.of(Codecs.byName("none"));
    assertThatThrownBy(() -> LocalGroup.run(3, comm -> {
      float[] x = input(3, comm.rank(), 6, 10);
      if (comm.rank() == 2) x[14] = Float.NaN;
      TwoShot.allReduce(new HostWire(comm), none, x, 6, 10);
      return null;
    })).isInstanceOf(NonFiniteInputException.class).hasMessageContaining("non-finite")
        .hasMessageContaining("row 1, col 4").hasMessageContaining("chunk of tensor rows 0..2")
        .satisfies(t -> assertThat(((NonFiniteInputException) t).location()).contains("chunk of tensor rows 0..2")
            .contains("non-finite input NaN").doesNotContain("nonfinite=propagate"))
        .satisfies(t -> assertThat(t.getSuppressed()).hasSize(2).allSatisfy(s -> assertThat(s)
            .isInstanceOf(CollectiveException.class).hasMessageContaining("rank 2 failed")));
  }

  /**
   * Two different permutations of 64 channels with the same {@code Arrays.hashCode} (a birthday search over shuffles,
   * seed 1: about 60 000 of them), which a plan description carrying a 32-bit hash let pass as the same plan.
   */
  static int[][] hashCollidingPermutations() {
    java.util.Random rnd = new java.util.Random(1);
    java.util.Map<Integer, int[]> seen = new java.util.HashMap<>();
    while (true) {
      int[] p = java.util.stream.IntStream.range(0, 64).toArray();
      for (int i = p.length - 1; i > 0; i--) {
        int j = rnd.nextInt(i + 1);
        int t = p[i];
        p[i] = p[j];
        p[j] = t;
      }
      int[] q = seen.putIfAbsent(java.util.Arrays.hashCode(p), p);
      if (q != null && !java.util.Arrays.equals(q, p)) {
        return new int[][] {q, p};
      }
    }
  }

  @Test
  void callsThatDifferAcrossRanksAreAClearErrorOnEveryRankNotAWrongTensor() {
    Plan taco = Plan.of(Codecs.byName("taco"));
    int[][] hashTwins = hashCollidingPermutations();
    assertThat(java.util.Arrays.hashCode(hashTwins[0])).isEqualTo(java.util.Arrays.hashCode(hashTwins[1]));
    int[] perm = {1, 0, 2, 3, 4, 5, 6, 7};
    record Call(String op, Plan plan, int rows, int cols) {}
    // rank 0's call, rank 1's call: shapes whose chunks coincide (4 x 2 and 3 x 2 both make 2-row chunks), another
    // layout, another permutation, another collective
    List<Call[]> pairs = List.of(
        new Call[] {new Call("ar", taco, 4, 2), new Call("ar", taco, 3, 2)},
        new Call[] {new Call("ar", Plan.EXACT, 2, 8), new Call("ar", Plan.EXACT, 4, 4)},
        new Call[] {new Call("ar", taco, 8, 8), new Call("ar", taco.tokenAxis(), 8, 8)},
        new Call[] {new Call("ar", taco.permuted(perm), 8, 8), new Call("ar", taco, 8, 8)},
        new Call[] {new Call("ar", Plan.EXACT.permuted(hashTwins[0]), 2, 64),
            new Call("ar", Plan.EXACT.permuted(hashTwins[1]), 2, 64)},
        new Call[] {new Call("ar", taco, 2, 4), new Call("ag", taco, 1, 4)});
    for (Call[] pair : pairs) {
      List<Object> errors = LocalGroup.run(2, comm -> {
        Call c = pair[comm.rank()];
        float[] x = input(5, comm.rank(), c.rows(), c.cols());
        float[] before = x.clone();
        try {
          if (c.op().equals("ar")) {
            TwoShot.allReduce(new HostWire(comm), c.plan(), x, c.rows(), c.cols());
          } else {
            TwoShot.allGather(new HostWire(comm), c.plan(), x, c.rows(), c.cols(), new float[2 * x.length]);
          }
          return null;
        } catch (CollectiveException e) {
          assertThat(x).as("the tensor is left as it was").isEqualTo(before);
          return e;
        }
      });
      for (Object e : errors) {
        assertThat(e).as(pair[0] + " vs " + pair[1]).isInstanceOf(CollectiveException.class);
        assertThat(((Exception) e).getMessage()).contains("every rank must call the same collective");
      }
    }
  }

  @Test
  void tensorsTooSmallForTheShapeAreRefusedBeforeAnythingMoves() {
    Plan taco = Plan.of(Codecs.byName("taco"));
    try (LocalCommunicator comm = LocalGroup.create(1).get(0)) {
      HostWire w = new HostWire(comm);
      assertThatThrownBy(() -> TwoShot.allReduce(w, taco, new float[10], 4, 4))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage("all-reduce: the tensor holds 10 values, the shape needs 16");
      assertThatThrownBy(() -> TwoShot.allGather(w, taco, new float[16], 4, 4, new float[15]))
          .hasMessage("all-gather: the output holds 15 values, the shape needs 16");
      assertThatThrownBy(() -> HostWire.payloadBytes(Plan.EXACT, 1 << 29, 2))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("over 2^31-1");
    }
  }

  @Test
  void aSumThatIsNotFiniteSaysWhereAndWhy() {
    Plan none = Plan.of(Codecs.byName("none"));
    assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
      float[] x = new float[8 * 4];
      java.util.Arrays.fill(x, 3e38f); // finite inputs whose sum overflows float32
      TwoShot.allReduce(new HostWire(comm), none, x, 8, 4);
      return null;
    })).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is not finite")
        .hasMessageContaining("the sum overflowed float32").hasMessageContaining("chunk of tensor rows");
    // one finite 1e38 among zeros: taco's decompress-reduce sums in the rotated domain, and its inverse transform of
    // a spike adds sqrt(G) values of 1e38 / sqrt(G) before scaling; without the transform it goes through
    assertThatThrownBy(() -> allReduceSpike("taco")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("overflows in its inverse transform").hasMessageContaining("hadamard=off");
    assertThat(allReduceSpike("taco:hadamard=off")).allSatisfy(v -> assertThat(v).isCloseTo(1e38f,
        org.assertj.core.data.Percentage.withPercentage(7)));
  }

  /**
   * Every rank's element (5, 3) after an all-reduce of 8 x 256 zeros but rank 0's element (5, 3), 1e38, under codec
   * spec: row 5 is rank 1's to reduce, so rank 0's 1e38 reaches it compressed.
   */
  private static List<Float> allReduceSpike(String spec) {
    Plan plan = Plan.of(Codecs.byName(spec));
    return LocalGroup.run(2, comm -> {
      float[] x = new float[8 * 256];
      if (comm.rank() == 0) x[5 * 256 + 3] = 1e38f;
      TwoShot.allReduce(new HostWire(comm), plan, x, 8, 256);
      return x[5 * 256 + 3];
    });
  }

  @Test
  void aCorruptedPayloadIsRejectedNamingItsSourceBeforeAnythingIsWritten() {
    Plan taco = Plan.of(Codecs.byName("taco"));
    assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
      Communicator flipping = new CorruptingCommunicator(comm, comm.rank() == 1);
      float[] x = input(9, comm.rank(), 6, 64);
      float[] before = x.clone();
      try {
        TwoShot.allReduce(new HostWire(flipping), taco, x, 6, 64);
      } finally {
        assertThat(x).as("rank " + comm.rank() + " tensor unchanged").isEqualTo(before);
      }
      return null;
    })).isInstanceOf(MalformedPayloadException.class).hasMessageContaining("from rank 0")
        .hasMessageContaining("checksum");
  }

  /** Delegates to a real communicator; when {@code corrupt}, flips one body byte of every payload it receives. */
  private record CorruptingCommunicator(Communicator inner, boolean corrupt) implements Communicator {
    @Override
    public int rank() { return inner.rank(); }
    @Override
    public int worldSize() { return inner.worldSize(); }
    @Override
    public void allReduce(float[] buf, int off, int n) { inner.allReduce(buf, off, n); }
    @Override
    public void allGather(float[] s, int so, int n, float[] r, int ro) { inner.allGather(s, so, n, r, ro); }
    @Override
    public void reduceScatter(float[] s, int so, int n, float[] r, int ro) { inner.reduceScatter(s, so, n, r, ro); }
    @Override
    public void allToAll(float[] s, int so, int n, float[] r, int ro) { inner.allToAll(s, so, n, r, ro); }
    @Override
    public byte[][] allToAllControl(byte[][] send) { return inner.allToAllControl(send); }
    @Override
    public void barrier() { inner.barrier(); }
    @Override
    public long bytesSent() { return inner.bytesSent(); }
    @Override
    public void close() { inner.close(); }

    @Override
    public byte[][] allToAllBytes(byte[][] send) {
      byte[][] in = inner.allToAllBytes(send);
      for (int q = 0; corrupt && q < in.length; q++) {
        if (q != rank() && in[q].length > 40) in[q][40] ^= 0x10;
      }
      return in;
    }
  }
}
