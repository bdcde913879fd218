package dev.taco.collective.device;

import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;

/**
 * How one rank's payload bytes move between GPUs (docs/design.md §4, "Transports"): the two exchanges of the two-shot
 * collectives, enqueued on a CUDA stream without a host synchronisation. A payload buffer holds {@code worldSize()}
 * slots of {@code slotBytes} each, slot {@code q} at byte offset {@code q * slotBytes} (16-byte aligned).
 *
 * <p>Implementations: {@code nccl} ({@link NcclTransport}: grouped send/recv and an in-place all-gather, one GPU per
 * rank) and {@code device-local} ({@link DeviceLocalTransport}: ranks as threads sharing one GPU, for tests and TP runs
 * on a single GPU; never a real link).
 */
public interface DeviceTransport extends AutoCloseable {

  /** This rank, in {@code [0, worldSize)}. */
  int rank();

  /** Number of ranks R. */
  int worldSize();

  /** The rank's device (its primary context). */
  CudaContext context();

  /**
   * Enqueues the exchange of an all-to-all on {@code stream}: slot {@code p} of this rank's {@code send} lands in slot
   * {@link #rank()} of rank {@code p}'s {@code recv}; this rank's own slots are not moved. Every rank calls it with
   * buffers of the same {@code slotBytes}.
   *
   * @throws dev.taco.collective.CollectiveException if the exchange cannot be set up (a peer failed, a timeout)
   */
  void allToAll(DeviceBuffer send, DeviceBuffer recv, long slotBytes, CudaStream stream);

  /**
   * Enqueues an in-place all-gather on {@code stream}: slot {@link #rank()} of this rank's {@code buf} lands in the same
   * slot of every rank's {@code buf}.
   *
   * @throws dev.taco.collective.CollectiveException if the exchange cannot be set up
   */
  void allGather(DeviceBuffer buf, long slotBytes, CudaStream stream);

  /**
   * Every rank gives a fingerprint of something all ranks must share; if any two differ, every rank throws. The check
   * mode of plain collectives (like {@code TORCH_DISTRIBUTED_DEBUG=DETAIL}) agrees on the collective each rank is about
   * to run, before anything is enqueued; a training run agrees on its model and options once. Costs a small exchange
   * (and, for NCCL, a host synchronisation).
   *
   * @param what this rank's description of what must agree, for the message
   * @param fingerprint a hash of it, e.g. {@link #fingerprint(String)}
   * @throws dev.taco.collective.CollectiveException naming a rank whose fingerprint differs: "{@code <transport>: rank
   *     q and rank r disagree on <what>}"
   */
  void agree(String what, long fingerprint);

  /** The first 64 bits of the SHA-256 of {@code text} (UTF-8): equal texts agree, different ones collide rarely. */
  static long fingerprint(String text) {
    try {
      return java.nio.ByteBuffer.wrap(java.security.MessageDigest.getInstance("SHA-256")
          .digest(text.getBytes(java.nio.charset.StandardCharsets.UTF_8))).getLong();
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }

  /**
   * Whether {@link #agree} is cheap enough to run before every collective even outside the check mode (no device
   * synchronisation); false by default.
   */
  default boolean cheapAgreement() {
    return false;
  }

  /**
   * Told, when a collective is recorded (before any of its executions, and so before a CUDA-graph capture), the slot
   * size of an exchange it will make: a transport that keeps state per exchange size sets it up here, where the host
   * may still wait for the device. The default does nothing.
   */
  default void prepare(long slotBytes) {}

  /** Whether the exchanges can be captured into a CUDA graph (NCCL calls can; host coordination cannot). */
  boolean capturable();

  /**
   * Watches the work enqueued on {@code stream} so far (a replayed CUDA graph holding this transport's exchanges): the
   * NCCL transport hands it to its communicator's watchdog, which aborts the communicator if it does not complete in
   * time. The default does nothing.
   *
   * @param op what the work is, for the failure message
   */
  default void watch(String op, CudaStream stream) {}

  /** Bytes this rank has put on the wire for other ranks (payload slots sent). */
  long bytesSent();

  @Override
  void close();
}
