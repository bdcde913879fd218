package dev.taco.collective.nccl;

import java.util.Map;
import java.util.Objects;

/**
 * Where this process sits in a multi-process launch, read from torchrun's environment variables: {@code RANK} (this
 * process, {@code 0 <= RANK < WORLD_SIZE}), {@code WORLD_SIZE} (number of processes, one per GPU),
 * {@code LOCAL_RANK} (this process on its node = the CUDA device ordinal it drives), {@code MASTER_ADDR} and
 * {@code MASTER_PORT} (where rank 0 hosts the {@link Rendezvous}).
 *
 * <p>{@code RANK} and {@code WORLD_SIZE} are required; {@code LOCAL_RANK} defaults to {@code RANK} (right on one
 * node), {@code MASTER_ADDR} to {@value #DEFAULT_MASTER_ADDR} (loopback) and {@code MASTER_PORT} to
 * {@value #DEFAULT_MASTER_PORT}, torchrun's defaults.
 *
 * <p>Reference: PyTorch "torchrun (Elastic Launch)", environment variables; {@code torch.distributed}
 * {@code env://} initialisation.
 *
 * @param rank       global rank, {@code 0 <= rank < worldSize}
 * @param worldSize  number of ranks, &ge; 1
 * @param localRank  rank on this node = CUDA device ordinal, {@code 0 <= localRank <= rank}
 * @param masterAddr host or IP address rank 0 listens on, not blank
 * @param masterPort TCP port rank 0 listens on, in [1, 65535]
 */
public record LaunchEnv(int rank, int worldSize, int localRank, String masterAddr, int masterPort) {
  /** {@code MASTER_ADDR} when unset: the IPv4 loopback. */
  public static final String DEFAULT_MASTER_ADDR = "127.0.0.1";
  /** {@code MASTER_PORT} when unset (torchrun's default). */
  public static final int DEFAULT_MASTER_PORT = 29500;

  private static final String NAMES = "torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT";

  /**
   * Checks the values; messages name the torchrun variable.
   *
   * @throws IllegalArgumentException for an out-of-range or inconsistent value, e.g.
   *                                  {@code "RANK=4 must be in [0, WORLD_SIZE=4)"}
   */
  public LaunchEnv {
    if (worldSize < 1) throw new IllegalArgumentException("WORLD_SIZE=" + worldSize + " must be >= 1");
    if (rank < 0 || rank >= worldSize) {
      throw new IllegalArgumentException("RANK=" + rank + " must be in [0, WORLD_SIZE=" + worldSize + ")");
    }
    if (localRank < 0 || localRank > rank) {
      throw new IllegalArgumentException("LOCAL_RANK=" + localRank + " must be in [0, RANK=" + rank
          + "]: ranks are numbered node by node, so a local rank never exceeds the global rank");
    }
    Objects.requireNonNull(masterAddr, "MASTER_ADDR");
    if (masterAddr.isBlank()) throw new IllegalArgumentException("MASTER_ADDR is empty");
    if (masterPort < 1 || masterPort > 65535) {
      throw new IllegalArgumentException("MASTER_PORT=" + masterPort + " must be in [1, 65535]");
    }
  }

  /**
   * Parses torchrun's variables.
   *
   * @param env variable name → value, e.g. {@link System#getenv()}
   * @return the launch
   * @throws IllegalArgumentException naming the variable if one is missing, not an integer, out of range or
   *                                  inconsistent with another
   */
  public static LaunchEnv parse(Map<String, String> env) {
    Objects.requireNonNull(env, "env");
    int worldSize = integer(env, "WORLD_SIZE", null);
    int rank = integer(env, "RANK", null);
    int localRank = integer(env, "LOCAL_RANK", rank);
    String addr = env.get("MASTER_ADDR");
    String masterAddr = addr == null ? DEFAULT_MASTER_ADDR : addr.trim();
    int masterPort = integer(env, "MASTER_PORT", DEFAULT_MASTER_PORT);
    return new LaunchEnv(rank, worldSize, localRank, masterAddr, masterPort);
  }

  /** @return {@code MASTER_ADDR:MASTER_PORT}, an IPv6 address in brackets, e.g. {@code "127.0.0.1:29500"} */
  public String endpoint() {
    return (masterAddr.indexOf(':') >= 0 ? "[" + masterAddr + "]" : masterAddr) + ":" + masterPort;
  }

  private static int integer(Map<String, String> env, String name, Integer fallback) {
    String raw = env.get(name);
    if (raw == null) {
      if (fallback == null) throw new IllegalArgumentException(name + " is not set (" + NAMES + ")");
      return fallback;
    }
    String v = raw.trim();
    if (v.isEmpty()) throw new IllegalArgumentException(name + " is empty (" + NAMES + ")");
    try {
      return Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + "='" + raw + "' is not an integer");
    }
  }
}
