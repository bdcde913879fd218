package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * NCCL in torchrun's launch mode, one process per GPU ({@link NcclCommunicator#fromEnvironment}: {@code RANK},
 * {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code MASTER_ADDR}, {@code MASTER_PORT}): every op on every type against
 * exact results in every process, over every visible GPU (at one GPU a single process at world size 1); and, with two
 * GPUs or more, a process killed with SIGKILL in the middle of all-reduces makes the other fail with an error naming
 * the dead rank, well within the collective timeout (NVIDIA/nccl#585: without that, it would wait forever). NCCL takes
 * one rank per GPU, so the kill needs two. Skipped, with the reason, without a GPU or libnccl. The seed is printed;
 * {@code -Dtaco.seed=N} repeats it.
 */
@Tag("gpu")
class NcclProcessGpuTest {
  private static final long SEED = Long.getLong("taco.seed", System.nanoTime());

  /**
   * One rank: {@code check TIMEOUT_S} runs every op on every type against the exact results and prints
   * {@code OK rank r}; {@code loop TIMEOUT_S} all-reduces until one fails, printing {@code LOOPING rank r} after the
   * first and {@code FAILED after S s: message} at the end. A failure exits with status 3. The seed is TACO_SEED.
   */
  public static final class Rank {
    public static void main(String[] args) {
      long seed = Long.parseLong(System.getenv("TACO_SEED"));
      Duration timeout = Duration.ofSeconds(Long.parseLong(args[1]));
      long t0 = System.nanoTime();
      try (NcclCommunicator c = NcclCommunicator.fromEnvironment(timeout)) {
        if (args[0].equals("check")) {
          for (NcclDataType t : NcclGpuTest.EXACT_TYPES) {
            NcclGpuTest.checkRank(c, t, NcclGpuTest.inputs(t, c.worldSize(), seed), seed);
          }
          System.out.println("OK rank " + c.rank() + " of " + c.worldSize() + " on device " + c.cudaDevice());
        } else {
          int n = 1 << 20;
          try (CudaStream st = c.context().createStream(); DeviceBuffer b = c.context().alloc(4L * n)) {
            b.memset((byte) 0);
            c.context().synchronize();
            for (long i = 0;; i++) {
              c.allReduce(b, b, n, NcclDataType.FLOAT32, st);
              c.synchronize(st);
              if (i == 0) System.out.println("LOOPING rank " + c.rank());
              t0 = System.nanoTime();
            }
          }
        }
      } catch (RuntimeException | AssertionError e) {
        System.out.printf("FAILED after %.2f s: %s%n", (System.nanoTime() - t0) / 1e9, e.getMessage());
        System.exit(3);
      }
    }
  }

  private static int gpus() {
    assumeTrue(Nccl.available() && Cuda.available(), () -> Nccl.unavailableReason() + "; " + Cuda.unavailableReason());
    return Math.min(Cuda.deviceCount(), 8);
  }

  private static List<ChildJvm> launch(int n, String... args) {
    int port = RendezvousTest.freePort();
    List<ChildJvm> ranks = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      Map<String, String> env = new HashMap<>(Map.of("RANK", String.valueOf(r), "WORLD_SIZE", String.valueOf(n),
          "LOCAL_RANK", String.valueOf(r), "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", String.valueOf(port), "TACO_SEED",
          String.valueOf(SEED)));
      ranks.add(new ChildJvm(Rank.class, env, args));
    }
    return ranks;
  }

  @Test
  void everyOpIsExactInEveryProcess() throws Exception {
    int n = gpus();
    System.out.println("NcclProcessGpuTest seed " + SEED + ": " + n + " process(es)");
    List<ChildJvm> ranks = launch(n, "check", "120");
    try {
      for (int r = 0; r < n; r++) {
        ChildJvm c = ranks.get(r);
        assertThat(c.process.waitFor(180, TimeUnit.SECONDS)).as("rank %d finished:%n%s", r, c.output()).isTrue();
        assertThat(c.process.exitValue()).as("rank %d's status:%n%s", r, c.output()).isZero();
        assertThat(c.output()).contains("OK rank " + r + " of " + n + " on device " + r);
      }
    } finally {
      for (ChildJvm c : ranks) c.close();
    }
  }

  @Test
  void aProcessKilledInAnAllReduceMakesTheOtherFailNamingItWithinSeconds() throws Exception {
    int n = gpus();
    assumeTrue(n >= 2, "needs two GPUs: NCCL takes one rank per GPU (found " + n + ")");
    List<ChildJvm> ranks = launch(2, "loop", "120");
    try {
      for (int r = 0; r < 2; r++) {
        assertThat(ranks.get(r).await("LOOPING", 120)).as("rank %d loops:%n%s", r, ranks.get(r).output())
            .isNotNull();
      }
      long t0 = System.nanoTime();
      ranks.get(1).process.destroyForcibly(); // SIGKILL: no goodbye, no shutdown hook
      ChildJvm survivor = ranks.get(0);
      assertThat(survivor.process.waitFor(60, TimeUnit.SECONDS)).as("rank 0 gave up:%n%s", survivor.output()).isTrue();
      double seconds = (System.nanoTime() - t0) / 1e9;
      System.out.printf("rank 0 failed %.2f s after rank 1 was killed: %s%n", seconds,
          survivor.output().lines().filter(l -> l.startsWith("FAILED")).findFirst().orElse("?"));
      assertThat(survivor.process.exitValue()).as(survivor.output()).isEqualTo(3);
      assertThat(survivor.output()).contains("FAILED after").contains("rank 1 died");
      assertThat(seconds).as("well within the 120 s collective timeout").isLessThan(30);
    } finally {
      for (ChildJvm c : ranks) c.close();
    }
  }
}
