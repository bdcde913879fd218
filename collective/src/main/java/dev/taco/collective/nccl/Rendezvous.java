package dev.taco.collective.nccl;

import dev.taco.collective.CollectiveException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hands rank 0's NCCL unique id to every rank over TCP (plain {@code java.net} sockets), then keeps the connections
 * open as a liveness channel.
 *
 * <p>Rank 0 listens on {@code MASTER_ADDR:MASTER_PORT} (loopback unless {@code MASTER_ADDR} names another address);
 * every other rank connects, retrying until the timeout, and says hello (its rank and world size). Rank 0 checks the
 * hellos (a duplicate rank, a different world size: a clear error to that peer, to the peers already joined, and
 * from rank 0's own {@link #join}) and sends the id to all only once all {@code WORLD_SIZE - 1} peers have joined, so
 * a missing peer makes everyone fail here, naming it ({@code rendezvous on 127.0.0.1:29500: ranks [2, 3] did not join
 * within 60.0 s}), instead of hanging in NCCL's init. A peer that cannot reach rank 0 fails with
 * {@code rendezvous: could not connect to MASTER_ADDR:MASTER_PORT=127.0.0.1:29500 within 60.0 s ...}. At world size
 * 1 there is no socket.
 *
 * <p>Afterwards, a connection that closes without a goodbye message means its process died: rank 0 tells every other
 * rank, and each rank's listener ({@link #onPeerFailure}, e.g. the communicator's watchdog) is called once with a
 * message naming the dead rank; the peers see rank 0's death directly. {@link #close()} says goodbye, so a clean
 * shutdown is not reported. A hung (not dead) process is the watchdog's business, not this channel's.
 *
 * <p>Wire format (big-endian, {@link DataOutputStream}): hello = int magic {@code 'TACO'}, int protocol (1), int
 * rank, int world size; then from rank 0 one of: byte 1 (id) + int length + bytes, byte 2 (error) + UTF message;
 * later byte 3 (dead) + int rank + UTF message (rank 0 to peers), byte 4 (goodbye, either way).
 */
public final class Rendezvous implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Rendezvous.class);

  static final int MAGIC = 0x5441434F;
  static final int PROTOCOL = 1;
  /** Largest id this protocol carries, bytes. */
  static final int MAX_ID_BYTES = 4096;
  private static final byte ID = 1;
  private static final byte ERROR = 2;
  private static final byte DEAD = 3;
  private static final byte BYE = 4;
  private static final long RETRY_NANOS = 50_000_000;
  private static final long CONNECT_ATTEMPT_NANOS = 1_000_000_000;
  private static final Duration MAX_GRACE = Duration.ofSeconds(10);
  private static final int MAX_MESSAGE_CHARS = 8_000;

  private final LaunchEnv env;
  private final byte[] id;
  private final List<Link> links;
  private final Object lock = new Object();
  private boolean closed;
  private String peerFailure;
  private Consumer<String> listener;
  private boolean delivered;

  private Rendezvous(LaunchEnv env, byte[] id, List<Link> links) {
    this.env = env;
    this.id = id;
    this.links = links;
  }

  /**
   * Joins the rendezvous: blocks until this rank has the id or the rendezvous failed.
   *
   * @param env      this rank's launch
   * @param idSource makes the id; called once, on rank 0 only, after every peer has joined (e.g.
   *                 {@code () -> Nccl.get().uniqueId().bytes()}); 1 to {@value #MAX_ID_BYTES} bytes
   * @param timeout  how long rank 0 waits for the peers and a peer tries to connect, &gt; 0 (a peer then waits for
   *                 the id up to {@code min(timeout, 10 s)} longer, to hear rank 0's verdict)
   * @return the joined rendezvous, listening for deaths
   * @throws CollectiveException      naming the missing ranks, the unreachable endpoint, the duplicate rank or the
   *                                  mismatched world size
   * @throws IllegalArgumentException if the id has a bad length or the timeout is not positive or over {@link dev.taco.collective.LocalGroup#MAX_TIMEOUT}
   */
  public static Rendezvous join(LaunchEnv env, Supplier<byte[]> idSource, Duration timeout) {
    Objects.requireNonNull(env, "env");
    Objects.requireNonNull(idSource, "idSource");
    Time.positive(timeout, "timeout");
    Rendezvous r;
    if (env.worldSize() == 1) r = new Rendezvous(env, checkedId(idSource.get()), List.of());
    else if (env.rank() == 0) r = host(env, idSource, timeout);
    else r = connect(env, timeout);
    r.listen();
    return r;
  }

  /** @return a copy of the id rank 0 sent (or made, on rank 0) */
  public byte[] id() {
    return id.clone();
  }

  /** @return this rank's launch */
  public LaunchEnv env() {
    return env;
  }

  /** @return the first death seen, e.g. {@code "rendezvous: rank 2 died (...)"}, or null */
  public String peerFailure() {
    synchronized (lock) {
      return peerFailure;
    }
  }

  /**
   * Registers the listener for the first death (replacing an earlier one); it is called once, on a rendezvous
   * thread, or at once on this thread if a death was seen before any listener was registered.
   *
   * @param l receives a message naming the dead rank
   */
  public void onPeerFailure(Consumer<String> l) {
    Objects.requireNonNull(l, "listener");
    String now;
    synchronized (lock) {
      listener = l;
      now = peerFailure != null && !delivered ? peerFailure : null;
      if (now != null) delivered = true;
    }
    if (now != null) l.accept(now);
  }

  /** Says goodbye on every connection and closes them; idempotent. */
  @Override
  public void close() {
    synchronized (lock) {
      if (closed) return;
      closed = true;
    }
    for (Link l : links) {
      l.bye();
      l.close();
    }
  }

  /** Test hook: closes every connection without a goodbye, as if this process had died. */
  void crash() {
    synchronized (lock) {
      closed = true;
    }
    for (Link l : links) l.close();
  }

  // ------------------------------------------------------------------ rank 0

  private static Rendezvous host(LaunchEnv env, Supplier<byte[]> idSource, Duration timeout) {
    String where = "rendezvous on " + env.endpoint();
    long deadline = System.nanoTime() + timeout.toNanos();
    Link[] peers = new Link[env.worldSize()];
    // each connection's hello is read on a thread of its own: a stray connection that sends nothing (a port scan, a
    // health check) must not hold up the peers behind it until the deadline
    BlockingQueue<Link> hellos = new LinkedBlockingQueue<>();
    Set<Socket> reading = ConcurrentHashMap.newKeySet(); // accepted, hello not read yet
    try (ServerSocket server = new ServerSocket()) {
      bind(server, env);
      Thread.ofVirtual().name("taco-rendezvous-accept").start(() -> accept(server, deadline, where, reading, hellos));
      int joined = 0;
      try {
        while (joined < env.worldSize() - 1) {
          long left = deadline - System.nanoTime();
          Link link = left <= 0 ? null : hellos.poll(left, TimeUnit.NANOSECONDS);
          if (link == null) break;
          String problem = problem(link, peers, env, where);
          if (problem != null) {
            link.error(problem);
            link.close();
            throw abandon(peers, problem, null);
          }
          peers[link.rank] = link;
          joined++;
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw abandon(peers, where + ": rank 0 was interrupted while waiting for the peers", e);
      } finally {
        server.close(); // no more peers: connections still saying hello, and hellos not taken, are dropped
        synchronized (hellos) {
          for (Socket s : reading) closeQuietly(s);
          reading.clear();
          for (Link l = hellos.poll(); l != null; l = hellos.poll()) l.close();
        }
      }
      List<Integer> missing = new ArrayList<>();
      for (int r = 1; r < peers.length; r++) if (peers[r] == null) missing.add(r);
      if (!missing.isEmpty()) {
        throw abandon(peers, where + ": ranks " + missing + " did not join within " + Time.seconds(timeout), null);
      }
      byte[] id;
      try {
        id = checkedId(idSource.get());
      } catch (RuntimeException e) {
        throw abandon(peers, where + ": rank 0 could not make the unique id: " + e.getMessage(), e);
      }
      List<Link> links = new ArrayList<>();
      for (int r = 1; r < peers.length; r++) {
        peers[r].sendId(id);
        peers[r].socket.setSoTimeout(0); // from now on a read waits for a goodbye or a death, however long
        links.add(peers[r]);
      }
      LOG.info("{}: {} ranks joined", where, env.worldSize());
      return new Rendezvous(env, id, List.copyOf(links));
    } catch (IOException e) {
      throw abandon(peers, where + ": " + describe(e), e);
    }
  }

  private static void bind(ServerSocket server, LaunchEnv env) {
    try {
      server.setReuseAddress(true);
      server.bind(new InetSocketAddress(InetAddress.getByName(env.masterAddr()), env.masterPort()), env.worldSize());
    } catch (IOException e) {
      throw new CollectiveException("rendezvous: rank 0 could not listen on MASTER_ADDR:MASTER_PORT="
          + env.endpoint() + ": " + e.getMessage(), e);
    }
  }

  /**
   * Accepts connections until the server socket closes, reading each one's hello on a virtual thread of its own into
   * {@code hellos} (stray connections are dropped there).
   */
  private static void accept(ServerSocket server, long deadline, String where, Set<Socket> reading,
      BlockingQueue<Link> hellos) {
    while (!server.isClosed()) {
      Socket s;
      try {
        s = server.accept();
      } catch (IOException e) {
        return; // closed: rank 0 has all its peers, or gave up
      }
      synchronized (hellos) { // a connection accepted as rank 0 gives up is closed, here or by its clean-up
        if (server.isClosed()) {
          closeQuietly(s);
          return;
        }
        reading.add(s);
      }
      Thread.ofVirtual().name("taco-rendezvous-hello").start(() -> {
        Link link = hello(s, deadline, where);
        synchronized (hellos) { // against rank 0's clean-up, which closes what is still in either set
          boolean wanted = reading.remove(s); // false once rank 0 has stopped taking peers
          if (link != null && wanted) {
            hellos.add(link);
          } else if (link != null) {
            link.close();
          }
        }
      });
    }
  }

  /** Reads a peer's hello; null (connection dropped) for a stray connection that is not a TACO peer. */
  private static Link hello(Socket s, long deadline, String where) {
    try {
      s.setSoTimeout(Time.socketMillis(deadline - System.nanoTime()));
      DataInputStream in = new DataInputStream(new BufferedInputStream(s.getInputStream()));
      int magic = in.readInt();
      if (magic != MAGIC) throw new IOException(String.format("bad magic 0x%08x", magic));
      int protocol = in.readInt();
      int rank = in.readInt();
      int worldSize = in.readInt();
      return new Link(s, in, rank, worldSize, protocol);
    } catch (IOException e) {
      LOG.warn("{}: dropped a connection from {} that sent no TACO hello: {}", where, s.getRemoteSocketAddress(),
          describe(e));
      closeQuietly(s);
      return null;
    }
  }

  private static String problem(Link link, Link[] peers, LaunchEnv env, String where) {
    if (link.protocol != PROTOCOL) {
      return where + ": rank " + link.rank + " speaks rendezvous protocol " + link.protocol + ", rank 0 speaks "
          + PROTOCOL;
    }
    if (link.worldSize != env.worldSize()) {
      return where + ": rank " + link.rank + " has WORLD_SIZE=" + link.worldSize + " but rank 0 has WORLD_SIZE="
          + env.worldSize();
    }
    if (link.rank == 0) return where + ": duplicate rank 0 (RANK=0 hosts the rendezvous)";
    if (link.rank < 0 || link.rank >= env.worldSize()) {
      return where + ": a peer has RANK=" + link.rank + ", outside [1, WORLD_SIZE=" + env.worldSize() + ")";
    }
    if (peers[link.rank] != null)
      return where + ": duplicate rank " + link.rank + " (two processes have RANK="
          + link.rank + ")";
    return null;
  }

  /** Tells every joined peer why the rendezvous failed, closes them, and makes rank 0's exception. */
  private static CollectiveException abandon(Link[] peers, String message, Throwable cause) {
    LOG.error(message);
    for (Link p : peers) {
      if (p != null) {
        p.error(message);
        p.close();
      }
    }
    return new CollectiveException(message, cause);
  }

  // ------------------------------------------------------------------ ranks 1..n-1

  private static Rendezvous connect(LaunchEnv env, Duration timeout) {
    String who = "rank " + env.rank() + " of " + env.worldSize();
    long start = System.nanoTime();
    long deadline = start + timeout.toNanos();
    Socket s = null;
    IOException last = null;
    while (s == null) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        throw new CollectiveException("rendezvous: could not connect to MASTER_ADDR:MASTER_PORT=" + env.endpoint()
            + " within " + Time.seconds(timeout) + " (" + who + "): " + describe(last), last);
      }
      Socket c = new Socket();
      try {
        c.connect(new InetSocketAddress(env.masterAddr(), env.masterPort()),
            Time.socketMillis(Math.min(left, CONNECT_ATTEMPT_NANOS)));
        s = c;
      } catch (IOException e) {
        last = e;
        closeQuietly(c);
        LockSupport.parkNanos(Math.min(RETRY_NANOS, Math.max(0, deadline - System.nanoTime())));
      }
    }
    String where = "rendezvous on " + env.endpoint();
    try {
      Link link = new Link(s, new DataInputStream(new BufferedInputStream(s.getInputStream())), 0, env.worldSize(),
          PROTOCOL);
      link.out.writeInt(MAGIC);
      link.out.writeInt(PROTOCOL);
      link.out.writeInt(env.rank());
      link.out.writeInt(env.worldSize());
      link.out.flush();
      Duration grace = timeout.compareTo(MAX_GRACE) < 0 ? timeout : MAX_GRACE;
      s.setSoTimeout(Time.socketMillis(deadline - System.nanoTime() + grace.toNanos()));
      byte type = link.in.readByte();
      if (type == ERROR) throw new CollectiveException(link.in.readUTF() + " (reported by rank 0 to " + who + ")");
      if (type != ID) throw new IOException("unexpected message type " + type);
      int n = link.in.readInt();
      if (n < 1 || n > MAX_ID_BYTES) throw new IOException("bad id length " + n);
      byte[] id = new byte[n];
      link.in.readFully(id);
      s.setSoTimeout(0);
      return new Rendezvous(env, id, List.of(link));
    } catch (SocketTimeoutException e) {
      closeQuietly(s);
      throw new CollectiveException(where + ": rank 0 did not send the unique id within "
          + Time.seconds(Duration.ofNanos(System.nanoTime() - start)) + " (" + who + ")", e);
    } catch (IOException e) {
      closeQuietly(s);
      throw new CollectiveException(where + ": lost the connection to rank 0 before the unique id (" + who + "): "
          + describe(e), e);
    } catch (CollectiveException e) {
      closeQuietly(s);
      throw e;
    }
  }

  // ------------------------------------------------------------------ liveness

  private void listen() {
    for (Link l : links) {
      Thread.ofPlatform().daemon().name("taco-rendezvous rank " + env.rank() + " <- " + l.rank).start(() -> watch(l));
    }
  }

  private void watch(Link link) {
    try {
      while (true) {
        byte type = link.in.readByte();
        if (type == BYE) {
          link.done = true;
          link.close();
          return;
        }
        if (type != DEAD || env.rank() == 0) throw new IOException("unexpected message type " + type);
        link.in.readInt();
        report(link.in.readUTF());
      }
    } catch (IOException e) {
      if (link.done || isClosed()) return;
      link.done = true;
      link.close();
      String message = env.rank() == 0
          ? "rendezvous: rank " + link.rank + " died (its connection to rank 0 closed without goodbye: "
              + describe(e) + ")"
          : "rendezvous: rank 0 died (the connection to " + env.endpoint() + " closed without goodbye: "
              + describe(e) + ")";
      if (env.rank() == 0) {
        for (Link other : links) if (other != link && !other.done) other.dead(link.rank, message);
      }
      report(message);
    }
  }

  private void report(String message) {
    Consumer<String> l;
    synchronized (lock) {
      if (closed || peerFailure != null) return;
      peerFailure = message;
      l = listener;
      if (l != null) delivered = true;
    }
    LOG.error("rank {}: {}", env.rank(), message);
    if (l != null) l.accept(message);
  }

  private boolean isClosed() {
    synchronized (lock) {
      return closed;
    }
  }

  private static byte[] checkedId(byte[] id) {
    Objects.requireNonNull(id, "unique id");
    if (id.length < 1 || id.length > MAX_ID_BYTES) {
      throw new IllegalArgumentException("unique id must be 1.." + MAX_ID_BYTES + " bytes, got " + id.length);
    }
    return id.clone();
  }

  private static String describe(Throwable e) {
    if (e == null) return "no attempt";
    if (e instanceof EOFException) return "end of stream";
    return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // closing anyway
    }
  }

  /** One connection: rank 0 to a peer, or a peer to rank 0. Writes are serialised. */
  private static final class Link {
    final Socket socket;
    final DataInputStream in;
    final DataOutputStream out;
    final int rank;
    final int worldSize;
    final int protocol;
    volatile boolean done;

    Link(Socket socket, DataInputStream in, int rank, int worldSize, int protocol) throws IOException {
      this.socket = socket;
      socket.setTcpNoDelay(true);
      socket.setKeepAlive(true);
      this.in = in;
      this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
      this.rank = rank;
      this.worldSize = worldSize;
      this.protocol = protocol;
    }

    synchronized void sendId(byte[] id) throws IOException {
      out.writeByte(ID);
      out.writeInt(id.length);
      out.write(id);
      out.flush();
    }

    synchronized void error(String message) {
      send(ERROR, -1, message);
    }

    synchronized void dead(int deadRank, String message) {
      send(DEAD, deadRank, message);
    }

    synchronized void bye() {
      if (!done) send(BYE, -1, null);
      done = true;
    }

    private void send(byte type, int deadRank, String message) {
      try {
        out.writeByte(type);
        if (deadRank >= 0) out.writeInt(deadRank);
        if (message != null) {
          out.writeUTF(message.length() > MAX_MESSAGE_CHARS ? message.substring(0, MAX_MESSAGE_CHARS) : message);
        }
        out.flush();
      } catch (IOException e) {
        LOG.debug("rendezvous: could not tell rank {}: {}", rank, describe(e));
      }
    }

    void close() {
      closeQuietly(socket);
    }
  }
}
