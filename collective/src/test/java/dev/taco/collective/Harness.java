package dev.taco.collective;

import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.function.Function;
import java.util.function.IntBinaryOperator;

/**
 * Runs one float collective on one rank with guard values around its buffers, and computes the float64 oracle,
 * for any {@link Communicator} (exact or compressed with any codec).
 */
final class Harness {

  /** Guard values in front of and behind every buffer, to catch writes outside {@code [off, off+count)}. */
  static final int OFF = 3;
  static final float GUARD = -7.25f;

  static final int[] WORLDS = {1, 2, 3, 4};
  /** {@link #WORLDS} as a stream, for parameter sources. */
  static java.util.stream.IntStream worlds() {
    return Arrays.stream(WORLDS);
  }

  static final int[] SIZES = {0, 1, 5, 7, 64, 1000, 4099};

  enum Op {
    ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL;

    /** Input length per rank for chunk size {@code n}. */
    int inLen(int world, int n) {
      return this == ALL_REDUCE || this == ALL_GATHER ? n : world * n;
    }

    /** Output length per rank. */
    int outLen(int world, int n) {
      return this == ALL_REDUCE || this == REDUCE_SCATTER ? n : world * n;
    }

    /** True if every rank ends with the same values. */
    boolean replicated() {
      return this == ALL_REDUCE || this == ALL_GATHER;
    }
  }

  private Harness() {}

  /** Fresh random input of rank {@code rank}: heavy-tailed values, some exact zeros; deterministic in its args. */
  static float[] input(Op op, int world, int n, int rank, long seed) {
    long mix = ((op.ordinal() * 7L + world) * 10_007L + n) * 31 + rank;
    SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + mix);
    float[] x = new float[op.inLen(world, n)];
    for (int i = 0; i < x.length; i++) {
      x[i] = rnd.nextInt(16) == 0 ? 0f : (float) (gaussian(rnd) * Math.exp(2 * gaussian(rnd)));
    }
    return x;
  }

  private static double gaussian(SplittableRandom rnd) {
    return Math.sqrt(-2 * Math.log(1 - rnd.nextDouble())) * Math.cos(2 * Math.PI * rnd.nextDouble());
  }

  /** Runs {@code op} on {@code comm} with the input embedded at {@link #OFF} among guards; returns the output. */
  static float[] apply(Communicator comm, Op op, float[] in, int n) {
    int world = comm.worldSize();
    float[] send = guarded(in, in.length);
    float[] recv = guarded(new float[0], op.outLen(world, n));
    switch (op) {
      case ALL_REDUCE -> {
        comm.allReduce(send, OFF, n);
        recv = send;
      }
      case ALL_GATHER -> comm.allGather(send, OFF, n, recv, OFF);
      case REDUCE_SCATTER -> comm.reduceScatter(send, OFF, n, recv, OFF);
      case ALL_TO_ALL -> comm.allToAll(send, OFF, n, recv, OFF);
    }
    if (op != Op.ALL_REDUCE && !Arrays.equals(send, guarded(in, in.length))) {
      throw new AssertionError(op + " modified its send buffer");
    }
    int len = op.outLen(world, n);
    for (int i = 0; i < OFF; i++) {
      if (recv[i] != GUARD || recv[OFF + len + i] != GUARD) {
        throw new AssertionError(op + " wrote outside its output range");
      }
    }
    return Arrays.copyOfRange(recv, OFF, OFF + len);
  }

  private static float[] guarded(float[] body, int len) {
    float[] a = new float[len + 2 * OFF];
    Arrays.fill(a, GUARD);
    Arrays.fill(a, OFF, OFF + len, 0f);
    System.arraycopy(body, 0, a, OFF, body.length);
    return a;
  }

  /**
   * The float64 oracle for rank {@code rank}: {@code [0]} the exact result, {@code [1]} the sum of the absolute
   * values that make up each element (the scale errors are measured against), {@code [2]} the float32 sum the exact
   * transport must return bit for bit: the owner of the element adds its peers in rank order from +0, then its own
   * value ({@link TwoShot}; the all-reduce owner of element j is rank {@code j / ceil(n/R)}).
   */
  static double[][] oracle(Op op, float[][] inputs, int rank, int n) {
    int world = inputs.length;
    int len = op.outLen(world, n);
    int rp = (n + world - 1) / world;
    double[][] out = new double[3][len];
    for (int j = 0; j < len; j++) {
      int owner = op == Op.ALL_REDUCE ? j / Math.max(1, rp) : rank;
      float peers = 0f;
      float own = 0f;
      for (int q = 0; q < world; q++) {
        int src = source(op, world, n, rank).applyAsInt(q, j);
        if (src >= 0) {
          out[0][j] += inputs[q][src];
          out[1][j] += Math.abs(inputs[q][src]);
          if (q == owner) {
            own = inputs[q][src];
          } else {
            peers += inputs[q][src];
          }
        }
      }
      boolean reduces = op == Op.ALL_REDUCE || op == Op.REDUCE_SCATTER;
      out[2][j] = reduces && world > 1 ? peers + own : out[0][j]; // one rank: the identity
    }
    return out;
  }

  /** Index into rank q's input that output element j of {@code rank} comes from, or -1 if none. */
  private static IntBinaryOperator source(Op op, int world, int n, int rank) {
    return switch (op) {
      case ALL_REDUCE -> (q, j) -> j;
      case ALL_GATHER -> (q, j) -> j / n == q ? j % n : -1;
      case REDUCE_SCATTER -> (q, j) -> rank * n + j;
      case ALL_TO_ALL -> (q, j) -> j / n == q ? rank * n + j % n : -1;
    };
  }

  /**
   * Bytes rank {@code rank} puts on the wire for one {@code op} of chunk size {@code n}, given the payload size
   * {@code size(rows)} of one {@code rows x 1} chunk: the all-reduce sends {@code R-1} chunks of {@code ceil(n/R)} rows
   * in each of its two phases (padding rows included), the others {@code R-1} chunks of {@code n}.
   */
  static long wireBytes(Op op, int world, int n, java.util.function.IntUnaryOperator size) {
    if (n == 0 || world == 1) {
      return 0;
    }
    if (op != Op.ALL_REDUCE) {
      return (long) (world - 1) * size.applyAsInt(n);
    }
    return 2L * (world - 1) * size.applyAsInt((n + world - 1) / world);
  }

  /** Outputs {@code out[size][op][rank]} and bytes sent {@code bytes[size][op][rank]} of {@link #runAll}. */
  record Results(float[][][][] out, long[][][] bytes) {}

  /**
   * Runs every op at every size of {@link #SIZES}, in that order, on one fresh group of {@code world} ranks whose
   * communicators are first passed through {@code wrap} (identity for the exact transport).
   */
  static Results runAll(int world, long seed, Function<Communicator, Communicator> wrap) {
    Op[] ops = Op.values();
    float[][][][] out = new float[SIZES.length][ops.length][world][];
    long[][][] bytes = new long[SIZES.length][ops.length][world];
    LocalGroup.run(world, comm -> {
      Communicator c = wrap.apply(comm);
      int r = c.rank();
      for (int s = 0; s < SIZES.length; s++) {
        for (Op op : ops) {
          long before = c.bytesSent();
          out[s][op.ordinal()][r] = apply(c, op, input(op, world, SIZES[s], r, seed), SIZES[s]);
          bytes[s][op.ordinal()][r] = c.bytesSent() - before;
        }
      }
      return null;
    });
    return new Results(out, bytes);
  }

  /** The inputs of all ranks for one op and size, as {@link #runAll} generated them. */
  static float[][] inputs(Op op, int world, int n, long seed) {
    float[][] in = new float[world][];
    for (int q = 0; q < world; q++) {
      in[q] = input(op, world, n, q, seed);
    }
    return in;
  }
}
