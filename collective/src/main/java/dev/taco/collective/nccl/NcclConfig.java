package dev.taco.collective.nccl;

import com.sun.jna.Pointer;
import com.sun.jna.Structure;

/**
 * JNA mapping of the oldest versioned prefix of {@code ncclConfig_t} this binding supports: the layout of NCCL
 * 2.19's {@code struct ncclConfig_v21700} (splitShare added in 2.18), which every later {@code ncclConfig_t} begins
 * with (2.28's {@code ncclConfig_v22800} appends trafficClass, commName, collnetEnable, CTAPolicy, shrinkShare,
 * nvlsCTAs, nChannelsPerNetPeer, nvlinkCentricSched; newer ones append more).
 *
 * <p>LP64 layout (x86-64 / aarch64 Linux), {@link #size()} = 48:
 * <pre>
 *  offset  C field                     here
 *   0      size_t size                 long, = 48, the bytes NCCL copies
 *   8      unsigned int magic          int, = 0xcafebeef (NCCL_API_MAGIC)
 *  12      unsigned int version        int, = 21900 = NCCL_VERSION(2,19,0), the layout filled in
 *  16      int blocking                0: non-blocking communicator
 *  20      int cgaClusterSize          INT_MIN (NCCL_CONFIG_UNDEF_INT: NCCL's default)
 *  24      int minCTAs                 INT_MIN
 *  28      int maxCTAs                 INT_MIN
 *  32      const char *netName         NULL (NCCL_CONFIG_UNDEF_PTR)
 *  40      int splitShare              INT_MIN
 *  44      (padding to 8)
 * </pre>
 *
 * <p>Why a prefix is safe: {@code ncclCommInitRankConfig} starts from its own {@code NCCL_CONFIG_INITIALIZER}
 * defaults, copies {@code min(config->size, sizeof(ncclConfig_t))} bytes of ours over them, checks the magic, and
 * resets to defaults the fields newer than {@code config->version} (NCCL {@code src/init.cc},
 * {@code parseCommConfig}); the fields we do not send keep their defaults. The struct is read during the call
 * (before the asynchronous init job starts), so it need not outlive it.
 *
 * <p>Source: NCCL {@code src/nccl.h.in} at 2.19 ({@code ncclConfig_v21700}) and 2.28 ({@code ncclConfig_v22800});
 * NCCL User Guide, "ncclConfig_t".
 */
@Structure.FieldOrder({"size", "magic", "version", "blocking", "cgaClusterSize", "minCTAs", "maxCTAs", "netName",
    "splitShare"})
public final class NcclConfig extends Structure {
  /** {@code NCCL_API_MAGIC}. */
  public static final int MAGIC = 0xcafebeef;
  /** {@code NCCL_CONFIG_UNDEF_INT} = {@code INT_MIN}: "NCCL's default". */
  public static final int UNDEF_INT = Integer.MIN_VALUE;
  /** {@code NCCL_VERSION(2,19,0)}: the layout this struct fills in. */
  public static final int LAYOUT_VERSION = 21900;

  /** {@code size_t size}: bytes of this struct NCCL reads. */
  public long size;
  /** {@code unsigned int magic}. */
  public int magic = MAGIC;
  /** {@code unsigned int version}. */
  public int version = LAYOUT_VERSION;
  /** {@code int blocking}: 0 = non-blocking, 1 = blocking, UNDEF = default (blocking). */
  public int blocking = UNDEF_INT;
  /** {@code int cgaClusterSize}. */
  public int cgaClusterSize = UNDEF_INT;
  /** {@code int minCTAs}. */
  public int minCTAs = UNDEF_INT;
  /** {@code int maxCTAs}. */
  public int maxCTAs = UNDEF_INT;
  /** {@code const char *netName}. */
  public Pointer netName;
  /** {@code int splitShare}. */
  public int splitShare = UNDEF_INT;

  /** A config with every field at NCCL's default (as {@code NCCL_CONFIG_INITIALIZER}). */
  public NcclConfig() {
    size = size();
  }

  /** @return a config asking for a non-blocking communicator ({@code blocking = 0}), the rest default */
  public static NcclConfig nonBlocking() {
    NcclConfig c = new NcclConfig();
    c.blocking = 0;
    return c;
  }

  /** @return the byte offset of a field in the native layout (for layout tests) */
  int offsetOf(String field) {
    return fieldOffset(field);
  }
}
