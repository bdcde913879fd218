package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.GE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;

/**
 * The body of the {@code fp32} codec on lanes: float32 values, 4 bytes little-endian each, bits unchanged. Values are
 * read from the byte array as byte lanes reinterpreted as float lanes (the Vector API defines that reinterpretation
 * as little-endian); copies are {@link MemorySegment#copy} bulk copies.
 */
public final class Fp32Lanes {
  private Fp32Lanes() {}

  private static final int L = Lanes.L;
  private static final ValueLayout.OfFloat LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

  /** Writes {@code x[off .. off + n)} at {@code out[outOff ..]}, 4 bytes each, little-endian. */
  public static void encode(float[] x, int off, int n, byte[] out, int outOff) {
    MemorySegment.copy(x, off, MemorySegment.ofArray(out), LE, outOff, n);
  }

  /** The index of the first NaN/Inf among the {@code n} values at {@code in[inOff]}, or -1. */
  public static int firstNonFinite(byte[] in, int inOff, int n) {
    for (int i = 0; i < n; i += L) {
      VectorMask<Byte> m = Lanes.FB.indexInRange(4 * i, 4 * n);
      VectorMask<Integer> bad = ByteVector.fromArray(Lanes.FB, in, inOff + 4 * i, m).reinterpretAsInts()
          .and(Lanes.ABS).compare(GE, Lanes.INF);
      if (bad.anyTrue()) {
        return i + bad.firstTrue();
      }
    }
    return -1;
  }

  /** {@code out[outOff + i] (+)= value i} for the {@code n} values at {@code in[inOff]}. */
  public static void decode(byte[] in, int inOff, int n, float[] out, int outOff, boolean accumulate) {
    if (!accumulate) {
      MemorySegment.copy(MemorySegment.ofArray(in), LE, inOff, out, outOff, n);
      return;
    }
    for (int i = 0; i < n; i += L) {
      VectorMask<Float> m = Lanes.F.indexInRange(i, n);
      FloatVector v = ByteVector.fromArray(Lanes.FB, in, inOff + 4 * i, Lanes.FB.indexInRange(4 * i, 4 * n))
          .reinterpretAsFloats();
      FloatVector.fromArray(Lanes.F, out, outOff + i, m).add(v).intoArray(out, outOff + i, m);
    }
  }
}
