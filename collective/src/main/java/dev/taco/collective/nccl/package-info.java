/**
 * The NCCL transport: a JNA binding of {@code libnccl.so.2} ({@link dev.taco.collective.nccl.Nccl}), one rank's
 * communicator on one GPU ({@link dev.taco.collective.nccl.NcclCommunicator}), the watchdog that aborts it when a
 * collective hangs or NCCL reports an asynchronous error ({@link dev.taco.collective.nccl.Watchdog}), and the
 * torchrun-style launch: {@link dev.taco.collective.nccl.LaunchEnv} reads {@code RANK}, {@code WORLD_SIZE},
 * {@code LOCAL_RANK}, {@code MASTER_ADDR}, {@code MASTER_PORT}, and {@link dev.taco.collective.nccl.Rendezvous}
 * hands rank 0's unique id to every rank over TCP, then keeps the connections as a liveness channel.
 *
 * <p>Reference: NCCL 2.19 / 2.28 {@code nccl.h}; NCCL User Guide, "Creating a Communicator" (non-blocking
 * communicators, {@code ncclCommGetAsyncError}), "Group Calls", "Point-to-point communication", and the
 * communicator management API ({@code ncclCommFinalize}, {@code ncclCommDestroy}, {@code ncclCommAbort}).
 * docs/design.md §4 ("NCCL facts").
 */
package dev.taco.collective.nccl;
