package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.MAX;

import dev.taco.kernels.Bytes;
import java.lang.foreign.MemorySegment;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;

/**
 * The body of the {@code fp32} codec on lanes: float32 values, 4 bytes little-endian each, bits unchanged. Float lanes
 * go to and from the byte array as byte lanes reinterpreted (the Vector API defines that reinterpretation as
 * little-endian); a plain decode is a {@link MemorySegment#copy} bulk copy.
 */
final class Fp32Lanes implements ElementLanes {

  private static final int L = Lanes.L;

  @Override
  public long encode(float[] x, int off, int n, byte[] out, int outOff) {
    IntVector top = IntVector.zero(Lanes.I);
    int i = 0;
    for (; i <= n - L; i += L) {
      FloatVector v = FloatVector.fromArray(Lanes.F, x, off + i);
      top = top.max(v.reinterpretAsInts().and(Lanes.ABS));
      v.reinterpretAsBytes().intoArray(out, outOff + 4 * i);
    }
    boolean nonFinite = top.reduceLanes(MAX) >= Lanes.INF;
    for (; i < n; i++) {
      Bytes.putFloat(out, outOff + 4 * i, x[off + i]);
      nonFinite |= !Float.isFinite(x[off + i]);
    }
    return nonFinite ? Lanes.NON_FINITE : 0;
  }

  @Override
  public int firstNonFinite(byte[] in, int inOff, int n) {
    int i = 0;
    for (; i <= n - 4 * L; i += 4 * L) { // four vectors a test; the loop below finds the vector
      IntVector m = ByteVector.fromArray(Lanes.FB, in, inOff + 4 * i).reinterpretAsInts().and(Lanes.ABS)
          .max(ByteVector.fromArray(Lanes.FB, in, inOff + 4 * (i + L)).reinterpretAsInts().and(Lanes.ABS))
          .max(ByteVector.fromArray(Lanes.FB, in, inOff + 4 * (i + 2 * L)).reinterpretAsInts().and(Lanes.ABS))
          .max(ByteVector.fromArray(Lanes.FB, in, inOff + 4 * (i + 3 * L)).reinterpretAsInts().and(Lanes.ABS));
      if (m.compare(GE, Lanes.INF).anyTrue()) {
        break;
      }
    }
    for (; i <= n - L; i += L) {
      VectorMask<Integer> bad = ByteVector.fromArray(Lanes.FB, in, inOff + 4 * i).reinterpretAsInts().and(Lanes.ABS)
          .compare(GE, Lanes.INF);
      if (bad.anyTrue()) {
        return i + bad.firstTrue();
      }
    }
    for (; i < n; i++) {
      if (!Float.isFinite(Bytes.getFloat(in, inOff + 4 * i))) {
        return i;
      }
    }
    return -1;
  }

  @Override
  public void decode(byte[] in, int inOff, int n, float[] out, int outOff, boolean accumulate) {
    if (!accumulate) {
      MemorySegment.copy(MemorySegment.ofArray(in), Lanes.F32_LE, inOff, out, outOff, n);
      return;
    }
    int i = 0;
    for (; i <= n - L; i += L) {
      FloatVector.fromArray(Lanes.F, out, outOff + i)
          .add(ByteVector.fromArray(Lanes.FB, in, inOff + 4 * i).reinterpretAsFloats()).intoArray(out, outOff + i);
    }
    for (; i < n; i++) {
      out[outOff + i] += Bytes.getFloat(in, inOff + 4 * i);
    }
  }
}
