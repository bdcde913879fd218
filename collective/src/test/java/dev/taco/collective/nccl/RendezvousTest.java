package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.taco.collective.CollectiveException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The TCP rendezvous on loopback with ranks as threads: the id, missing/bad peers, deaths after the rendezvous. */
class RendezvousTest {
  private static final Duration T = Duration.ofSeconds(2);
  private static final Duration FAST = Duration.ofSeconds(10);

  private final ExecutorService pool = Executors.newCachedThreadPool();
  private final List<Rendezvous> opened = new ArrayList<>();

  @AfterEach
  void tearDown() {
    opened.forEach(Rendezvous::close);
    pool.shutdownNow();
  }

  /** A port nothing listens on (bound and released: the OS does not hand it out again at once). */
  static int freePort() {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static LaunchEnv env(int rank, int worldSize, int port) {
    return new LaunchEnv(rank, worldSize, 0, "127.0.0.1", port);
  }

  private static byte[] randomId() {
    long seed = System.nanoTime();
    System.out.println("RendezvousTest id seed = " + seed);
    byte[] id = new byte[UniqueId.BYTES];
    new Random(seed).nextBytes(id);
    return id;
  }

  private CompletableFuture<Rendezvous> join(LaunchEnv env, byte[] id, Duration timeout, AtomicInteger made) {
    return CompletableFuture.supplyAsync(() -> {
      Rendezvous r = Rendezvous.join(env, () -> {
        made.incrementAndGet();
        return id;
      }, timeout);
      synchronized (opened) {
        opened.add(r);
      }
      return r;
    }, pool);
  }

  /** Joins ranks 0..n-1 and, unless {@code heard} is null, registers a listener per rank recording what it hears. */
  private List<Rendezvous> joinAll(int n, List<BlockingQueue<String>> heard) throws Exception {
    return joinAll(n, heard, T);
  }

  private List<Rendezvous> joinAll(int n, List<BlockingQueue<String>> heard, Duration timeout) throws Exception {
    int port = freePort();
    byte[] id = randomId();
    AtomicInteger made = new AtomicInteger();
    List<CompletableFuture<Rendezvous>> fs = new ArrayList<>();
    for (int r = n - 1; r >= 0; r--) fs.addFirst(join(env(r, n, port), id, timeout, made));
    List<Rendezvous> rs = new ArrayList<>();
    for (CompletableFuture<Rendezvous> f : fs) rs.add(f.get(5, TimeUnit.SECONDS));
    if (heard == null) return rs;
    for (Rendezvous r : rs) {
      BlockingQueue<String> q = new LinkedBlockingQueue<>();
      heard.add(q);
      r.onPeerFailure(q::add);
    }
    return rs;
  }

  private static Throwable failureOf(CompletableFuture<Rendezvous> f) {
    assertThatThrownBy(() -> f.get(5, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class);
    return f.handle((r, t) -> t.getCause() != null ? t.getCause() : t).join();
  }

  @Test
  void everyRankGetsRankZerosIdWhichIsMadeOnce() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      byte[] id = randomId();
      AtomicInteger made = new AtomicInteger();
      List<CompletableFuture<Rendezvous>> fs = new ArrayList<>();
      for (int r = 3; r >= 0; r--) fs.add(join(env(r, 4, port), id, T, made)); // peers first: they retry
      for (CompletableFuture<Rendezvous> f : fs) {
        Rendezvous r = f.get(5, TimeUnit.SECONDS);
        assertThat(r.id()).as("rank %d", r.env().rank()).isEqualTo(id);
        assertThat(r.peerFailure()).isNull();
      }
      assertThat(made).as("the id source runs on rank 0 only").hasValue(1);
    });
  }

  @Test
  void worldSizeOneNeedsNoSocket() {
    byte[] id = randomId();
    Rendezvous r = Rendezvous.join(env(0, 1, 1), () -> id, T);
    opened.add(r);
    assertThat(r.id()).isEqualTo(id);
  }

  @Test
  void aMissingPeerMakesRankZeroAndTheOthersFailNamingIt() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      byte[] id = randomId();
      AtomicInteger made = new AtomicInteger();
      Duration timeout = Duration.ofSeconds(1);
      long t0 = System.nanoTime();
      List<CompletableFuture<Rendezvous>> fs = new ArrayList<>();
      for (int r = 0; r < 3; r++) fs.add(join(env(r, 4, port), id, timeout, made)); // rank 3 never comes
      String expected = "rendezvous on 127.0.0.1:" + port + ": ranks [3] did not join within 1.0 s";
      for (CompletableFuture<Rendezvous> f : fs) {
        assertThat(failureOf(f)).isInstanceOf(CollectiveException.class).hasMessageStartingWith(expected);
      }
      assertThat(System.nanoTime() - t0).as("fails at the timeout, not later").isLessThan(3_000_000_000L);
      assertThat(made).as("no id is made for an incomplete group").hasValue(0);
    });
  }

  @Test
  void twoMissingPeersAreBothNamed() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      CompletableFuture<Rendezvous> host = join(env(0, 4, port), randomId(), Duration.ofMillis(500),
          new AtomicInteger());
      CompletableFuture<Rendezvous> peer = join(env(2, 4, port), randomId(), Duration.ofMillis(500),
          new AtomicInteger());
      assertThat(failureOf(host)).hasMessage("rendezvous on 127.0.0.1:" + port + ": ranks [1, 3] did not join within "
          + "0.5 s");
      assertThat(failureOf(peer)).hasMessageContaining("ranks [1, 3] did not join").hasMessageContaining("rank 2 of 4");
    });
  }

  @Test
  void aPeerThatCannotReachRankZeroFailsNamingTheEndpoint() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      long t0 = System.nanoTime();
      assertThatThrownBy(() -> Rendezvous.join(env(1, 2, port), () -> new byte[1], Duration.ofMillis(500)))
          .isInstanceOf(CollectiveException.class)
          .hasMessageStartingWith("rendezvous: could not connect to MASTER_ADDR:MASTER_PORT=127.0.0.1:" + port
              + " within 0.5 s (rank 1 of 2)");
      assertThat(System.nanoTime() - t0).isBetween(400_000_000L, 3_000_000_000L);
    });
  }

  @Test
  void aDuplicateRankFailsEveryoneAtOnce() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      byte[] id = randomId();
      Duration timeout = Duration.ofSeconds(8); // fail-fast: everyone must be done long before this
      long t0 = System.nanoTime();
      CompletableFuture<Rendezvous> host = join(env(0, 3, port), id, timeout, new AtomicInteger());
      CompletableFuture<Rendezvous> first = join(env(1, 3, port), id, timeout, new AtomicInteger());
      Thread.sleep(300);
      CompletableFuture<Rendezvous> second = join(env(1, 3, port), id, timeout, new AtomicInteger());
      for (CompletableFuture<Rendezvous> f : List.of(host, first, second)) {
        assertThat(failureOf(f)).isInstanceOf(CollectiveException.class)
            .hasMessageContaining("rendezvous on 127.0.0.1:" + port + ": duplicate rank 1");
      }
      assertThat(System.nanoTime() - t0).isLessThan(5_000_000_000L);
    });
  }

  @Test
  void aWrongWorldSizeFailsThePeerAndRankZero() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      Duration timeout = Duration.ofSeconds(8);
      long t0 = System.nanoTime();
      CompletableFuture<Rendezvous> host = join(env(0, 2, port), randomId(), timeout, new AtomicInteger());
      CompletableFuture<Rendezvous> peer = join(env(1, 3, port), randomId(), timeout, new AtomicInteger());
      String expected = "rendezvous on 127.0.0.1:" + port + ": rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2";
      assertThat(failureOf(host)).isInstanceOf(CollectiveException.class).hasMessage(expected);
      assertThat(failureOf(peer)).isInstanceOf(CollectiveException.class).hasMessageStartingWith(expected);
      assertThat(System.nanoTime() - t0).isLessThan(5_000_000_000L);
    });
  }

  @Test
  void aPeerThatDiesAfterTheRendezvousIsReportedToEveryOtherRankOnce() {
    assertTimeoutPreemptively(FAST, () -> {
      List<BlockingQueue<String>> heard = new ArrayList<>();
      List<Rendezvous> rs = joinAll(3, heard);
      rs.get(2).crash();
      for (int r : new int[] {0, 1}) {
        assertThat(heard.get(r).poll(2, TimeUnit.SECONDS)).as("rank %d hears", r)
            .startsWith("rendezvous: rank 2 died");
        assertThat(rs.get(r).peerFailure()).contains("rank 2 died");
      }
      Thread.sleep(200);
      assertThat(heard).as("each listener once; the dead rank hears nothing").allSatisfy(q -> assertThat(q).isEmpty());
    });
  }

  @Test
  void rankZerosDeathIsSeenByThePeers() {
    assertTimeoutPreemptively(FAST, () -> {
      List<BlockingQueue<String>> heard = new ArrayList<>();
      List<Rendezvous> rs = joinAll(3, heard);
      rs.get(0).crash();
      for (int r : new int[] {1, 2}) {
        assertThat(heard.get(r).poll(2, TimeUnit.SECONDS)).as("rank %d hears", r)
            .startsWith("rendezvous: rank 0 died");
      }
      assertThat(heard.get(0)).isEmpty();
    });
  }

  @Test
  void aListenerRegisteredAfterTheDeathIsCalledAtOnce() {
    assertTimeoutPreemptively(FAST, () -> {
      List<Rendezvous> rs = joinAll(2, null);
      rs.get(1).crash();
      while (rs.get(0).peerFailure() == null) Thread.sleep(5);
      List<String> late = new ArrayList<>();
      rs.get(0).onPeerFailure(late::add);
      assertThat(late).singleElement().asString().startsWith("rendezvous: rank 1 died");
    });
  }

  @Test
  void aCleanCloseReportsNothingEvenLongAfterTheRendezvousTimeout() {
    assertTimeoutPreemptively(FAST, () -> {
      List<BlockingQueue<String>> heard = new ArrayList<>();
      List<Rendezvous> rs = joinAll(4, heard, Duration.ofMillis(800));
      Thread.sleep(1200); // idle connections outlive the rendezvous timeout
      rs.get(2).close();
      rs.get(0).close(); // rank 0 leaves before ranks 1 and 3: still clean
      rs.get(1).close();
      Thread.sleep(300);
      rs.get(3).close();
      Thread.sleep(100);
      assertThat(heard).allSatisfy(q -> assertThat(q).isEmpty());
      assertThat(rs).allSatisfy(r -> assertThat(r.peerFailure()).isNull());
    });
  }

  @Test
  void aStrayConnectionIsIgnored() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      byte[] id = randomId();
      CompletableFuture<Rendezvous> host = join(env(0, 2, port), id, T, new AtomicInteger());
      Thread.sleep(200);
      try (java.net.Socket stray = new java.net.Socket("127.0.0.1", port)) {
        stray.getOutputStream().write("GET / HTTP/1.0\r\n\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
      }
      CompletableFuture<Rendezvous> peer = join(env(1, 2, port), id, T, new AtomicInteger());
      assertThat(host.get(5, TimeUnit.SECONDS).id()).isEqualTo(id);
      assertThat(peer.get(5, TimeUnit.SECONDS).id()).isEqualTo(id);
    });
  }

  /**
   * Connections that stay silent (a port scan, a health check), or send only the magic, while the real peer joins: rank
   * 0 reads hellos side by side, so both ranks join long before the 30 s timeout, and the silent sockets are closed.
   */
  @Test
  void silentConnectionsDoNotHoldUpThePeersBehindThem() {
    assertTimeoutPreemptively(FAST, () -> {
      int port = freePort();
      byte[] id = randomId();
      CompletableFuture<Rendezvous> host = join(env(0, 2, port), id, Duration.ofSeconds(30), new AtomicInteger());
      Thread.sleep(200);
      try (java.net.Socket silent = new java.net.Socket("127.0.0.1", port);
          java.net.Socket magicOnly = new java.net.Socket("127.0.0.1", port)) {
        new java.io.DataOutputStream(magicOnly.getOutputStream()).writeInt(Rendezvous.MAGIC);
        Thread.sleep(200);
        CompletableFuture<Rendezvous> peer = join(env(1, 2, port), id, Duration.ofSeconds(30), new AtomicInteger());
        assertThat(host.get(5, TimeUnit.SECONDS).id()).isEqualTo(id);
        assertThat(peer.get(5, TimeUnit.SECONDS).id()).isEqualTo(id);
        silent.setSoTimeout(5000);
        assertThat(silent.getInputStream().read()).as("rank 0 closed the silent connection").isEqualTo(-1);
      }
    });
  }
}
