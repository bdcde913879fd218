package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.I2S;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.LT;
import static jdk.incubator.vector.VectorOperators.MAX;
import static jdk.incubator.vector.VectorOperators.S2I;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Bytes;
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
final class Bf16Lanes implements ElementLanes {

  private static final int L = Lanes.L;
  /** Codes, as many as {@link Lanes#L}. */
  private static final VectorSpecies<Short> S = VectorSpecies.of(short.class, VectorShape.forBitSize(16 * L));
  /** The bytes of {@link #S}. */
  private static final VectorSpecies<Byte> SB = S.withLanes(byte.class);

  @Override
  public long encode(float[] x, int off, int n, byte[] out, int outOff) {
    long sat = 0;
    IntVector top = IntVector.zero(Lanes.I);
    int i = 0;
    for (; i <= n - L; i += L) {
      IntVector bits = FloatVector.fromArray(Lanes.F, x, off + i).reinterpretAsInts();
      IntVector abs = bits.and(Lanes.ABS);
      top = top.max(abs);
      IntVector hi = bits.lanewise(LSHR, 16);
      IntVector c = bits.add(0x7FFF).add(hi.and(1)).lanewise(LSHR, 16).blend(hi.or(0x0040), abs.compare(GT, Lanes.INF));
      VectorMask<Integer> over = c.and(0x7FFF).compare(EQ, 0x7F80).and(abs.compare(LT, Lanes.INF));
      sat += over.trueCount();
      ((ShortVector) c.blend(c.and(0x8000).or(Bf16.MAX_CODE), over).convertShape(I2S, S, 0)).reinterpretAsBytes()
          .intoArray(out, outOff + 2 * i);
    }
    boolean nonFinite = top.reduceLanes(MAX) >= Lanes.INF;
    for (; i < n; i++) {
      short c = Bf16.encodeSaturating(x[off + i]);
      Bytes.putU16(out, outOff + 2 * i, c);
      sat += c != Bf16.encode(x[off + i]) ? 1 : 0;
      nonFinite |= !Float.isFinite(x[off + i]);
    }
    return nonFinite ? sat | Lanes.NON_FINITE : sat;
  }

  @Override
  public int firstNonFinite(byte[] in, int inOff, int n) {
    int i = 0;
    int w = Lanes.SCAN.length() / 2; // codes in a vector of the widest shape
    for (; i <= n - 4 * w; i += 4 * w) { // four vectors a test, by the largest exponent field; the loop below finds it
      ShortVector m = ByteVector.fromArray(Lanes.SCAN, in, inOff + 2 * i).reinterpretAsShorts().and((short) 0x7F80)
          .max(ByteVector.fromArray(Lanes.SCAN, in, inOff + 2 * (i + w)).reinterpretAsShorts().and((short) 0x7F80))
          .max(ByteVector.fromArray(Lanes.SCAN, in, inOff + 2 * (i + 2 * w)).reinterpretAsShorts().and((short) 0x7F80))
          .max(ByteVector.fromArray(Lanes.SCAN, in, inOff + 2 * (i + 3 * w)).reinterpretAsShorts()
              .and((short) 0x7F80));
      if (m.compare(EQ, (short) 0x7F80).anyTrue()) {
        break;
      }
    }
    for (; i <= n - L; i += L) {
      VectorMask<Short> bad = ByteVector.fromArray(SB, in, inOff + 2 * i).reinterpretAsShorts().and((short) 0x7F80)
          .compare(EQ, (short) 0x7F80);
      if (bad.anyTrue()) {
        return i + bad.firstTrue();
      }
    }
    for (; i < n; i++) {
      if (Bf16.isNonFinite((short) Bytes.getU16(in, inOff + 2 * i))) {
        return i;
      }
    }
    return -1;
  }

  @Override
  public void decode(byte[] in, int inOff, int n, float[] out, int outOff, boolean accumulate) {
    int i = 0;
    for (; i <= n - L; i += L) {
      FloatVector v = ((IntVector) ByteVector.fromArray(SB, in, inOff + 2 * i).reinterpretAsShorts()
          .convertShape(S2I, Lanes.I, 0)).lanewise(LSHL, 16).reinterpretAsFloats();
      if (accumulate) {
        FloatVector.fromArray(Lanes.F, out, outOff + i).add(v).intoArray(out, outOff + i);
      } else {
        v.intoArray(out, outOff + i);
      }
    }
    for (; i < n; i++) {
      float v = Bf16.decode((short) Bytes.getU16(in, inOff + 2 * i));
      out[outOff + i] = accumulate ? out[outOff + i] + v : v;
    }
  }
}
