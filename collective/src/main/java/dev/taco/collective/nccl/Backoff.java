package dev.taco.collective.nccl;

import java.util.concurrent.locks.LockSupport;

/**
 * The pause between two polls of something that usually finishes soon (a CUDA event, a non-blocking NCCL call):
 * a few spins first, then parks that double from 1 µs up to 1 ms, so a short wait costs little latency and a long
 * one little CPU. One instance per wait; not thread-safe.
 */
final class Backoff {
  private static final int SPINS = 64;
  private static final long MAX_PARK_NANOS = 1_000_000;

  private int spins;
  private long parkNanos = 1_000;

  /** Pauses once. */
  void pause() {
    if (spins < SPINS) {
      spins++;
      Thread.onSpinWait();
      return;
    }
    LockSupport.parkNanos(parkNanos);
    parkNanos = Math.min(MAX_PARK_NANOS, parkNanos * 2);
  }
}
