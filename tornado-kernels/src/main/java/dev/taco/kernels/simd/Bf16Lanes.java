package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.I2S;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.LT;
import static jdk.incubator.vector.VectorOperators.S2I;

import dev.taco.kernels.Bf16;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * The body of the {@code none} codec on lanes: bfloat16 codes, 2 bytes little-endian per value, written with
 * {@link Bf16#encodeSaturating} and read with {@link Bf16#decode}, bit for bit. Rounding is the same integer add of
 * {@code 0x7FFF + lsb} on the float's bits; a NaN keeps its sign and top payload bits with the quiet bit set. Codes
 * move between int lanes and the byte array as short lanes reinterpreted as bytes (little-endian, as the Vector API
 * defines reinterpretation).
 */
public final class Bf16Lanes {
  private Bf16Lanes() {}

  private static final int L = Lanes.L;
  /** Codes, as many as {@link Lanes#L}. */
  private static final VectorSpecies<Short> S = VectorSpecies.of(short.class, VectorShape.forBitSize(16 * L));
  /** The bytes of {@link #S}. */
  private static final VectorSpecies<Byte> SB = S.withLanes(byte.class);

  /**
   * Encodes {@code x[off .. off + n)} to bf16 codes at {@code out[outOff ..]} (2 bytes each, little-endian).
   *
   * @return how many finite values saturated to +-max (they would round to +-Inf)
   */
  public static long encode(float[] x, int off, int n, byte[] out, int outOff) {
    long sat = 0;
    for (int i = 0; i < n; i += L) {
      VectorMask<Float> m = Lanes.F.indexInRange(i, n);
      IntVector bits = FloatVector.fromArray(Lanes.F, x, off + i, m).reinterpretAsInts();
      IntVector abs = bits.and(Lanes.ABS);
      IntVector hi = bits.lanewise(LSHR, 16);
      IntVector c = bits.add(0x7FFF).add(hi.and(1)).lanewise(LSHR, 16).blend(hi.or(0x0040), abs.compare(GT, Lanes.INF));
      VectorMask<Integer> over = c.and(0x7FFF).compare(EQ, 0x7F80).and(abs.compare(LT, Lanes.INF));
      sat += over.and(m.cast(Lanes.I)).trueCount();
      ((ShortVector) c.blend(c.and(0x8000).or(Bf16.MAX_CODE), over).convertShape(I2S, S, 0)).reinterpretAsBytes()
          .intoArray(out, outOff + 2 * i, SB.indexInRange(2 * i, 2 * n));
    }
    return sat;
  }

  /** The index of the first NaN/Inf code ({@link Bf16#isNonFinite}) of the {@code n} at {@code in[inOff]}, or -1. */
  public static int firstNonFinite(byte[] in, int inOff, int n) {
    for (int i = 0; i < n; i += L) {
      VectorMask<Short> bad = ByteVector.fromArray(SB, in, inOff + 2 * i, SB.indexInRange(2 * i, 2 * n))
          .reinterpretAsShorts().and((short) 0x7F80).compare(EQ, (short) 0x7F80);
      if (bad.anyTrue()) {
        return i + bad.firstTrue();
      }
    }
    return -1;
  }

  /** {@code out[outOff + i] (+)= decode(code i)} for the {@code n} codes at {@code in[inOff]}. */
  public static void decode(byte[] in, int inOff, int n, float[] out, int outOff, boolean accumulate) {
    for (int i = 0; i < n; i += L) {
      VectorMask<Float> m = Lanes.F.indexInRange(i, n);
      FloatVector v = ((IntVector) ByteVector.fromArray(SB, in, inOff + 2 * i, SB.indexInRange(2 * i, 2 * n))
          .reinterpretAsShorts().convertShape(S2I, Lanes.I, 0)).lanewise(LSHL, 16).reinterpretAsFloats();
      if (accumulate) {
        FloatVector.fromArray(Lanes.F, out, outOff + i, m).add(v).intoArray(out, outOff + i, m);
      } else {
        v.intoArray(out, outOff + i, m);
      }
    }
  }
}
