package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.codec.Codec;
import dev.taco.codec.Codecs;
import dev.taco.collective.Harness.Op;
import dev.taco.collective.Harness.Results;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Compressed collectives over the local transport, for every codec in {@link #CODECS}. */
class CompressedCommunicatorTest {

  /**
   * A codec under test.
   *
   * @param relL2Bound bound on {@code ||result - exact||_2 / ||sum_q |x_q| ||_2} for every op (two quantisations
   *     for all-reduce, one otherwise)
   * @param chunkAlign all-reduce chunk alignment handed to {@link CompressedCommunicator}
   */
  record CodecCase(String label, Codec codec, double relL2Bound, int chunkAlign) {
    @Override
    public String toString() {
      return label;
    }
  }

  /** Codecs every compressed test runs with; extend here. */
  static final List<CodecCase> CODECS = List.of(
      new CodecCase("fp32", Codecs.byName("fp32"), 1e-6, 1),
      // bf16: <= 2^-9 relative per quantisation, all-reduce quantises twice
      new CodecCase("none", Codecs.byName("none"), 0x1p-8 * 1.01 + 1e-6, 1),
      new CodecCase("none/align32", Codecs.byName("none"), 0x1p-8 * 1.01 + 1e-6, 32),
      // E4M3: 3 mantissa bits, ~2.7 % RMS relative error per quantisation (measured in the codec's tests)
      new CodecCase("taco", Codecs.byName("taco"), 0.06, 64),
      new CodecCase("taco:e5m2", Codecs.byName("taco:e5m2"), 0.12, 64),
      new CodecCase("int8-group", Codecs.byName("int8-group"), 0.03, 128));


  static Stream<Arguments> codecsAndWorlds() {
    return CODECS.stream().flatMap(c -> Harness.worlds().mapToObj(r -> Arguments.of(c, r)));
  }

  private static Function<Communicator, Communicator> wrap(CodecCase c) {
    return comm -> new CompressedCommunicator(comm, c.codec(), c.chunkAlign());
  }

  @ParameterizedTest(name = "{0} R={1}")
  @MethodSource("codecsAndWorlds")
  void withinCodecBoundBitIdenticalAcrossRanksAndBytesAsPayloads(CodecCase c, int world) {
    long seed = 7;
    Results res = Harness.runAll(world, seed, wrap(c));
    for (int s = 0; s < Harness.SIZES.length; s++) {
      int n = Harness.SIZES[s];
      for (Op op : Op.values()) {
        float[][] in = Harness.inputs(op, world, n, seed);
        for (int r = 0; r < world; r++) {
          float[] got = res.out()[s][op.ordinal()][r];
          double[][] want = Harness.oracle(op, in, r, n);
          String where = c + " " + op + " R=" + world + " n=" + n + " rank " + r;
          assertThat(got).as(where).hasSize(want[0].length);
          double err2 = 0;
          double scale2 = 0;
          for (int j = 0; j < got.length; j++) {
            err2 += (got[j] - want[0][j]) * (got[j] - want[0][j]);
            scale2 += want[1][j] * want[1][j];
          }
          assertThat(Math.sqrt(err2)).as(where + " L2 error, relative " + Math.sqrt(err2 / scale2)).isLessThanOrEqualTo(c.relL2Bound() * Math.sqrt(scale2));
          if (op.replicated()) {
            assertThat(got).as(where + " bits equal rank 0").isEqualTo(res.out()[s][op.ordinal()][0]);
          }
          long expectBytes = Harness.wireBytes(op, world, n, r, c.chunkAlign(),
              (real, padded) -> c.codec().encodedSize(1, padded));
          assertThat(res.bytes()[s][op.ordinal()][r]).as(where + " bytes").isEqualTo(expectBytes);
        }
      }
    }
  }

  @ParameterizedTest(name = "R={0}")
  @ValueSource(ints = {1, 2, 3, 4})
  void exactCodecGivesTheExactTransportsBits(int world) {
    Results exact = Harness.runAll(world, 3, Function.identity());
    Results viaCodec = Harness.runAll(world, 3, wrap(CODECS.get(0)));
    assertThat(viaCodec.out()).isDeepEqualTo(exact.out());
  }

  @Test
  void bf16HalvesTheBytesOnTheWire() {
    int world = 4;
    int last = Harness.SIZES.length - 1; // n = 4099, not divisible by R
    Results exact = Harness.runAll(world, 5, Function.identity());
    Results bf16 = Harness.runAll(world, 5, wrap(CODECS.get(1)));
    for (Op op : Op.values()) {
      long e = 0;
      long b = 0;
      for (int r = 0; r < world; r++) {
        e += exact.bytes()[last][op.ordinal()][r];
        b += bf16.bytes()[last][op.ordinal()][r];
      }
      // bf16 values plus a 28-byte header per ~1000-value chunk
      assertThat((double) b / e).as(op.toString()).isBetween(0.5, 0.52);
    }
  }

  @Test
  void nonFiniteInputFailsOnItsRankAndAbortsThePeers() {
    assertThatThrownBy(() -> LocalGroup.run(3, comm -> {
      float[] x = new float[10];
      x[4] = comm.rank() == 2 ? Float.NaN : 1f;
      new CompressedCommunicator(comm, Codecs.byName("none")).allReduce(x, 0, x.length);
      return null;
    })).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("non-finite")
        .satisfies(t -> assertThat(t.getSuppressed()).hasSize(2).allSatisfy(s -> assertThat(s)
            .isInstanceOf(CollectiveException.class).hasMessageContaining("compressed[none] allReduce(n=10)")
            .hasMessageContaining("rank 2 failed")));
  }

  @Test
  void badChunkAlignIsRejected() {
    try (LocalCommunicator c = LocalGroup.create(1).get(0)) {
      assertThatThrownBy(() -> new CompressedCommunicator(c, Codecs.byName("fp32"), 0))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("chunkAlign must be >= 1, got 0");
    }
  }
}
