package dev.taco.collective.nccl;

import com.sun.jna.ptr.LongByReference;
import dev.taco.collective.CollectiveException;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One rank of an NCCL communicator, on one GPU: the collectives of nccl-tests' {@code RunColl(sendbuff, recvbuff,
 * count, type, op, comm, stream)} on device pointers and a {@link CudaStream}, none of which blocks the host.
 *
 * <p>The communicator is NON-BLOCKING ({@code ncclConfig_t.blocking = 0}, see {@link NcclConfig}): when NCCL answers
 * {@code ncclInProgress}, the call polls {@code ncclCommGetAsyncError} until it settles (bounded by the timeout)
 * before anything else touches the communicator or the stream. Each collective then records a completion event on
 * the stream and hands it to the {@link Watchdog}: a collective not complete {@link #timeout()} after it was
 * enqueued, an asynchronous NCCL error, a peer death reported by the {@link Rendezvous}, or any failed NCCL call
 * aborts the communicator ({@code ncclCommAbort}, exactly once); from then on every call, and
 * {@link #synchronize(CudaStream)}, throws {@link CollectiveException} with the failure message, e.g.
 * {@code rank 1: allReduce(count=1048576, bf16) not complete after 120.0 s: communicator aborted (watchdog)}. (In
 * non-blocking mode NCCL records even an argument error as the communicator's state, so it cannot be used after one
 * anyway.) Bad arguments NCCL would not see (negative counts, a root out of range, buffers too small or on another
 * device) throw {@link IllegalArgumentException} first and leave the communicator healthy.
 *
 * <p>Before every NCCL call the rank's {@link CudaContext} is made current: it is the device's PRIMARY context, which
 * the CUDA runtime (and so NCCL) adopts, so NCCL and the driver-API code share it. Calls are serialised by a lock
 * (NCCL communicators are not thread-safe), so any thread may drive the rank, one call at a time.
 *
 * <p>Counts are in elements of the given {@link NcclDataType}, pointers are {@code CUdeviceptr}s of this rank's
 * device (or {@link DeviceBuffer}s, whose sizes are checked). Every rank must issue the same collectives in the same
 * order with the same counts.
 *
 * <p>Reference: NCCL User Guide, "Creating a Communicator" (non-blocking communicators, fault tolerance), "Collective
 * Operations", "Point-to-point communication" (all-to-all as grouped send/recv), "Group Calls";
 * {@code ncclCommFinalize} / {@code ncclCommDestroy} / {@code ncclCommAbort} in nccl.h 2.19 / 2.28; PyTorch
 * {@code ProcessGroupNCCL} (watchdog, timeout, abort). docs/design.md §4.
 */
public final class NcclCommunicator implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(NcclCommunicator.class);

  /** Default timeout of init and of each collective: {@link Watchdog#DEFAULT_TIMEOUT} (120 s). */
  public static final Duration DEFAULT_TIMEOUT = Watchdog.DEFAULT_TIMEOUT;

  /** One NCCL call on the live communicator; what the boolean means is the caller's. */
  @FunctionalInterface
  private interface Call {
    boolean run(long comm);
  }

  /** One enqueueing NCCL call; answers whether NCCL said {@code ncclInProgress}. */
  @FunctionalInterface
  private interface Op {
    boolean run(long comm, long stream);
  }

  /** What {@code ncclCommInitRankConfig} returned. */
  private record Started(long comm, int status) {
    boolean failed() {
      return status != Nccl.SUCCESS && status != Nccl.IN_PROGRESS;
    }
  }

  private final Nccl nccl;
  private final CudaContext ctx;
  private final int rank;
  private final int worldSize;
  private final Duration timeout;
  private final String label;
  private final ReentrantLock lock = new ReentrantLock();
  private final EventPool events;
  private final List<AutoCloseable> owned = new ArrayList<>();
  private final AtomicBoolean closing = new AtomicBoolean();
  private final Watchdog watchdog;
  private long comm; // guarded by lock; 0 once destroyed or aborted
  private volatile boolean closed;

  private NcclCommunicator(Nccl nccl, CudaContext ctx, long comm, int rank, int worldSize, Duration timeout) {
    this.nccl = nccl;
    this.ctx = ctx;
    this.comm = comm;
    this.rank = rank;
    this.worldSize = worldSize;
    this.timeout = timeout;
    this.label = "rank " + rank;
    this.events = new EventPool(ctx);
    this.watchdog = new Watchdog(label, new Guard(), timeout);
    LOG.info("{} of {}: NCCL {} communicator on device {} ({}), timeout {}", label, worldSize, nccl.versionString(),
        ctx.ordinal(), ctx.name(), Time.seconds(timeout));
  }

  // ------------------------------------------------------------------ creation

  /**
   * Creates this rank's communicator (multi-process or one thread per rank): {@code ncclCommInitRankConfig},
   * non-blocking, polled to completion; every rank calls it with the same id and world size.
   *
   * @param ctx       this rank's device (its primary context); not owned: close it after the communicator
   * @param rank      this rank, in {@code [0, worldSize)}
   * @param worldSize number of ranks, &ge; 1
   * @param id        the unique id, the same on every rank ({@code Nccl.get().uniqueId()} on one of them)
   * @param timeout   bound of the init and of each collective, &gt; 0 ({@link #DEFAULT_TIMEOUT})
   * @return the communicator
   * @throws NcclException       if NCCL fails (the half-made communicator is aborted)
   * @throws CollectiveException if the init does not complete within the timeout (e.g. a peer never calls it)
   * @throws IllegalStateException if NCCL is unavailable
   */
  public static NcclCommunicator init(CudaContext ctx, int rank, int worldSize, UniqueId id, Duration timeout) {
    return init(ctx, rank, worldSize, id, timeout, timeout);
  }

  /**
   * As {@link #init(CudaContext, int, int, UniqueId, Duration)}, with separate bounds for the init and for each
   * collective (e.g. a short collective timeout in a test, while init may take seconds).
   *
   * @param ctx         this rank's device; not owned
   * @param rank        this rank, in {@code [0, worldSize)}
   * @param worldSize   number of ranks, &ge; 1
   * @param id          the unique id, the same on every rank
   * @param initTimeout bound of the init, &gt; 0
   * @param opTimeout   the watchdog's deadline of each collective after it is enqueued, &gt; 0
   * @return the communicator
   * @throws NcclException       if NCCL fails (the half-made communicator is aborted)
   * @throws CollectiveException if the init does not complete within {@code initTimeout}
   */
  public static NcclCommunicator init(CudaContext ctx, int rank, int worldSize, UniqueId id, Duration initTimeout,
      Duration opTimeout) {
    Objects.requireNonNull(ctx, "ctx");
    Objects.requireNonNull(id, "id");
    if (worldSize < 1) throw new IllegalArgumentException("worldSize must be >= 1: " + worldSize);
    if (rank < 0 || rank >= worldSize) {
      throw new IllegalArgumentException("rank " + rank + " outside [0, worldSize=" + worldSize + ")");
    }
    Time.positive(initTimeout, "initTimeout");
    Time.positive(opTimeout, "opTimeout");
    Nccl nccl = Nccl.get();
    long deadline = System.nanoTime() + initTimeout.toNanos();
    ctx.makeCurrent();
    Started s = start(nccl, worldSize, id, rank);
    try {
      if (s.failed()) throw nccl.exception("rank " + rank, "ncclCommInitRankConfig", s.status(), s.comm());
      awaitInit(nccl, ctx, s.comm(), rank, worldSize, deadline, initTimeout);
      verify(nccl, ctx, s.comm(), rank, worldSize);
    } catch (RuntimeException e) {
      abortQuietly(nccl, ctx, s.comm(), e);
      throw e;
    }
    return new NcclCommunicator(nccl, ctx, s.comm(), rank, worldSize, opTimeout);
  }

  /**
   * Creates one communicator per device for one JVM driving them all (rank r on {@code devices.get(r)}; then drive
   * each from its own thread): {@code ncclGroupStart}, one {@code ncclCommInitRankConfig} per device with that
   * device's context current, {@code ncclGroupEnd}, then each polled to completion.
   *
   * @param devices distinct devices, one per rank; not owned
   * @param timeout bound of the init and of each collective, &gt; 0
   * @return the communicators, rank order
   * @throws IllegalArgumentException if the list is empty or names a device twice (NCCL refuses two ranks on one GPU)
   * @throws NcclException            if NCCL fails (every communicator made is aborted)
   * @throws CollectiveException      if the init does not complete within the timeout
   */
  public static List<NcclCommunicator> initAll(List<CudaContext> devices, Duration timeout) {
    Objects.requireNonNull(devices, "devices");
    if (devices.isEmpty()) throw new IllegalArgumentException("initAll needs at least one device");
    Set<Integer> seen = new HashSet<>();
    for (CudaContext d : devices) {
      if (!seen.add(d.ordinal())) {
        throw new IllegalArgumentException("device " + d.ordinal() + " is listed twice: NCCL refuses two ranks on "
            + "one GPU (\"Duplicate GPU detected\")");
      }
    }
    Time.positive(timeout, "timeout");
    Nccl nccl = Nccl.get();
    int n = devices.size();
    UniqueId id = nccl.uniqueId();
    long deadline = System.nanoTime() + timeout.toNanos();
    long[] comms = new long[n];
    RuntimeException failure = null;
    nccl.groupStart();
    for (int r = 0; r < n && failure == null; r++) {
      try {
        devices.get(r).makeCurrent();
        Started s = start(nccl, n, id, r);
        comms[r] = s.comm();
        if (s.failed()) failure = nccl.exception("rank " + r, "ncclCommInitRankConfig", s.status(), s.comm());
      } catch (RuntimeException e) {
        failure = e;
      }
    }
    try {
      nccl.groupEnd();
    } catch (NcclException e) {
      if (failure == null) failure = e.withContext("initAll");
    }
    try {
      if (failure != null) throw failure;
      for (int r = 0; r < n; r++) awaitInit(nccl, devices.get(r), comms[r], r, n, deadline, timeout);
      for (int r = 0; r < n; r++) verify(nccl, devices.get(r), comms[r], r, n);
    } catch (RuntimeException e) {
      for (int r = 0; r < n; r++) abortQuietly(nccl, devices.get(r), comms[r], e);
      throw e;
    }
    List<NcclCommunicator> out = new ArrayList<>(n);
    for (int r = 0; r < n; r++) out.add(new NcclCommunicator(nccl, devices.get(r), comms[r], r, n, timeout));
    return List.copyOf(out);
  }

  /**
   * Creates this process's communicator from torchrun's environment ({@link System#getenv()}); see
   * {@link #fromEnvironment(Map, Duration)}.
   *
   * @param timeout bound of the rendezvous, the init and each collective, &gt; 0
   * @return the communicator, owning its context and rendezvous
   */
  public static NcclCommunicator fromEnvironment(Duration timeout) {
    return fromEnvironment(System.getenv(), timeout);
  }

  /**
   * Creates this process's communicator for a one-process-per-GPU launch: parses {@link LaunchEnv} ({@code RANK},
   * {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code MASTER_ADDR}, {@code MASTER_PORT}), opens device
   * {@code LOCAL_RANK}, joins the {@link Rendezvous} (rank 0 makes the unique id), inits, and registers the
   * watchdog as the rendezvous' peer-death listener, so a dead process aborts every other rank.
   *
   * @param env     the variables (e.g. a map in tests, instead of the process environment)
   * @param timeout bound of the rendezvous, the init and each collective, &gt; 0
   * @return the communicator; closing it closes the rendezvous and the context too
   * @throws IllegalArgumentException for a missing or inconsistent variable (naming it)
   * @throws CollectiveException      if the rendezvous or the init fails or times out
   * @throws IllegalStateException    if NCCL is unavailable
   */
  public static NcclCommunicator fromEnvironment(Map<String, String> env, Duration timeout) {
    LaunchEnv launch = LaunchEnv.parse(env);
    Time.positive(timeout, "timeout");
    Nccl nccl = Nccl.get();
    CudaContext ctx = CudaContext.open(launch.localRank());
    Rendezvous rv = null;
    try {
      rv = Rendezvous.join(launch, () -> nccl.uniqueId().bytes(), timeout);
      NcclCommunicator c = init(ctx, launch.rank(), launch.worldSize(), UniqueId.of(rv.id()), timeout, timeout);
      c.owned.add(ctx);
      c.owned.add(rv);
      rv.onPeerFailure(c.watchdog::fail);
      return c;
    } catch (RuntimeException e) {
      if (rv != null) rv.close();
      ctx.close();
      throw e;
    }
  }

  private static Started start(Nccl nccl, int worldSize, UniqueId id, int rank) {
    LongByReference ref = new LongByReference();
    int status = nccl.commInitRankConfig(ref, worldSize, id, rank);
    return new Started(ref.getValue(), status);
  }

  private static void awaitInit(Nccl nccl, CudaContext ctx, long comm, int rank, int worldSize, long deadline,
      Duration timeout) {
    String who = "rank " + rank + " (world size " + worldSize + ", device " + ctx.ordinal() + ")";
    if (comm == 0) throw new CollectiveException(who + ": ncclCommInitRankConfig returned no communicator");
    Backoff backoff = new Backoff();
    while (true) {
      ctx.makeCurrent();
      int state;
      try {
        state = nccl.commGetAsyncError(comm);
      } catch (NcclException e) {
        throw e.withContext(who);
      }
      if (state == Nccl.SUCCESS) return;
      if (state != Nccl.IN_PROGRESS) throw nccl.exception(who, "ncclCommInitRankConfig", state, comm);
      if (System.nanoTime() - deadline > 0) {
        throw new CollectiveException(who + ": ncclCommInitRankConfig not complete after " + Time.seconds(timeout)
            + ": communicator aborted");
      }
      backoff.pause();
    }
  }

  private static void verify(Nccl nccl, CudaContext ctx, long comm, int rank, int worldSize) {
    ctx.makeCurrent();
    int count = nccl.commCount(comm);
    int user = nccl.commUserRank(comm);
    int device = nccl.commCuDevice(comm);
    if (count != worldSize || user != rank || device != ctx.ordinal()) {
      throw new CollectiveException("rank " + rank + ": the NCCL communicator is rank " + user + " of " + count
          + " on device " + device + ", expected rank " + rank + " of " + worldSize + " on device " + ctx.ordinal());
    }
  }

  private static void abortQuietly(Nccl nccl, CudaContext ctx, long comm, RuntimeException cause) {
    if (comm == 0) return;
    try {
      ctx.makeCurrent();
      nccl.commAbort(comm);
    } catch (RuntimeException e) {
      cause.addSuppressed(e);
    }
  }

  // ------------------------------------------------------------------ properties

  /** @return this rank, in {@code [0, worldSize)} */
  public int rank() {
    return rank;
  }

  /** @return number of ranks */
  public int worldSize() {
    return worldSize;
  }

  /** @return this rank's device */
  public CudaContext context() {
    return ctx;
  }

  /** @return the CUDA device ordinal ({@code ncclCommCuDevice}, checked at init) */
  public int cudaDevice() {
    return ctx.ordinal();
  }

  /** @return the watchdog's deadline of each collective, also the bound of any non-blocking call's polling */
  public Duration timeout() {
    return timeout;
  }

  /** @return the failure message once the communicator is aborted, null while healthy */
  public String failure() {
    return watchdog.failure();
  }

  /** @return the raw {@code ncclComm_t}, 0 once destroyed or aborted (tests only: calls on it bypass the lock) */
  long handle() {
    lock.lock();
    try {
      return comm;
    } finally {
      lock.unlock();
    }
  }

  /** @return collectives enqueued and not yet seen complete by the watchdog */
  public int pending() {
    return watchdog.pending();
  }

  // ------------------------------------------------------------------ collectives

  /**
   * Sum all-reduce ({@code ncclAllReduce}, {@code ncclSum}): {@code recv[i] = sum over ranks of send[i]}; in place
   * when {@code send == recv}. Enqueued on {@code stream}; returns without waiting.
   *
   * @param send   device pointer, {@code count} elements
   * @param recv   device pointer, {@code count} elements
   * @param count  elements, &ge; 0
   * @param type   element type
   * @param stream a stream of this rank's device
   * @throws NcclException       if NCCL rejects the call (the communicator is then aborted)
   * @throws CollectiveException if the communicator has failed, or a non-blocking call does not settle in time
   */
  public void allReduce(long send, long recv, long count, NcclDataType type, CudaStream stream) {
    allReduce(send, recv, count, type, NcclRedOp.SUM, stream);
  }

  /**
   * All-reduce with the reduction {@code op} ({@code ncclAllReduce}): {@code recv[i] = op over ranks of send[i]}, as
   * {@link #allReduce(long, long, long, NcclDataType, CudaStream)} otherwise.
   *
   * @throws NcclException       if NCCL rejects the call (the communicator is then aborted)
   * @throws CollectiveException if the communicator has failed, or a non-blocking call does not settle in time
   */
  public void allReduce(long send, long recv, long count, NcclDataType type, NcclRedOp op, CudaStream stream) {
    requireCount(count, "count");
    enqueue("allReduce(count=" + count + ", " + type.label() + (op == NcclRedOp.SUM ? "" : ", " + op) + ")", stream,
        (c, s) -> nccl.allReduce(send, recv, count, type, op, c, s));
  }

  /**
   * {@link #allReduce(long, long, long, NcclDataType, CudaStream)} on buffers, whose sizes are checked.
   *
   * @param send   at least {@code count} elements
   * @param recv   at least {@code count} elements (may be {@code send})
   * @param count  elements, &ge; 0
   * @param type   element type
   * @param stream a stream of this rank's device
   * @throws IllegalArgumentException if a buffer is too small or on another device
   */
  public void allReduce(DeviceBuffer send, DeviceBuffer recv, long count, NcclDataType type, CudaStream stream) {
    long bytes = bytes(count, type);
    requireBuffer("allReduce", "send", send, bytes);
    requireBuffer("allReduce", "recv", recv, bytes);
    allReduce(send.pointer(), recv.pointer(), count, type, stream);
  }

  /**
   * All-gather ({@code ncclAllGather}): rank r's {@code sendCount} elements land at {@code recv + r*sendCount} on
   * every rank.
   *
   * @param send      device pointer, {@code sendCount} elements
   * @param recv      device pointer, {@code worldSize * sendCount} elements
   * @param sendCount elements per rank, &ge; 0
   * @param type      element type
   * @param stream    a stream of this rank's device
   * @throws NcclException       if NCCL rejects the call (the communicator is then aborted)
   * @throws CollectiveException if the communicator has failed
   */
  public void allGather(long send, long recv, long sendCount, NcclDataType type, CudaStream stream) {
    requireCount(sendCount, "sendCount");
    enqueue("allGather(sendCount=" + sendCount + ", " + type.label() + ")", stream,
        (c, s) -> nccl.allGather(send, recv, sendCount, type, c, s));
  }

  /**
   * {@link #allGather(long, long, long, NcclDataType, CudaStream)} on buffers, whose sizes are checked.
   *
   * @param send      at least {@code sendCount} elements
   * @param recv      at least {@code worldSize * sendCount} elements
   * @param sendCount elements per rank, &ge; 0
   * @param type      element type
   * @param stream    a stream of this rank's device
   * @throws IllegalArgumentException if a buffer is too small or on another device
   */
  public void allGather(DeviceBuffer send, DeviceBuffer recv, long sendCount, NcclDataType type, CudaStream stream) {
    long bytes = bytes(sendCount, type);
    requireBuffer("allGather", "send", send, bytes);
    requireBuffer("allGather", "recv", recv, Math.multiplyExact(bytes, worldSize));
    allGather(send.pointer(), recv.pointer(), sendCount, type, stream);
  }

  /**
   * Sum reduce-scatter ({@code ncclReduceScatter}, {@code ncclSum}): rank r receives the sum over ranks of their
   * block r ({@code recvCount} elements at {@code send + r*recvCount}).
   *
   * @param send      device pointer, {@code worldSize * recvCount} elements
   * @param recv      device pointer, {@code recvCount} elements
   * @param recvCount elements per rank, &ge; 0
   * @param type      element type
   * @param stream    a stream of this rank's device
   * @throws NcclException       if NCCL rejects the call (the communicator is then aborted)
   * @throws CollectiveException if the communicator has failed
   */
  public void reduceScatter(long send, long recv, long recvCount, NcclDataType type, CudaStream stream) {
    requireCount(recvCount, "recvCount");
    enqueue("reduceScatter(recvCount=" + recvCount + ", " + type.label() + ")", stream,
        (c, s) -> nccl.reduceScatter(send, recv, recvCount, type, c, s));
  }

  /**
   * {@link #reduceScatter(long, long, long, NcclDataType, CudaStream)} on buffers, whose sizes are checked.
   *
   * @param send      at least {@code worldSize * recvCount} elements
   * @param recv      at least {@code recvCount} elements
   * @param recvCount elements per rank, &ge; 0
   * @param type      element type
   * @param stream    a stream of this rank's device
   * @throws IllegalArgumentException if a buffer is too small or on another device
   */
  public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, long recvCount, NcclDataType type,
      CudaStream stream) {
    long bytes = bytes(recvCount, type);
    requireBuffer("reduceScatter", "send", send, Math.multiplyExact(bytes, worldSize));
    requireBuffer("reduceScatter", "recv", recv, bytes);
    reduceScatter(send.pointer(), recv.pointer(), recvCount, type, stream);
  }

  /**
   * Broadcast ({@code ncclBroadcast}): the root's {@code count} elements of {@code send} land in every rank's
   * {@code recv}.
   *
   * @param send   device pointer, read on the root only
   * @param recv   device pointer, {@code count} elements
   * @param count  elements, &ge; 0
   * @param type   element type
   * @param root   the root's rank, in {@code [0, worldSize)}
   * @param stream a stream of this rank's device
   * @throws IllegalArgumentException for a root out of range
   * @throws NcclException            if NCCL rejects the call (the communicator is then aborted)
   * @throws CollectiveException      if the communicator has failed
   */
  public void broadcast(long send, long recv, long count, NcclDataType type, int root, CudaStream stream) {
    requireCount(count, "count");
    if (root < 0 || root >= worldSize) {
      throw new IllegalArgumentException(label + ": broadcast root " + root + " outside [0, " + worldSize + ")");
    }
    enqueue("broadcast(count=" + count + ", " + type.label() + ", root=" + root + ")", stream,
        (c, s) -> nccl.broadcast(send, recv, count, type, root, c, s));
  }

  /**
   * {@link #broadcast(long, long, long, NcclDataType, int, CudaStream)} on buffers, whose sizes are checked.
   *
   * @param send   at least {@code count} elements
   * @param recv   at least {@code count} elements
   * @param count  elements, &ge; 0
   * @param type   element type
   * @param root   the root's rank
   * @param stream a stream of this rank's device
   * @throws IllegalArgumentException if a buffer is too small or on another device
   */
  public void broadcast(DeviceBuffer send, DeviceBuffer recv, long count, NcclDataType type, int root,
      CudaStream stream) {
    long bytes = bytes(count, type);
    requireBuffer("broadcast", "send", send, bytes);
    requireBuffer("broadcast", "recv", recv, bytes);
    broadcast(send.pointer(), recv.pointer(), count, type, root, stream);
  }

  /**
   * All-to-all of bytes as grouped {@code ncclSend}/{@code ncclRecv} ({@code ncclUint8}) with every peer, this
   * rank included (NCCL allows send/recv to self): {@code send[p]} goes to rank p, {@code recv[q]} comes from rank q.
   * A rank whose {@code send} and {@code recv} pointers are both 0 is skipped (no send or receive for that pair; every
   * rank must skip symmetrically, e.g. each one its own slot).
   *
   * @param send      one device pointer per rank, {@code bytesEach} bytes each
   * @param recv      one device pointer per rank, {@code bytesEach} bytes each
   * @param bytesEach bytes per peer, &ge; 0
   * @param stream    a stream of this rank's device
   * @throws IllegalArgumentException if an array does not have {@code worldSize} pointers
   * @throws NcclException            if NCCL rejects a call (the communicator is then aborted)
   * @throws CollectiveException      if the communicator has failed
   */
  public void allToAll(long[] send, long[] recv, long bytesEach, CudaStream stream) {
    Objects.requireNonNull(send, "send");
    Objects.requireNonNull(recv, "recv");
    if (send.length != worldSize || recv.length != worldSize) {
      throw new IllegalArgumentException(label + ": allToAll needs " + worldSize + " send and recv pointers, got "
          + send.length + " and " + recv.length);
    }
    requireCount(bytesEach, "bytesEach");
    long[] to = send.clone();
    long[] from = recv.clone();
    enqueue("allToAll(bytesEach=" + bytesEach + ", ranks=" + worldSize + ")", stream,
        (c, s) -> exchange(c, s, to, from, bytesEach));
  }

  /**
   * {@link #allToAll(long[], long[], long, CudaStream)} on contiguous buffers: chunk p ({@code bytesEach} bytes at
   * offset {@code p*bytesEach}) of {@code send} goes to rank p, chunk q of {@code recv} comes from rank q (the layout
   * of {@code ncclAlltoAll}).
   *
   * @param send      at least {@code worldSize * bytesEach} bytes
   * @param recv      at least {@code worldSize * bytesEach} bytes
   * @param bytesEach bytes per peer, &ge; 0
   * @param stream    a stream of this rank's device
   * @throws IllegalArgumentException if a buffer is too small or on another device
   */
  public void allToAll(DeviceBuffer send, DeviceBuffer recv, long bytesEach, CudaStream stream) {
    requireCount(bytesEach, "bytesEach");
    long total = Math.multiplyExact(bytesEach, worldSize);
    requireBuffer("allToAll", "send", send, total);
    requireBuffer("allToAll", "recv", recv, total);
    long[] to = new long[worldSize];
    long[] from = new long[worldSize];
    for (int p = 0; p < worldSize; p++) {
      to[p] = send.pointer() + p * bytesEach;
      from[p] = recv.pointer() + p * bytesEach;
    }
    allToAll(to, from, bytesEach, stream);
  }

  /**
   * Waits until the work enqueued so far on {@code stream} has completed, by polling a CUDA event
   * ({@code cuEventQuery}) with a short back-off, never by a blocking driver call, so it throws as soon as the
   * communicator is aborted. Bounded by {@link #timeout()} (past it the communicator is aborted).
   *
   * @param stream a stream of this rank's device
   * @throws CollectiveException with the failure message if the communicator has failed or fails while waiting
   */
  public void synchronize(CudaStream stream) {
    requireStream(stream);
    watchdog.check();
    CudaEvent done = events.take();
    try {
      ctx.makeCurrent();
      done.record(stream);
      watchdog.await("synchronize", done::query);
    } finally {
      events.give(done);
    }
  }

  /**
   * Aborts the communicator now ({@code ncclCommAbort}, on the watchdog thread; returns once it has): later calls
   * throw {@link CollectiveException} with {@code "rank r: <reason>: communicator aborted"}. Only the first failure
   * counts.
   *
   * @param reason why, for the message
   */
  public void abort(String reason) {
    watchdog.fail(Objects.requireNonNull(reason, "reason"));
    watchdog.awaitAbort();
  }

  /**
   * Shuts down: {@code ncclCommFinalize}, polled until the communicator is globally quiescent (bounded by the
   * timeout), then {@code ncclCommDestroy}; falls back to {@code ncclCommAbort} on an error or a timeout (logged,
   * not thrown). A failed communicator is just released. Then stops the watchdog, frees the events and closes what
   * this communicator owns (from {@link #fromEnvironment}: the rendezvous, with a goodbye, and the context).
   * Idempotent.
   */
  @Override
  public void close() {
    if (!closing.compareAndSet(false, true)) return;
    try {
      if (watchdog.failure() == null) finalizeAndDestroy();
    } catch (RuntimeException e) {
      LOG.warn("{}: clean shutdown failed, aborting: {}", label, e.getMessage());
      watchdog.fail("close: " + e.getMessage());
    } finally {
      closed = true;
      watchdog.awaitAbort();
      watchdog.close();
      events.close();
      for (int i = owned.size() - 1; i >= 0; i--) {
        try {
          owned.get(i).close();
        } catch (Exception e) {
          LOG.warn("{}: closing {} failed: {}", label, owned.get(i), e.getMessage());
        }
      }
    }
  }

  // ------------------------------------------------------------------ internals

  private void finalizeAndDestroy() {
    String op = "close (ncclCommFinalize)";
    locked(op, nccl::commFinalize);
    awaitSettled(op);
    lock.lock();
    try {
      long c = comm;
      comm = 0;
      ctx.makeCurrent();
      nccl.commDestroy(c);
    } finally {
      lock.unlock();
    }
    LOG.info("{}: NCCL communicator finalized and destroyed", label);
  }

  /**
   * Runs one enqueueing call, settles it, and hands its completion event to the watchdog. While {@code stream} is
   * being captured into a CUDA graph the call is only recorded, not run, so there is nothing to watch yet: whoever
   * launches the graph watches the launch ({@link #watch}).
   */
  private void enqueue(String op, CudaStream stream, Op launch) {
    long s = requireStream(stream);
    if (locked(op, c -> launch.run(c, s))) awaitSettled(op);
    if (stream.isCapturing()) {
      return;
    }
    watch(op, stream);
  }

  /**
   * Hands the watchdog a completion event recorded on {@code stream} now: work enqueued there so far (a replayed CUDA
   * graph holding this communicator's calls, say) must complete within the timeout, or the communicator is aborted.
   *
   * @param op what the work is, for the failure message
   * @throws CollectiveException if the event cannot be recorded (the communicator is then failed)
   */
  public void watch(String op, CudaStream stream) {
    CudaEvent done = events.take();
    try {
      ctx.makeCurrent();
      done.record(stream);
    } catch (RuntimeException e) {
      events.give(done);
      watchdog.fail(op + ": could not record its completion event: " + e.getMessage());
      throw new CollectiveException(watchdog.failure(), e);
    }
    watchdog.watch(op, done::query, () -> events.give(done));
  }

  /** Grouped send/recv with every peer; answers whether {@code ncclGroupEnd} said {@code ncclInProgress}. */
  private boolean exchange(long c, long stream, long[] send, long[] recv, long bytes) {
    nccl.groupStart();
    NcclException first = null;
    try {
      for (int p = 0; p < worldSize; p++) {
        if (send[p] == 0 && recv[p] == 0) {
          continue;
        }
        nccl.send(send[p], bytes, NcclDataType.UINT8, p, c, stream);
        nccl.recv(recv[p], bytes, NcclDataType.UINT8, p, c, stream);
      }
    } catch (NcclException e) {
      first = e;
    }
    boolean inProgress;
    try {
      inProgress = nccl.groupEnd();
    } catch (NcclException e) {
      if (first == null) throw e;
      first.addSuppressed(e);
      inProgress = false;
    }
    if (first != null) throw first;
    return inProgress;
  }

  /**
   * Runs {@code call} on the live communicator under the lock with the context current; a failed NCCL call fails
   * the watchdog (so the communicator is aborted) and is rethrown with the rank and {@code op} in front.
   */
  private boolean locked(String op, Call call) {
    lock.lock();
    try {
      long c = live();
      ctx.makeCurrent();
      return call.run(c);
    } catch (NcclException e) {
      watchdog.fail(op + ": " + e.detail());
      throw e.withContext(label + ": " + op);
    } finally {
      lock.unlock();
    }
  }

  /** Polls {@code ncclCommGetAsyncError} until it leaves {@code ncclInProgress}; bounded by the timeout. */
  private void awaitSettled(String op) {
    long deadline = System.nanoTime() + timeout.toNanos();
    Backoff backoff = new Backoff();
    while (!locked(op, this::settled)) {
      if (System.nanoTime() - deadline > 0) {
        watchdog.expire(op);
        watchdog.check();
      }
      backoff.pause();
    }
  }

  private boolean settled(long c) {
    int state = nccl.commGetAsyncError(c);
    if (state == Nccl.IN_PROGRESS) return false;
    if (state == Nccl.SUCCESS) return true;
    throw nccl.exception("", "ncclCommGetAsyncError", state, c);
  }

  private long live() {
    if (closed) throw new IllegalStateException(label + ": communicator is closed");
    watchdog.check();
    if (comm == 0) throw new CollectiveException(label + ": communicator is destroyed");
    return comm;
  }

  private long requireStream(CudaStream stream) {
    Objects.requireNonNull(stream, "stream");
    if (stream.context().handle() != ctx.handle()) {
      throw new IllegalArgumentException(label + ": the stream is on device " + stream.context().ordinal()
          + ", the communicator on device " + ctx.ordinal());
    }
    return stream.handle();
  }

  private void requireBuffer(String op, String name, DeviceBuffer b, long bytes) {
    Objects.requireNonNull(b, name);
    if (b.context() != null && b.context().handle() != ctx.handle()) {
      throw new IllegalArgumentException(label + ": " + op + ": the " + name + " buffer is on device "
          + b.context().ordinal() + ", the communicator on device " + ctx.ordinal());
    }
    if (b.bytes() < bytes) {
      throw new IllegalArgumentException(label + ": " + op + ": the " + name + " buffer has " + b.bytes()
          + " bytes, needs " + bytes + " (world size " + worldSize + ")");
    }
  }

  private static void requireCount(long count, String name) {
    if (count < 0) throw new IllegalArgumentException(name + " must be >= 0: " + count);
  }

  private static long bytes(long count, NcclDataType type) {
    requireCount(count, "count");
    return Math.multiplyExact(count, type.bytes());
  }

  /** The watchdog's view of the communicator: its async error state, and {@code ncclCommAbort}. */
  private final class Guard implements Watchdog.Target {
    @Override
    public String asyncError() {
      lock.lock();
      try {
        if (comm == 0) return null;
        ctx.makeCurrent();
        int state = nccl.commGetAsyncError(comm);
        if (state == Nccl.SUCCESS || state == Nccl.IN_PROGRESS) return null;
        return "NCCL async error " + NcclException.describe(state, nccl.errorString(state), nccl.lastError(comm));
      } finally {
        lock.unlock();
      }
    }

    @Override
    public void abort(String reason) {
      lock.lock();
      try {
        long c = comm;
        if (c == 0) return;
        comm = 0;
        ctx.makeCurrent();
        nccl.commAbort(c);
      } finally {
        lock.unlock();
      }
    }
  }
}
