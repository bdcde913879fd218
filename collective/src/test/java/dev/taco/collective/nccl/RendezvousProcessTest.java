package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.time.Duration;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The one-process-per-GPU launch's failure detection with real processes (torchrun's variables, as
 * {@link NcclCommunicator#fromEnvironment} uses them): a peer process killed with SIGKILL (no shutdown hook, no
 * goodbye; the case of NVIDIA/nccl#585, where the survivors would otherwise wait in a collective forever) is reported
 * to this process's rank within seconds, naming the dead rank, whether it was rank 0 or a peer. On a GPU machine the
 * listener is the NCCL watchdog, which then aborts the communicator.
 */
class RendezvousProcessTest {
  private static final Duration FAST = Duration.ofSeconds(30);

  /** A rank in a process of its own: joins from its environment, says so, then waits to be killed. */
  public static final class Child {
    public static void main(String[] args) throws Exception {
      LaunchEnv env = LaunchEnv.parse(System.getenv());
      Rendezvous rv = Rendezvous.join(env, () -> new byte[UniqueId.BYTES], Duration.ofSeconds(20));
      System.out.println("JOINED rank " + env.rank() + " id byte " + rv.id()[0]);
      System.out.flush();
      Thread.sleep(60_000); // killed long before
    }
  }

  @Test
  void aPeerProcessKilledWithSigkillIsReportedNamingIt() {
    assertTimeoutPreemptively(FAST, () -> killed(1));
  }

  @Test
  void rankZerosProcessKilledWithSigkillIsReportedNamingIt() {
    assertTimeoutPreemptively(FAST, () -> killed(0));
  }

  /** Rank {@code dead} of 2 runs in a child process, the other rank here; the child is killed after the rendezvous. */
  private static void killed(int dead) throws Exception {
    int port = RendezvousTest.freePort();
    byte[] id = new byte[UniqueId.BYTES];
    new Random().nextBytes(id);
    id[0] = 42;
    try (
        ChildJvm child = new ChildJvm(Child.class, Map.of("RANK", String.valueOf(dead), "WORLD_SIZE", "2", "LOCAL_RANK",
            "0", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", String.valueOf(port)))) {
      int live = 1 - dead;
      CompletableFuture<Rendezvous> here = CompletableFuture.supplyAsync(
          () -> Rendezvous.join(new LaunchEnv(live, 2, 0, "127.0.0.1", port), () -> id, Duration.ofSeconds(20)));
      String line = child.await("JOINED", 20);
      assertThat(line).as("the child's report:%n%s", child.output()).startsWith("JOINED rank " + dead);
      if (dead == 1) assertThat(line).as("the child got rank 0's id").endsWith("id byte 42");
      try (Rendezvous rv = here.get(20, TimeUnit.SECONDS)) {
        BlockingQueue<String> heard = new LinkedBlockingQueue<>();
        rv.onPeerFailure(heard::add);
        assertThat(heard.poll(500, TimeUnit.MILLISECONDS)).as("nothing before the kill").isNull();
        long t0 = System.nanoTime();
        child.process.destroyForcibly(); // SIGKILL on Linux
        String msg = heard.poll(10, TimeUnit.SECONDS);
        assertThat(msg).as("rank %d hears of rank %d's death", live, dead).isNotNull()
            .startsWith("rendezvous: rank " + dead + " died");
        assertThat((System.nanoTime() - t0) / 1e9).as("seconds until it was heard").isLessThan(10);
        assertThat(rv.peerFailure()).contains("rank " + dead + " died");
      }
    }
  }
}
