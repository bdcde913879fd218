package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Failure handling of the local transport: a failed rank, a timeout, a closed rank never make a peer hang. */
class LocalGroupTest {

  /** Long enough that only an abort, never the timeout, can end these tests within {@link #FAST}. */
  private static final Duration LONG = Duration.ofSeconds(60);
  private static final Duration FAST = Duration.ofSeconds(5);

  @Test
  void runReturnsResultsInRankOrder() {
    assertThat(LocalGroup.run(4, comm -> {
      comm.barrier();
      return comm.rank() * 10 + comm.worldSize();
    })).containsExactly(4, 14, 24, 34);
  }

  @Test
  void aRankThatThrowsBeforeACollectiveMakesThePeersFailFast() {
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> LocalGroup.run(3, LONG, comm -> {
      if (comm.rank() == 1) {
        throw new IllegalStateException("boom");
      }
      comm.allReduce(new float[10], 0, 10);
      return null;
    })).isInstanceOf(IllegalStateException.class).hasMessage("boom")
        .satisfies(t -> assertThat(t.getSuppressed()).hasSize(2).allSatisfy(s -> assertThat(s)
            .isInstanceOf(CollectiveException.class)
            .hasMessageContaining("allReduce(n=10)")
            .hasMessageContaining("rank 1 failed: java.lang.IllegalStateException: boom"))));
  }

  @Test
  void aRankThatThrowsMidSequenceAbortsPeersBlockedInABarrier() {
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> LocalGroup.run(4, LONG, comm -> {
      for (int i = 0; i < 20; i++) {
        if (comm.rank() == 3 && i == 5) {
          throw new ArithmeticException("step 5");
        }
        comm.barrier();
      }
      return null;
    })).isInstanceOf(ArithmeticException.class)
        .satisfies(t -> assertThat(t.getSuppressed()).hasSize(3).allSatisfy(s -> assertThat(s)
            .isInstanceOf(CollectiveException.class)
            .hasMessageContaining("barrier on rank")
            .hasMessageContaining("rank 3 failed"))));
  }

  @Test
  void aCheckedExceptionIsWrappedNamingTheRank() {
    assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
      if (comm.rank() == 0) {
        throw new IOException("disk");
      }
      return null;
    })).isInstanceOf(CollectiveException.class).hasMessageContaining("rank 0 failed")
        .hasCauseInstanceOf(IOException.class);
  }

  @Test
  void aRankThatReturnsEarlyClosesAndReleasesThePeers() {
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> LocalGroup.run(2, LONG, comm -> {
      if (comm.rank() == 0) {
        comm.barrier();
      }
      return null;
    })).isInstanceOf(CollectiveException.class).hasMessageContaining("barrier on rank 0")
        .hasMessageContaining("rank 1"));
  }

  @Test
  void aCollectiveTimesOutNamingTheMissingRanksAndAbortsTheGroup() {
    List<LocalCommunicator> comms = LocalGroup.create(3, Duration.ofMillis(100));
    assertTimeoutPreemptively(FAST, () -> {
      assertThatThrownBy(() -> comms.get(0).allGather(new float[2], 0, 2, new float[6], 0))
          .isInstanceOf(CollectiveException.class)
          .hasMessageContaining("allGather(n=2) on rank 0")
          .hasMessageContaining("timed out after 0.1 s")
          .hasMessageContaining("waiting for ranks [1, 2]");
      assertThatThrownBy(() -> comms.get(1).barrier())
          .isInstanceOf(CollectiveException.class)
          .hasMessageContaining("barrier on rank 1 aborted: rank 0 timed out");
    });
  }

  @Test
  void aClosedCommunicatorRefusesCollectives() {
    LocalCommunicator c = LocalGroup.create(1).get(0);
    c.barrier();
    c.close();
    c.close();
    assertThatThrownBy(c::barrier).isInstanceOf(CollectiveException.class).hasMessageContaining("closed");
  }

  @Test
  void aClosedCommunicatorRefusesEveryCollectiveEvenAtWorldSizeOne() {
    LocalCommunicator c = LocalGroup.create(1).get(0);
    c.close();
    float[] buf = {1f, 2f};
    assertThatThrownBy(() -> c.allReduce(buf, 0, 2)).isInstanceOf(CollectiveException.class)
        .hasMessageContaining("allReduce(n=2) on rank 0: the communicator is closed");
    assertThatThrownBy(() -> c.allGather(buf, 0, 1, new float[1], 0)).hasMessageContaining("closed");
    assertThatThrownBy(() -> c.reduceScatter(buf, 0, 1, new float[1], 0)).hasMessageContaining("closed");
    assertThatThrownBy(() -> c.allToAll(buf, 0, 1, new float[1], 0)).hasMessageContaining("closed");
    assertThatThrownBy(() -> c.allToAllBytes(new byte[1][0])).hasMessageContaining("closed");
    assertThat(buf).containsExactly(1f, 2f);
  }

  /** A barrier, a payload exchange and a control exchange met at once are a mismatch every rank reports. */
  @Test
  void ranksCallingDifferentCollectivesAtOnceFailNamingBoth() {
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> LocalGroup.run(2, LONG, comm -> {
      if (comm.rank() == 0) {
        comm.allToAllBytes(new byte[][] {{1}, {2}});
      } else {
        comm.barrier();
      }
      return null;
    })).isInstanceOf(CollectiveException.class)
        .hasMessageContaining("the ranks called different collectives at once")
        .hasMessageContaining("allToAllBytes").hasMessageContaining("barrier")
        .satisfies(t -> assertThat(t.getSuppressed()).singleElement()
            .satisfies(e -> assertThat(e).hasMessageContaining("different collectives"))));
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> LocalGroup.run(2, LONG, comm -> {
      float[] x = {1f, 2f, 3f, 4f};
      if (comm.rank() == 0) {
        comm.allReduce(x, 0, 4);
      } else {
        comm.barrier();
      }
      return null;
    })).isInstanceOf(CollectiveException.class).hasMessageContaining("different collectives")
        .hasMessageContaining("allToAllControl"));
  }

  @Test
  void allToAllWithDifferentCountsFailsOnEveryRankWithRecvUnchanged() {
    float[][] recv = {new float[4], new float[6]};
    java.util.Arrays.fill(recv[0], -7f);
    java.util.Arrays.fill(recv[1], -7f);
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> LocalGroup.run(2, LONG, comm -> {
      int n = comm.rank() + 2;
      float[] send = new float[2 * n];
      java.util.Arrays.fill(send, 1f);
      comm.allToAll(send, 0, n, recv[comm.rank()], 0);
      return null;
    })).isInstanceOf(CollectiveException.class).hasMessageContaining("every rank must call allToAll with the same n")
        .hasMessageContaining("recv is unchanged"));
    assertThat(recv[0]).containsOnly(-7f);
    assertThat(recv[1]).containsOnly(-7f);
  }

  @Test
  void timeoutsBeyondAHundredYearsAndNullTasksAreRefusedByName() {
    assertThatThrownBy(() -> LocalGroup.create(2, Duration.ofSeconds(Long.MAX_VALUE)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at most 36500 days");
    assertThat(LocalGroup.create(2, LocalGroup.MAX_TIMEOUT)).hasSize(2);
    assertThatThrownBy(() -> LocalGroup.run(2, null)).isInstanceOf(NullPointerException.class)
        .hasMessage("task");
  }

  @Test
  void abortWakesWaitingPeersWithTheCause() {
    assertTimeoutPreemptively(FAST, () -> assertThatThrownBy(() -> LocalGroup.run(3, LONG, comm -> {
      if (comm.rank() == 2) {
        ((LocalCommunicator) comm).abort(new RuntimeException("operator stop"));
        return null;
      }
      comm.barrier();
      return null;
    })).isInstanceOf(CollectiveException.class).hasMessageContaining("rank 2 aborted the group")
        .hasMessageContaining("operator stop"));
  }

  @Test
  void aRankStuckOutsideAnyCollectiveDoesNotHoldTheCallerPastTheTimeout() {
    long t0 = System.nanoTime();
    assertThatThrownBy(() -> LocalGroup.run(2, Duration.ofMillis(500), comm -> {
      if (comm.rank() == 1) {
        Thread.sleep(30_000); // stuck: never enters the collective
      }
      comm.barrier();
      return null;
    })).hasMessageContaining("timed out after 0.5 s")
        .satisfies(e -> assertThat(e.getSuppressed())
            .anySatisfy(s -> assertThat(s).hasMessageContaining("rank 1 did not finish within 0.5 s")));
    assertThat((System.nanoTime() - t0) / 1e9).isLessThan(5);
  }
}
