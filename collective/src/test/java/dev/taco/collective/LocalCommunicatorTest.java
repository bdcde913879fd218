package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import dev.taco.collective.Harness.Op;
import dev.taco.collective.Harness.Results;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** The exact local transport: float32 collectives against a float64 oracle, bytes on the wire, argument checks. */
class LocalCommunicatorTest {

  @ParameterizedTest(name = "R={0}")
  @ValueSource(ints = {1, 2, 3, 4})
  void exactCollectivesMatchFloat64SumsAndAreBitIdenticalAcrossRanks(int world) {
    long seed = 42;
    Results res = Harness.runAll(world, seed, Function.identity());
    for (int s = 0; s < Harness.SIZES.length; s++) {
      int n = Harness.SIZES[s];
      for (Op op : Op.values()) {
        float[][] in = Harness.inputs(op, world, n, seed);
        for (int r = 0; r < world; r++) {
          float[] got = res.out()[s][op.ordinal()][r];
          double[][] want = Harness.oracle(op, in, r, n);
          String where = op + " R=" + world + " n=" + n + " rank " + r;
          assertThat(got).as(where).hasSize(want[0].length);
          for (int j = 0; j < got.length; j++) {
            // float32 sum of R terms in rank order: error <= (R-1) * 2^-24 * sum|x|
            double tol = world * 0x1p-24 * want[1][j];
            assertThat((double) got[j]).as(where + " element " + j).isCloseTo(want[0][j], offset(tol));
            assertThat(got[j])
                .as(where + " element " + j + " = the owner's float32 sum: peers in rank order, then its own")
                .isEqualTo((float) want[2][j]);
          }
          if (op.replicated()) {
            assertThat(got).as(where + " bits equal rank 0").isEqualTo(res.out()[s][op.ordinal()][0]);
          }
          long expectBytes = Harness.wireBytes(op, world, n, rows -> rows * Float.BYTES);
          assertThat(res.bytes()[s][op.ordinal()][r]).as(where + " bytes").isEqualTo(expectBytes);
        }
      }
    }
  }

  @Test
  void allReduceBytesFollowTheTwoShotFormulaWhenRDividesN() {
    int world = 4;
    int n = 1000;
    List<Long> bytes = LocalGroup.run(world, comm -> {
      comm.allReduce(new float[n], 0, n);
      return comm.bytesSent();
    });
    // (R-1)/R * n float32 values in each of the two phases
    assertThat(bytes).containsOnly(2L * (world - 1) * (n / world) * Float.BYTES);
  }

  @Test
  void allToAllBytesCopiesEveryPayloadAcrossRanks() {
    int world = 3;
    List<byte[][][]> seen = LocalGroup.run(world, comm -> {
      byte[][] send = new byte[world][];
      for (int p = 0; p < world; p++) {
        send[p] = new byte[] {(byte) comm.rank(), (byte) p, 9};
      }
      byte[][] recv = comm.allToAllBytes(send);
      byte[][] snapshot = new byte[world][];
      for (int q = 0; q < world; q++) {
        snapshot[q] = recv[q].clone();
      }
      comm.barrier(); // every rank has its copies before anyone scribbles on its own arrays
      for (byte[] b : send) {
        b[2] = -1;
      }
      comm.barrier();
      return new byte[][][] {send, recv, snapshot};
    });
    for (int r = 0; r < world; r++) {
      byte[][] send = seen.get(r)[0];
      byte[][] recv = seen.get(r)[1];
      for (int q = 0; q < world; q++) {
        assertThat(seen.get(r)[2][q]).containsExactly((byte) q, (byte) r, (byte) 9);
        if (q == r) {
          assertThat(recv[q]).isSameAs(send[r]);
        } else {
          assertThat(recv[q]).as("rank %d from %d", r, q).containsExactly((byte) q, (byte) r, (byte) 9);
          assertThat(recv[q]).isNotSameAs(seen.get(q)[0][r]);
        }
      }
    }
    byte[][] ragged = {new byte[5], new byte[0], new byte[7]};
    assertThat(LocalGroup.run(world, comm -> comm.allToAllBytes(ragged)[0].length)).containsExactly(5, 0, 7);
  }

  @Test
  void badArgumentsAreRejectedWithClearMessages() {
    try (LocalCommunicator c = LocalGroup.create(2).get(0)) {
      float[] a = new float[10];
      assertThatThrownBy(() -> c.allReduce(a, 0, -1)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("allReduce").hasMessageContaining("n must be >= 0, got -1");
      assertThatThrownBy(() -> c.allReduce(a, 4, 7)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("buf too short").hasMessageContaining("length 10");
      assertThatThrownBy(() -> c.allReduce(a, -1, 2)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("offset -1");
      assertThatThrownBy(() -> c.allReduce(null, 0, 2)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("buf is null");
      assertThatThrownBy(() -> c.allGather(a, 0, 6, new float[11], 0)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("allGather").hasMessageContaining("recv too short: needs 12");
      assertThatThrownBy(() -> c.reduceScatter(a, 0, 6, new float[6], 0)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("reduceScatter").hasMessageContaining("send too short: needs 12");
      assertThatThrownBy(() -> c.allToAll(a, 0, 5, null, 0)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("allToAll").hasMessageContaining("recv is null");
      assertThatThrownBy(() -> c.allToAllBytes(new byte[3][1])).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("3 payloads, needs worldSize = 2");
      assertThatThrownBy(() -> c.allToAllBytes(new byte[][] {new byte[1], null}))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("send[1] is null");
      assertThatThrownBy(() -> c.allToAllBytes(null)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("send is null");
      assertThat(c.bytesSent()).isZero();
    }
    assertThatThrownBy(() -> LocalGroup.create(0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("worldSize must be >= 1, got 0");
    assertThatThrownBy(() -> LocalGroup.create(2, java.time.Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("timeout must be positive");
  }

  @Test
  void zeroLengthCollectivesAreNoOpsWithoutCommunication() {
    // one rank alone: a collective that communicated would time out waiting for rank 1
    try (LocalCommunicator c = LocalGroup.create(2, java.time.Duration.ofMillis(1)).get(0)) {
      float[] a = {1f};
      c.allReduce(a, 1, 0);
      c.allGather(a, 0, 0, a, 1);
      c.reduceScatter(a, 1, 0, a, 0);
      c.allToAll(a, 0, 0, a, 0);
      assertThat(a).containsExactly(1f);
      assertThat(c.bytesSent()).isZero();
    }
  }
}
