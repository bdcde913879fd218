package dev.taco.collective.nccl;

import dev.taco.kernels.cuda.NativeLibraries;
import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * JNA binding of NCCL ({@code libnccl.so.2}), process-wide, loaded on first use; NCCL 2.19 or newer.
 *
 * <p>The library is searched as the system property {@code taco.libnccl} or {@code $TACO_LIBNCCL} if set, then
 * {@code libnccl.so.2}, {@code nccl}. {@link #available()} / {@link #unavailableReason()} say whether it can be used
 * (GPU tests: {@code assumeTrue(Nccl.available(), Nccl.unavailableReason())}); {@link #get()} throws
 * {@link IllegalStateException} with the reason when it cannot, including a library older than 2.19 (named with its
 * version).
 *
 * <p>Handles ({@code ncclComm_t}, {@code cudaStream_t} = {@code CUstream}) and device pointers are Java
 * {@code long}s, as in {@code CudaDriver}; {@code size_t} counts are {@code long}s (LP64). The collectives, send/recv
 * and group calls use JNA direct mapping (they are on the hot path); the rest an interface mapping.
 *
 * <p>Non-blocking communicators: {@link #commInitRankConfig} always asks for one ({@link NcclConfig#nonBlocking()}).
 * Any call on such a communicator may then return {@code ncclInProgress} (7): the methods that can report it return
 * {@code true} for it, and the caller must poll {@link #commGetAsyncError(long)} until it leaves
 * {@code ncclInProgress} before the next NCCL call on that communicator, and before enqueueing other work on the
 * stream (NCCL User Guide, "ncclCommGetAsyncError"; nccl4py {@code get_async_error}). Any other status throws
 * {@link NcclException} naming the call, the result, {@code ncclGetErrorString} and {@code ncclGetLastError}.
 * NCCL uses the CUDA runtime's current device: make the rank's {@code CudaContext} current before each call.
 *
 * <p>Reference: NCCL {@code src/nccl.h.in} (2.19, 2.28): {@code ncclGetVersion}, {@code ncclGetUniqueId},
 * {@code ncclCommInitRankConfig}, {@code ncclCommGetAsyncError}, {@code ncclCommFinalize}, {@code ncclCommDestroy},
 * {@code ncclCommAbort}, {@code ncclCommCount}, {@code ncclCommCuDevice}, {@code ncclCommUserRank},
 * {@code ncclGetErrorString}, {@code ncclGetLastError}, {@code ncclAllReduce}, {@code ncclAllGather},
 * {@code ncclReduceScatter}, {@code ncclBroadcast}, {@code ncclSend}, {@code ncclRecv}, {@code ncclGroupStart},
 * {@code ncclGroupEnd}; NCCL User Guide, "Communicator Creation and Management Functions", "Group Calls".
 */
public final class Nccl {
  private static final Logger LOG = LoggerFactory.getLogger(Nccl.class);

  /** Oldest accepted version: {@code NCCL_VERSION(2,19,0)} = 21900. */
  public static final int MIN_VERSION = 21900;
  /** {@code ncclSuccess}. */
  public static final int SUCCESS = 0;
  /** {@code ncclInvalidArgument}. */
  public static final int INVALID_ARGUMENT = 4;
  /** {@code ncclRemoteError}: a remote process exited or the network failed. */
  public static final int REMOTE_ERROR = 6;
  /** {@code ncclInProgress}: a non-blocking call is still being progressed in the background. */
  public static final int IN_PROGRESS = 7;

  /** {@code ncclResult_t} names, by value (nccl.h 2.28; {@code ncclTimeout} is newer than 2.19). */
  private static final String[] RESULT_NAMES = {"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
      "ncclTimeout"};

  /** Interface-mapped entry points (resolved lazily). */
  interface Api extends Library {
    int ncclGetVersion(IntByReference version);

    int ncclGetUniqueId(byte[] uniqueId);

    int ncclCommInitRankConfig(LongByReference comm, int nranks, NcclUniqueIdStruct.ByValue commId, int rank,
        NcclConfig config);

    int ncclCommGetAsyncError(long comm, IntByReference asyncError);

    int ncclCommFinalize(long comm);

    int ncclCommDestroy(long comm);

    int ncclCommAbort(long comm);

    int ncclCommCount(long comm, IntByReference count);

    int ncclCommCuDevice(long comm, IntByReference device);

    int ncclCommUserRank(long comm, IntByReference rank);

    String ncclGetErrorString(int result);

    String ncclGetLastError(long comm);
  }

  /** Direct-mapped hot entry points, bound once. */
  static final class Direct {
    private Direct() {}

    static native int ncclAllReduce(long sendbuff, long recvbuff, long count, int datatype, int op, long comm,
        long stream);

    static native int ncclAllGather(long sendbuff, long recvbuff, long sendcount, int datatype, long comm,
        long stream);

    static native int ncclReduceScatter(long sendbuff, long recvbuff, long recvcount, int datatype, int op,
        long comm, long stream);

    static native int ncclBroadcast(long sendbuff, long recvbuff, long count, int datatype, int root, long comm,
        long stream);

    static native int ncclSend(long sendbuff, long count, int datatype, int peer, long comm, long stream);

    static native int ncclRecv(long recvbuff, long count, int datatype, int peer, long comm, long stream);

    static native int ncclGroupStart();

    static native int ncclGroupEnd();
  }

  private static volatile Nccl instance;
  private static volatile String loadFailure;
  private static boolean directBound;

  private final Api api;
  private final String libraryName;
  private final int version;

  private Nccl(Api api, String libraryName, int version) {
    this.api = api;
    this.libraryName = libraryName;
    this.version = version;
  }

  // ------------------------------------------------------------------ loading

  /**
   * Loads NCCL (once); never throws.
   *
   * @return whether {@link #get()} succeeds
   */
  public static boolean available() {
    try {
      get();
      return true;
    } catch (IllegalStateException e) {
      return false;
    }
  }

  /**
   * @return why NCCL cannot be used, e.g. {@code "libnccl not loadable (libnccl.so.2: ...; nccl: ...)"}, or
   *         {@code "NCCL available: 2.28.3 (libnccl.so.2)"} when it can
   */
  public static String unavailableReason() {
    if (available()) return "NCCL available: " + instance.versionString() + " (" + instance.libraryName + ")";
    return loadFailure;
  }

  /**
   * The process-wide binding, loading the library on first use.
   *
   * @return the binding
   * @throws IllegalStateException {@code "NCCL unavailable: <reason>"} if no library loads or it is older than 2.19
   *                               (the first failure is kept and repeated)
   */
  public static Nccl get() {
    Nccl n = instance;
    if (n != null) return n;
    synchronized (Nccl.class) {
      if (instance == null && loadFailure == null) {
        try {
          instance = load(candidates());
          LOG.info("NCCL {} loaded from {}", instance.versionString(), instance.libraryName);
        } catch (RuntimeException e) {
          loadFailure = e instanceof IllegalStateException ? e.getMessage() : "loading NCCL failed: " + e;
          LOG.info("NCCL unavailable: {}", loadFailure);
        }
      }
      if (instance != null) return instance;
      throw new IllegalStateException("NCCL unavailable: " + loadFailure);
    }
  }

  /** @return the library names to try, in order */
  static List<String> candidates() {
    return NativeLibraries.candidates("taco.libnccl", "TACO_LIBNCCL", "libnccl.so.2", "nccl");
  }

  /**
   * Loads the first of {@code names} that opens and checks its version; does not touch the process-wide binding.
   *
   * @param names library names or paths
   * @return the binding
   * @throws IllegalStateException naming every name tried and why it failed, or the too-old version found
   */
  static Nccl load(List<String> names) {
    List<String> tried = new ArrayList<>();
    for (String name : names) {
      NativeLibrary lib;
      Api api;
      IntByReference v = new IntByReference();
      int status;
      try {
        lib = NativeLibrary.getInstance(name);
        api = Native.load(name, Api.class);
        status = api.ncclGetVersion(v);
      } catch (LinkageError e) {
        tried.add(why(name, e.getMessage()));
        continue;
      }
      if (status != SUCCESS) throw new IllegalStateException(name + ": ncclGetVersion returned " + resultName(status));
      String problem = versionProblem(v.getValue(), name);
      if (problem != null) throw new IllegalStateException(problem);
      try {
        bindDirect(lib);
      } catch (LinkageError e) {
        throw new IllegalStateException("NCCL " + versionString(v.getValue()) + " lacks an entry point: "
            + why(name, e.getMessage()), e);
      }
      return new Nccl(api, name, v.getValue());
    }
    throw new IllegalStateException("libnccl not loadable (" + String.join("; ", tried) + ")");
  }

  private static synchronized void bindDirect(NativeLibrary lib) {
    if (directBound) return;
    Native.register(Direct.class, lib);
    directBound = true;
  }

  /**
   * @param code    an {@code NCCL_VERSION_CODE} from {@code ncclGetVersion}
   * @param library where it came from, for the message
   * @return null if the version is supported, else e.g. {@code "libnccl.so.2 is NCCL 2.18.5 (version code 21805);
   *         TACO needs NCCL >= 2.19 (ncclConfig_t with splitShare, ncclCommFinalize, non-blocking init)"}
   */
  static String versionProblem(int code, String library) {
    if (code >= MIN_VERSION) return null;
    return library + " is NCCL " + versionString(code) + " (version code " + code + "); TACO needs NCCL >= "
        + versionString(MIN_VERSION) + " (ncclConfig_t with splitShare, ncclCommFinalize, non-blocking init)";
  }

  /**
   * Decodes an {@code NCCL_VERSION_CODE}: {@code X*10000 + Y*100 + Z} since 2.9, {@code X*1000 + Y*100 + Z} before.
   *
   * @param code the version code, e.g. 22803
   * @return e.g. {@code "2.28.3"}
   */
  static String versionString(int code) {
    if (code >= 20900) return (code / 10000) + "." + (code / 100 % 100) + "." + (code % 100);
    return (code / 1000) + "." + (code / 100 % 10) + "." + (code % 100);
  }

  /**
   * @param result an {@code ncclResult_t}
   * @return its symbol, e.g. {@code "ncclInProgress"} for 7, or {@code "ncclResult(42)"} for an unknown value
   */
  public static String resultName(int result) {
    return result >= 0 && result < RESULT_NAMES.length ? RESULT_NAMES[result] : "ncclResult(" + result + ")";
  }

  /**
   * @param name    the library name tried
   * @param message JNA's message, which begins "Unable to load library 'x':" with the loader's reason on the next line
   * @return {@code "<name>: <the loader's reason>"}, e.g. {@code "libnccl.so.2: cannot open shared object file: ..."}
   */
  static String why(String name, String message) {
    return NativeLibraries.why(name, message);
  }

  /** @return the {@code NCCL_VERSION_CODE} of the loaded library, e.g. 22803 */
  public int version() {
    return version;
  }

  /** @return the loaded version, e.g. {@code "2.28.3"} */
  public String versionString() {
    return versionString(version);
  }

  /** @return the name the library was loaded under, e.g. {@code "libnccl.so.2"} */
  public String libraryName() {
    return libraryName;
  }

  // ------------------------------------------------------------------ errors

  /**
   * @param result an {@code ncclResult_t}
   * @return {@code ncclGetErrorString(result)}, e.g. {@code "invalid argument (run with NCCL_DEBUG=WARN for
   *         details)"}
   */
  public String errorString(int result) {
    String s = api.ncclGetErrorString(result);
    return s == null ? "unknown result" : s;
  }

  /**
   * @param comm a communicator, or 0
   * @return {@code ncclGetLastError(comm)}: the last error NCCL logged (possibly from an earlier asynchronous
   *         operation), empty if none
   */
  public String lastError(long comm) {
    String s = api.ncclGetLastError(comm);
    return s == null ? "" : s;
  }

  /**
   * Builds the exception for a failed call, reading {@code ncclGetErrorString} and {@code ncclGetLastError}.
   *
   * @param context who and what (may be empty)
   * @param call    the NCCL entry point
   * @param result  its status
   * @param comm    the communicator (still valid), or 0
   * @return the exception (not thrown)
   */
  public NcclException exception(String context, String call, int result, long comm) {
    return new NcclException(context, call, result, errorString(result), lastError(comm));
  }

  /** @return true for {@code ncclInProgress}, false for {@code ncclSuccess}; throws for anything else */
  private boolean started(String call, int status, long comm) {
    if (status == SUCCESS) return false;
    if (status == IN_PROGRESS) return true;
    throw exception("", call, status, comm);
  }

  private void check(String call, int status, long comm) {
    if (status != SUCCESS) throw exception("", call, status, comm);
  }

  // ------------------------------------------------------------------ communicators

  /**
   * {@code ncclGetUniqueId}: a new id for one communicator (also starts NCCL's bootstrap root on this process;
   * call it on one rank only).
   *
   * @return the id
   * @throws NcclException e.g. {@code ncclSystemError} when no network interface is usable
   */
  public UniqueId uniqueId() {
    byte[] b = new byte[UniqueId.BYTES];
    check("ncclGetUniqueId", api.ncclGetUniqueId(b), 0);
    return UniqueId.of(b);
  }

  /**
   * {@code ncclCommInitRankConfig} with a non-blocking {@link NcclConfig}: starts creating this rank's
   * communicator on the current CUDA device. Returns the raw status, since the caller must abort a half-made
   * communicator on error (and inside a group must first end the group).
   *
   * @param comm   receives the {@code ncclComm_t} (set even while in progress)
   * @param nranks world size, &ge; 1
   * @param id     the unique id, the same on every rank
   * @param rank   this rank, in {@code [0, nranks)}
   * @return the {@code ncclResult_t}: {@link #SUCCESS}, {@link #IN_PROGRESS} (poll {@link #commGetAsyncError}) or
   *         an error
   */
  public int commInitRankConfig(LongByReference comm, int nranks, UniqueId id, int rank) {
    return api.ncclCommInitRankConfig(comm, nranks, new NcclUniqueIdStruct.ByValue(id), rank,
        NcclConfig.nonBlocking());
  }

  /**
   * {@code ncclCommGetAsyncError}: the communicator's state.
   *
   * @param comm the communicator
   * @return {@link #SUCCESS}, {@link #IN_PROGRESS}, or the error an asynchronous operation hit (e.g.
   *         {@link #REMOTE_ERROR})
   * @throws NcclException if the query itself fails (e.g. a null communicator)
   */
  public int commGetAsyncError(long comm) {
    IntByReference state = new IntByReference();
    check("ncclCommGetAsyncError", api.ncclCommGetAsyncError(comm, state), comm);
    return state.getValue();
  }

  /**
   * {@code ncclCommFinalize}: flushes the issued operations; the state becomes {@link #SUCCESS} once the
   * communicator is globally quiescent (poll {@link #commGetAsyncError}), after which {@link #commDestroy} is local.
   *
   * @param comm the communicator
   * @return true if the state is {@code ncclInProgress}
   * @throws NcclException on error
   */
  public boolean commFinalize(long comm) {
    return started("ncclCommFinalize", api.ncclCommFinalize(comm), comm);
  }

  /**
   * {@code ncclCommDestroy}: frees the communicator (after {@link #commFinalize}); the handle becomes invalid.
   *
   * @param comm the communicator
   * @throws NcclException on error
   */
  public void commDestroy(long comm) {
    check("ncclCommDestroy", api.ncclCommDestroy(comm), 0);
  }

  /**
   * {@code ncclCommAbort}: stops the operations still running on the device and frees the communicator; the handle
   * becomes invalid. Every rank must abort its own communicator when a peer dies.
   *
   * @param comm the communicator
   * @throws NcclException on error
   */
  public void commAbort(long comm) {
    check("ncclCommAbort", api.ncclCommAbort(comm), 0);
  }

  /**
   * @param comm the communicator
   * @return {@code ncclCommCount}: the number of ranks
   * @throws NcclException on error
   */
  public int commCount(long comm) {
    IntByReference v = new IntByReference();
    check("ncclCommCount", api.ncclCommCount(comm, v), comm);
    return v.getValue();
  }

  /**
   * @param comm the communicator
   * @return {@code ncclCommUserRank}: this rank
   * @throws NcclException on error
   */
  public int commUserRank(long comm) {
    IntByReference v = new IntByReference();
    check("ncclCommUserRank", api.ncclCommUserRank(comm, v), comm);
    return v.getValue();
  }

  /**
   * @param comm the communicator
   * @return {@code ncclCommCuDevice}: the CUDA device ordinal it uses
   * @throws NcclException on error
   */
  public int commCuDevice(long comm) {
    IntByReference v = new IntByReference();
    check("ncclCommCuDevice", api.ncclCommCuDevice(comm, v), comm);
    return v.getValue();
  }

  // ------------------------------------------------------------------ collectives (enqueued on a stream)

  /**
   * {@code ncclAllReduce(..., ncclSum, ...)}: {@code recv[i] = sum over ranks of send[i]}, {@code count} elements;
   * in place when {@code send == recv}.
   *
   * @param send   device pointer, {@code count} elements
   * @param recv   device pointer, {@code count} elements
   * @param count  elements, &ge; 0
   * @param type   element type
   * @param comm   the communicator
   * @param stream the {@code cudaStream_t}
   * @return true if NCCL answered {@code ncclInProgress}
   * @throws NcclException on error
   */
  public boolean allReduce(long send, long recv, long count, NcclDataType type, long comm, long stream) {
    return allReduce(send, recv, count, type, NcclRedOp.SUM, comm, stream);
  }

  /**
   * {@code ncclAllReduce} with the reduction {@code op}: {@code recv[i] = op over ranks of send[i]}.
   *
   * @return true if NCCL answered {@code ncclInProgress}
   * @throws NcclException on error
   */
  public boolean allReduce(long send, long recv, long count, NcclDataType type, NcclRedOp op, long comm,
      long stream) {
    return started("ncclAllReduce", Direct.ncclAllReduce(send, recv, count, type.code(), op.code(), comm, stream),
        comm);
  }

  /**
   * {@code ncclAllGather}: rank r's {@code sendCount} elements land at {@code recv + r*sendCount} on every rank.
   *
   * @param send      device pointer, {@code sendCount} elements
   * @param recv      device pointer, {@code nranks * sendCount} elements
   * @param sendCount elements per rank, &ge; 0
   * @param type      element type
   * @param comm      the communicator
   * @param stream    the {@code cudaStream_t}
   * @return true if NCCL answered {@code ncclInProgress}
   * @throws NcclException on error
   */
  public boolean allGather(long send, long recv, long sendCount, NcclDataType type, long comm, long stream) {
    return started("ncclAllGather", Direct.ncclAllGather(send, recv, sendCount, type.code(), comm, stream), comm);
  }

  /**
   * {@code ncclReduceScatter(..., ncclSum, ...)}: rank r receives the sum over ranks of their block r.
   *
   * @param send      device pointer, {@code nranks * recvCount} elements
   * @param recv      device pointer, {@code recvCount} elements
   * @param recvCount elements per rank, &ge; 0
   * @param type      element type
   * @param comm      the communicator
   * @param stream    the {@code cudaStream_t}
   * @return true if NCCL answered {@code ncclInProgress}
   * @throws NcclException on error
   */
  public boolean reduceScatter(long send, long recv, long recvCount, NcclDataType type, long comm, long stream) {
    return started("ncclReduceScatter",
        Direct.ncclReduceScatter(send, recv, recvCount, type.code(), NcclRedOp.SUM.code(), comm, stream), comm);
  }

  /**
   * {@code ncclBroadcast}: the root's {@code send} lands in every rank's {@code recv}.
   *
   * @param send   device pointer, read on the root only
   * @param recv   device pointer, {@code count} elements
   * @param count  elements, &ge; 0
   * @param type   element type
   * @param root   the root's rank
   * @param comm   the communicator
   * @param stream the {@code cudaStream_t}
   * @return true if NCCL answered {@code ncclInProgress}
   * @throws NcclException on error (e.g. {@code ncclInvalidArgument} for a root out of range)
   */
  public boolean broadcast(long send, long recv, long count, NcclDataType type, int root, long comm, long stream) {
    return started("ncclBroadcast", Direct.ncclBroadcast(send, recv, count, type.code(), root, comm, stream), comm);
  }

  /**
   * {@code ncclSend}: sends {@code count} elements to {@code peer} (which must post the matching recv); inside a
   * group for more than one peer.
   *
   * @param send   device pointer
   * @param count  elements
   * @param type   element type
   * @param peer   the destination rank (may be this rank)
   * @param comm   the communicator
   * @param stream the {@code cudaStream_t}
   * @return true if NCCL answered {@code ncclInProgress}
   * @throws NcclException on error
   */
  public boolean send(long send, long count, NcclDataType type, int peer, long comm, long stream) {
    return started("ncclSend", Direct.ncclSend(send, count, type.code(), peer, comm, stream), comm);
  }

  /**
   * {@code ncclRecv}: receives {@code count} elements from {@code peer}.
   *
   * @param recv   device pointer
   * @param count  elements
   * @param type   element type
   * @param peer   the source rank (may be this rank)
   * @param comm   the communicator
   * @param stream the {@code cudaStream_t}
   * @return true if NCCL answered {@code ncclInProgress}
   * @throws NcclException on error
   */
  public boolean recv(long recv, long count, NcclDataType type, int peer, long comm, long stream) {
    return started("ncclRecv", Direct.ncclRecv(recv, count, type.code(), peer, comm, stream), comm);
  }

  /**
   * {@code ncclGroupStart}: the NCCL calls of this thread until {@link #groupEnd()} are issued together.
   *
   * @throws NcclException on error
   */
  public void groupStart() {
    check("ncclGroupStart", Direct.ncclGroupStart(), 0);
  }

  /**
   * {@code ncclGroupEnd}: issues the grouped calls (or, for grouped inits, starts them).
   *
   * @return true if NCCL answered {@code ncclInProgress} (poll each communicator of the group)
   * @throws NcclException on error
   */
  public boolean groupEnd() {
    return started("ncclGroupEnd", Direct.ncclGroupEnd(), 0);
  }
}
