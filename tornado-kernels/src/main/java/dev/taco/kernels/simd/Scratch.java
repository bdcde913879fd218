package dev.taco.kernels.simd;

/**
 * Per-thread scratch arrays of the SIMD kernels, reused from call to call, one array per {@link Slot}. Besides saving
 * the allocations, this keeps small scratch arrays reachable: a small array that C2 proves does not escape a call is
 * "scalar replaced", and vector loads and stores on such an array fall back to scalar Java, several times slower
 * (seen with a 64-float group scratch). Contents are left over from earlier calls; a kernel zeroes what it needs
 * zeroed. Each use has its own slot, so that kernels calling kernels do not share one.
 */
final class Scratch {

  /** The uses, one array each. */
  enum Slot {
    /** A row of floats: TACO encode and decode, hadamard-int8. */
    ROW,
    /** A row's second buffer: decode-reduce's sum, hadamard-int8's transform. */
    ROW2,
    /** One group of floats: the WHT's in-vector stages. */
    GROUP,
    /** Per-group ints of a row: absmax bits. */
    BITS,
    /** Per-group ints of a row: pre-scale exponents. */
    EXPONENTS,
    /** Per-group ints of a row: fine exponents. */
    FINE,
    /** Per-group floats of a row: pre-scales, decode multipliers. */
    FACTORS,
    /** Per-group floats of a row: encode multipliers. */
    MULTIPLIERS,
    /** A zero-padded vector: a row's last values. */
    TAIL,
    /** A zero-padded vector of codes: a row's last codes. */
    TAIL_CODES
  }

  private static final ThreadLocal<Scratch> LOCAL = ThreadLocal.withInitial(Scratch::new);

  private final float[][] floats = new float[Slot.values().length][];
  private final int[][] ints = new int[Slot.values().length][];
  private final byte[][] bytes = new byte[Slot.values().length][];

  private Scratch() {}

  /** This thread's scratch. */
  static Scratch get() {
    return LOCAL.get();
  }

  /** Slot {@code s}'s floats, at least {@code n} of them. */
  float[] floats(Slot s, int n) {
    float[] a = floats[s.ordinal()];
    if (a == null || a.length < n) {
      floats[s.ordinal()] = a = new float[n];
    }
    return a;
  }

  /** Slot {@code s}'s ints, at least {@code n} of them. */
  int[] ints(Slot s, int n) {
    int[] a = ints[s.ordinal()];
    if (a == null || a.length < n) {
      ints[s.ordinal()] = a = new int[n];
    }
    return a;
  }

  /** Slot {@code s}'s bytes, at least {@code n} of them. */
  byte[] bytes(Slot s, int n) {
    byte[] a = bytes[s.ordinal()];
    if (a == null || a.length < n) {
      bytes[s.ordinal()] = a = new byte[n];
    }
    return a;
  }
}
