package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.codec.Codecs;
import dev.taco.codec.Fp8Format;
import dev.taco.codec.MalformedPayloadException;
import dev.taco.codec.NcclFp8Codec;
import dev.taco.codec.NonFiniteInputException;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.nccl.NcclDataType;
import dev.taco.kernels.Fp8;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code nccl-fp8} on the host ({@link TwoShot} over {@link HostWire}): every output bit against NCCL's arithmetic
 * written out step by step here, in float32 and binary16 only (the group's absmax, the cast, the ring's chain of
 * binary16 adds rounded to FP8 from the rank after the chunk's owner round to the owner, the cast back), at R = 2, 3,
 * 4 and 8, both formats and both scale rules, with sums that saturate and values too small for FP8; the bytes of a
 * ring plus the absmax exchange; and the refusals. The seed is printed; {@code -Dtaco.seed=N} repeats it.
 */
class NcclFp8CollectivesTest {
  private static final long SEED = Long.getLong("taco.seed", System.nanoTime());

  static {
    System.out.println("NcclFp8CollectivesTest seed = " + SEED);
  }

  enum Op { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER }

  static final List<NcclFp8Codec> CODECS = List.of(new NcclFp8Codec(),
      new NcclFp8Codec(Fp8Format.E5M2, NcclFp8Codec.ScaleRule.SUM, NcclFp8Codec.NonFinite.REFUSE),
      new NcclFp8Codec(Fp8Format.E4M3, NcclFp8Codec.ScaleRule.MAX, NcclFp8Codec.NonFinite.REFUSE));

  /**
   * Gaussian values, with loud positive values at the same places on every rank (their sum saturates under the max
   * rule) and values 2^-24 of them (below the smallest subnormal once scaled).
   */
  static float[] input(long seed, int rank, int rows, int cols) {
    SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + rank * 7919L + rows * 31L + cols);
    float[] x = new float[rows * cols];
    for (int i = 0; i < x.length; i++) {
      x[i] = i % 29 == 0 ? 40f + (float) rnd.nextDouble() : i % 31 == 1 ? 0x1p-24f * (float) rnd.nextGaussian()
          : (float) rnd.nextGaussian();
    }
    return x;
  }

  /**
   * NCCL's sum of two FP8 codes on sm90, {@code __nv_fp8(__hadd(__half(a), __half(b)))}: binary16 widening (exact),
   * binary16 add (Java's {@code floatToFloat16} of the float32 sum rounds as {@code __hadd} for binary16 operands),
   * {@code cvt.rn.satfinite} back (round to nearest even, beyond the maximum, infinity included, to the maximum).
   */
  static int hop(int a, int b, int f) {
    short ha = Float.floatToFloat16(Fp8.decode((byte) a, f)), hb = Float.floatToFloat16(Fp8.decode((byte) b, f));
    return Fp8.encode(Float.float16ToFloat(Float.floatToFloat16(Float.float16ToFloat(ha) + Float.float16ToFloat(hb))),
        f) & 0xFF;
  }

  /** Rank {@code rank}'s output of {@code op}, step by step: cast, ring chain, cast back. */
  static float[] reference(Op op, NcclFp8Codec codec, float[][] in, int rows, int cols, int rank) {
    int world = in.length, f = codec.format().code(), n = rows * cols;
    float amax = 0f;
    for (float[] x : in) for (float v : x) amax = Math.max(amax, Math.abs(v));
    float top = Fp8.maxValue(f) / (codec.rule() == NcclFp8Codec.ScaleRule.SUM ? world : 1);
    int[][] code = new int[world][n];
    for (int q = 0; q < world; q++) {
      for (int i = 0; i < n; i++) code[q][i] = Fp8.encode(amax == 0 ? 0f : in[q][i] / amax * top, f) & 0xFF;
    }
    int len = op == Op.ALL_GATHER ? world * n : op == Op.REDUCE_SCATTER ? n / world : n;
    float[] out = new float[len];
    int rp = (rows + world - 1) / world;
    for (int j = 0; j < len; j++) {
      int c;
      if (op == Op.ALL_GATHER) {
        c = code[j / n][j % n];
      } else {
        int i = op == Op.ALL_REDUCE ? j : rank * len + j;
        int owner = op == Op.ALL_REDUCE ? i / cols / rp : rank;
        int q = (owner + 1) % world;
        c = code[q][i];
        for (int k = 2; k <= world; k++) {
          q = (q + 1) % world;
          c = hop(c, code[q][i], f);
        }
      }
      out[j] = Fp8.decode((byte) c, f) / top * amax;
    }
    return out;
  }

  /** Runs {@code op} with {@code codec} on every rank; returns each rank's output and bytes sent. */
  static List<Object[]> run(Op op, NcclFp8Codec codec, float[][] in, int rows, int cols) {
    Plan plan = Plan.of(codec);
    int world = in.length;
    return LocalGroup.run(world, comm -> {
      HostWire w = new HostWire(comm);
      float[] x = in[comm.rank()].clone(), out;
      switch (op) {
        case ALL_REDUCE -> {
          TwoShot.allReduce(w, plan, x, rows, cols);
          out = x;
        }
        case ALL_GATHER -> TwoShot.allGather(w, plan, x, rows, cols, out = new float[world * rows * cols]);
        default -> TwoShot.reduceScatter(w, plan, x, rows, cols, out = new float[rows / world * cols]);
      }
      return new Object[] {out, comm.bytesSent()};
    });
  }

  @ParameterizedTest(name = "R={0}")
  @ValueSource(ints = {2, 3, 4, 8})
  void everyBitIsNcclsArithmeticStepByStep(int world) {
    int[][] shapes = {{1, 5}, {13, 37}, {2 * world, 64}};
    for (NcclFp8Codec codec : CODECS) {
      int saturated = 0, collapsed = 0;
      for (int[] s : shapes) {
        for (Op op : Op.values()) {
          int rows = op == Op.REDUCE_SCATTER ? s[0] * world : s[0], cols = s[1];
          float[][] in = new float[world][];
          for (int q = 0; q < world; q++) in[q] = input(SEED, q, rows, cols);
          List<Object[]> res = run(op, codec, in, rows, cols);
          int f = codec.format().code();
          float amax = 0f, top = Fp8.maxValue(f) / codec.divisor(world);
          for (float[] x : in) for (float v : x) amax = Math.max(amax, Math.abs(v));
          for (int r = 0; r < world; r++) {
            String where = codec + " " + op + " R=" + world + " " + rows + " x " + cols + " rank " + r + ", seed "
                + SEED;
            float[] want = reference(op, codec, in, rows, cols, r), got = (float[]) res.get(r)[0];
            for (int j = 0; j < want.length; j++) {
              if (Float.floatToRawIntBits(got[j]) != Float.floatToRawIntBits(want[j])) {
                throw new AssertionError(where + ": element " + j + " is " + got[j] + ", NCCL's sum gives " + want[j]);
              }
              if (r == 0 && op == Op.ALL_REDUCE) {
                float exact = 0f;
                for (float[] x : in) exact += x[j];
                if (exact != 0 && got[j] == 0) collapsed++;
                if (Math.abs(exact) / amax * top > 1.05f * Fp8.maxValue(f)) saturated++; // past the top code
              }
            }
            long payloads = HostWire.payloadBytes(Plan.of(codec), op == Op.ALL_REDUCE ? TwoShot.ceilDiv(rows, world)
                : op == Op.ALL_GATHER ? rows : rows / world, cols);
            long bytes = (op == Op.ALL_REDUCE ? 2 : 1) * (world - 1) * payloads + 4L * (world - 1); // + the absmaxes
            assertThat((long) res.get(r)[1]).as(where + ": bytes").isEqualTo(bytes);
          }
        }
      }
      assertThat(collapsed).as(codec + ": non-zero sums of values too small for FP8, sent as 0").isPositive();
      if (codec.rule() == NcclFp8Codec.ScaleRule.MAX) {
        assertThat(saturated).as(codec + ": sums past FP8's maximum").isPositive();
      } else {
        assertThat(saturated).as(codec + ": no sum saturates under the sum rule").isZero();
      }
    }
  }

  @Test
  void nanIsRefusedNamingTheRowTheColumnAndTheRank() {
    int world = 2, rows = 6, cols = 10;
    float[][] in = {input(SEED, 0, rows, cols), input(SEED, 1, rows, cols)};
    in[1][4 * cols + 7] = Float.NaN; // rank 1's row 4 lies in rank 1's chunk: its own cast in the reduce refuses it
    assertThatThrownBy(() -> run(Op.ALL_REDUCE, new NcclFp8Codec(), in, rows, cols))
        .isInstanceOf(NonFiniteInputException.class).hasMessageContaining("rows 3..6").hasMessageContaining("rank 1")
        .hasMessageContaining("row 1, col 7");
    in[1][4 * cols + 7] = 1f;
    in[1][7] = Float.POSITIVE_INFINITY; // row 0: sent to rank 0
    assertThatThrownBy(() -> run(Op.REDUCE_SCATTER, new NcclFp8Codec(), in, rows, cols))
        .isInstanceOf(NonFiniteInputException.class).hasMessageContaining("rows 0..3").hasMessageContaining("rank 1")
        .hasMessageContaining("row 0, col 7");
  }

  @Test
  void aReduceScatterWhoseRowsDoNotSplitIsRefused() {
    float[][] in = {new float[5 * 4], new float[5 * 4]};
    assertThatThrownBy(() -> run(Op.REDUCE_SCATTER, new NcclFp8Codec(), in, 5, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("5 rows do not split over 2 ranks");
  }

  @Test
  void aPeerThatCastWithAnotherScaleIsMalformed() {
    int rows = 4, cols = 8;
    assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
      Communicator lying = comm.rank() == 0 ? comm : new HalvingGather(comm); // rank 1 sees half the group's absmax
      float[] x = input(SEED, comm.rank(), rows, cols);
      TwoShot.allReduce(new HostWire(lying), Plan.of(new NcclFp8Codec()), x, rows, cols);
      return null;
    })).isInstanceOf(MalformedPayloadException.class).hasMessageContaining("payload from rank")
        .hasMessageContaining("the group's is");
  }

  @Test
  void theCodecNamesAndTheRefusalsOfFp8ReductionsOnNccl() {
    assertThat(Codecs.byName("nccl-fp8:e5m2")).isInstanceOf(NcclFp8Codec.class).hasToString("nccl-fp8:e5m2");
    assertThat(Codecs.byName("NCCL-FP8,nonfinite=propagate")).hasToString("nccl-fp8:nonfinite=propagate");
    assertThatThrownBy(() -> Codecs.byName("nccl-fp8:g=64")).hasMessageContaining("nccl-fp8 has no group size");
    assertThatThrownBy(() -> Codecs.byName("nccl-fp8:hadamard=off"))
        .hasMessageContaining("hadamard taco's, mxfp4's and nvfp4's");
    assertThat(Codecs.parseList("none,nccl-fp8:e5m2,taco")).containsExactly("none", "nccl-fp8:e5m2", "taco");
    assertThat(NcclDataType.fp8Problem(22803, 9, 0)).isNull();
    assertThat(NcclDataType.fp8Problem(22105, 9, 0))
        .isEqualTo("NCCL 2.21.5 has no FP8 data types (ncclFloat8e4m3 and ncclFloat8e5m2 came with NCCL 2.24.0)");
    assertThat(NcclDataType.fp8Problem(22400, 8, 9))
        .isEqualTo("NCCL reduces FP8 on sm90 and later GPUs only; this one is sm_89");
    assertThat(NcclDataType.FLOAT8_E4M3.code()).isEqualTo(10);
    assertThat(NcclDataType.FLOAT8_E5M2.code()).isEqualTo(11);
    assertThat(DeviceCollectives.unsupported(Plan.of(new NcclFp8Codec()))).isNull();
    assertThat(DeviceCollectives.unsupported(Plan.of(new NcclFp8Codec()).tokenAxis())).contains("in order");
  }

  private static final Site MLP0 = new Site.Layer(0, Site.Block.MLP, false, Site.Direction.FORWARD);

  @Test
  void siteCollectivesSendItAsTheUserNamedItWithoutCalibrating() {
    int rows = 16, cols = 32;
    List<Object[]> res = LocalGroup.run(2, comm -> {
      CollectiveSites sites = new CollectiveSites(comm, "nccl-fp8", 2, 0);
      sites.setSampling(true);
      float[] x = input(SEED, comm.rank(), rows, cols);
      for (int step = 0; step < 3; step++) sites.allReduce(MLP0, x.clone(), rows, cols);
      return new Object[] {sites.plans(), sites.sampledErrors(), sites.plan(MLP0)};
    });
    assertThat((java.util.Map<?, ?>) res.get(0)[0]).as("no calibrated plans").isEmpty();
    var sampled = (java.util.Map<String, CollectiveSites.SampledError>) res.get(0)[1];
    assertThat(sampled.get("fwd").samples()).isEqualTo(3);
    assertThat(sampled.get("fwd").rel_l2()).isBetween(0.001, 0.05);
    assertThat(((Plan) res.get(0)[2]).describe()).isEqualTo("nccl-fp8 in-order");
  }

  /** A communicator whose all-gather hands this rank every value halved (a rank that disagrees on the group's amax). */
  private record HalvingGather(Communicator c) implements Communicator {
    @Override
    public int rank() {
      return c.rank();
    }

    @Override
    public int worldSize() {
      return c.worldSize();
    }

    @Override
    public void allReduce(float[] buf, int off, int n) {
      c.allReduce(buf, off, n);
    }

    @Override
    public void allGather(float[] send, int sendOff, int n, float[] recv, int recvOff) {
      c.allGather(send, sendOff, n, recv, recvOff);
      for (int i = 0; i < worldSize() * n; i++) recv[recvOff + i] /= 2;
    }

    @Override
    public void reduceScatter(float[] send, int sendOff, int n, float[] recv, int recvOff) {
      c.reduceScatter(send, sendOff, n, recv, recvOff);
    }

    @Override
    public void allToAll(float[] send, int sendOff, int n, float[] recv, int recvOff) {
      c.allToAll(send, sendOff, n, recv, recvOff);
    }

    @Override
    public byte[][] allToAllBytes(byte[][] send) {
      return c.allToAllBytes(send);
    }

    @Override
    public byte[][] allToAllControl(byte[][] send) {
      return c.allToAllControl(send);
    }

    @Override
    public void barrier() {
      c.barrier();
    }

    @Override
    public long bytesSent() {
      return c.bytesSent();
    }

    @Override
    public void close() {}
  }
}
