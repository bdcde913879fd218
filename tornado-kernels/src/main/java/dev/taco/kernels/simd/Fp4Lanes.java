package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.I2B;
import static jdk.incubator.vector.VectorOperators.LSHR;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Fp4;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.TacoKernels;
import java.util.Arrays;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;

/**
 * The E2M1 kinds of {@link GroupKernels} ({@code mxfp4}, {@code nvfp4}) on lanes: {@link GroupKernels#encode} (with
 * NVFP4's {@link GroupKernels#rowMaxima}) and {@link GroupKernels#decode}, same bytes, clip counts and float bits, for
 * finite input and for bodies without marker codes (the codec runs the reference for the others, so that NaN/Inf
 * handling is the reference's). Layout, numerics and arguments are those of {@link GroupKernels}.
 *
 * <p>Per value the same float operations: encode {@code v / a} ({@code qm} is 1, and {@code * 1} is exact), then
 * {@link Fp4#encodeE2M1}'s threshold count on the bits, lane by lane; decode {@code D(q) * a} with {@code D} looked
 * up from a table of {@link GroupKernels#dequantise}. Scales are per group and scalar, by {@link GroupKernels#putScale}
 * and {@link GroupKernels#getScale} themselves. A row at a time, zero-padded to whole groups in scratch when its last
 * group is short (the reference pads the same way; a zero's code is 0, so the padding codes are the reference's).
 * One vector of codes is 16 nibbles, 8 bytes: these kernels need 16 float lanes ({@link #supported}).
 */
public final class Fp4Lanes {
  private Fp4Lanes() {}

  private static final int L = Lanes.L;
  /** 16 lanes: a vector of codes is 8 bytes and G (16 or 32) is whole vectors. */
  private static final boolean SUPPORTED = L == 16;
  /** The float bits of {@link GroupKernels#dequantise} of each nibble, 8 (the marker) giving NaN. */
  private static final IntVector VALUES = SUPPORTED ? IntVector.fromArray(Lanes.I, values(), 0) : null;
  /** The bits of the rounding thresholds of {@link Fp4#encodeE2M1}: a magnitude's code is how many it is above. */
  private static final int[] THRESHOLDS = {0x3E800000, 0x3F3FFFFF, 0x3FA00000, 0x3FDFFFFF, 0x40200000, 0x405FFFFF,
      0x40A00000};
  /** The float bits of {@link Fp4#E2M1_MAX}: a larger {@code |v / a|} coded 6 was clipped. */
  private static final int MAX_BITS = Float.floatToRawIntBits(Fp4.E2M1_MAX);

  private static int[] values() {
    int[] t = new int[16];
    for (int i = 0; i < 16; i++) {
      t[i] = Float.floatToRawIntBits(GroupKernels.dequantise(i, GroupKernels.MXFP4));
    }
    return t;
  }

  /**
   * One call's shape and work arrays ({@link Scratch}): G, groups and padded width of a row, its code stride; a row
   * (and its transform), per-group absmax bits and scales, a row's codes when its last group is short.
   */
  private static final class Work {
    final int g;
    final int ng;
    final int width;
    final int stride;
    final float[] row;
    final float[] t;
    final int[] bits;
    final float[] a;
    final byte[] padded;

    Work(int cols, int kind, boolean hadamard) {
      g = GroupKernels.blockSize(kind);
      ng = TacoKernels.groupsPerRow(cols, g);
      width = ng * g;
      stride = (int) GroupKernels.codeStride(cols, g, kind, hadamard);
      Scratch s = Scratch.get();
      row = s.floats(Scratch.Slot.ROW, width);
      t = hadamard ? s.floats(Scratch.Slot.ROW2, width) : null;
      bits = s.ints(Scratch.Slot.BITS, ng);
      a = s.floats(Scratch.Slot.FACTORS, ng);
      padded = s.bytes(Scratch.Slot.TAIL_CODES, width / 2);
    }
  }

  /** True when these kernels run on this machine (16 float lanes); else the codec runs the reference. */
  public static boolean supported() {
    return SUPPORTED;
  }

  /**
   * Whether every value of {@code x[off .. off + n)} is finite and at most {@link GroupKernels#FP4_MAX_INPUT} in
   * magnitude (the input {@link #encode} takes; else the codec scans it with the reference for its error).
   */
  public static boolean inRange(float[] x, int off, int n) {
    return Lanes.absMaxBits(x, off, n) <= Float.floatToRawIntBits(GroupKernels.FP4_MAX_INPUT);
  }

  /**
   * Encodes {@code rows x cols} finite floats from {@code x[xOff]} as {@link GroupKernels#encode} does (NVFP4's row
   * absmaxes included), row r's parts at: its float32 LE row absmax {@code out[rowMaxOff + 4r]} (NVFP4 only), its
   * {@code ng} scale bytes from {@code out[scaleOff + r * ng]}, its codes from byte
   * {@code out[codeOff + r * codeStride / 2]}.
   *
   * @param kind {@link GroupKernels#MXFP4} or {@link GroupKernels#NVFP4}
   * @return how many values were clipped ({@link GroupKernels#encode}'s {@code clipped}, summed)
   */
  public static long encode(float[] x, int xOff, int rows, int cols, int kind, boolean hadamard, byte[] out,
      int rowMaxOff, int scaleOff, int codeOff) {
    Work w = new Work(cols, kind, hadamard);
    long clipped = 0;
    for (int r = 0; r < rows; r++) {
      float[] v = x;
      int at = xOff + r * cols;
      if (w.width != cols) {
        System.arraycopy(x, at, w.row, 0, cols);
        Arrays.fill(w.row, cols, w.width, 0f);
        v = w.row;
        at = 0;
      }
      if (hadamard) {
        HadamardLanes.transform(v, at, null, w.g, w.ng, w.t, 0, w.bits);
        v = w.t;
        at = 0;
      } else {
        Lanes.groupMaxBits(v, at, w.ng, w.g, w.bits);
      }
      float rowMax = 0f;
      if (kind == GroupKernels.NVFP4) {
        for (int k = 0; k < w.ng; k++) {
          rowMax = Math.max(rowMax, Float.intBitsToFloat(w.bits[k]));
        }
        Bytes.putFloat(out, rowMaxOff + 4 * r, rowMax);
      }
      for (int k = 0; k < w.ng; k++) {
        w.a[k] = GroupKernels.putScale(out, scaleOff + r * w.ng + k, Float.intBitsToFloat(w.bits[k]), rowMax, kind);
      }
      int dst = codeOff + (int) ((long) r * w.stride / 2);
      if (w.stride == w.width) {
        clipped += codes(v, at, w.ng, w.g, w.a, out, dst);
      } else { // a short last group without the transform: the row's codes end before the padding's
        clipped += codes(v, at, w.ng, w.g, w.a, w.padded, 0);
        System.arraycopy(w.padded, 0, out, dst, w.stride / 2);
      }
    }
    return clipped;
  }

  /**
   * The E2M1 codes of {@code v / a[k]} (0 where {@code a[k] = 0}) for the {@code ng} groups of {@code g} values from
   * {@code v[at]}, two a byte from {@code out[o]}; returns how many were clipped ({@link GroupKernels#clips}).
   */
  private static long codes(float[] v, int at, int ng, int g, float[] a, byte[] out, int o) {
    long clipped = 0;
    for (int k = 0; k < ng; k++) {
      float ak = a[k];
      VectorMask<Integer> zero = Lanes.I.maskAll(ak == 0f);
      for (int i = k * g; i < (k + 1) * g; i += L) {
        IntVector b = FloatVector.fromArray(Lanes.F, v, at + i).div(ak).reinterpretAsInts().blend(0, zero);
        IntVector m = b.and(Lanes.ABS);
        IntVector c = IntVector.zero(Lanes.I);
        for (int th : THRESHOLDS) {
          c = c.add(1, m.compare(GT, th));
        }
        clipped += c.compare(EQ, 7).and(m.compare(GT, MAX_BITS)).trueCount();
        // the sign bit, but for a value that rounds to zero: -0 is the marker, so it goes as +0
        c = c.or(b.lanewise(LSHR, 28).and(8).blend(0, c.compare(EQ, 0)));
        GroupLanes.packNibbles((ByteVector) c.convertShape(I2B, Lanes.B, 0), out, o + (i >> 1));
      }
    }
    return clipped;
  }

  /**
   * Decodes (or accumulates into) {@code out[outOff ..]}, {@code rows x cols}, as {@link GroupKernels#decode} does, a
   * validated body without marker codes (its header's non-finite flag clear), its parts at the offsets of
   * {@link #encode}.
   */
  public static void decode(byte[] in, int rowMaxOff, int scaleOff, int codeOff, int rows, int cols, int kind,
      boolean hadamard, float[] out, int outOff, boolean accumulate) {
    Work w = new Work(cols, kind, hadamard);
    for (int r = 0; r < rows; r++) {
      float rowMax = kind == GroupKernels.NVFP4 ? Bytes.getFloat(in, rowMaxOff + 4 * r) : 0f;
      for (int k = 0; k < w.ng; k++) {
        w.a[k] = Math.abs(GroupKernels.getScale(in, scaleOff + r * w.ng + k, rowMax, kind));
      }
      byte[] codes = in;
      int c0 = codeOff + (int) ((long) r * w.stride / 2);
      if (w.stride != w.width) {
        System.arraycopy(in, c0, w.padded, 0, w.stride / 2);
        Arrays.fill(w.padded, w.stride / 2, w.width / 2, (byte) 0);
        codes = w.padded;
        c0 = 0;
      }
      int dst = outOff + r * cols;
      boolean direct = w.width == cols && !(hadamard && accumulate);
      values(codes, c0, w.ng, w.g, w.a, direct && !hadamard ? out : w.row, direct && !hadamard ? dst : 0,
          accumulate && direct);
      if (hadamard) {
        HadamardLanes.transform(w.row, 0, null, w.g, w.ng, direct ? out : w.t, direct ? dst : 0, w.bits);
      }
      if (!direct) {
        Lanes.put(hadamard ? w.t : w.row, 0, cols, out, dst, accumulate);
      }
    }
  }

  /**
   * {@code out[dst + i] (+)= D(q_i) * a[k]} for the codes of the {@code ng} groups of {@code g} from byte
   * {@code codes[c0]} (nibble {@code i & 1} of byte {@code i >> 1}, low first).
   */
  private static void values(byte[] codes, int c0, int ng, int g, float[] a, float[] out, int dst,
      boolean accumulate) {
    for (int k = 0; k < ng; k++) {
      float ak = a[k];
      for (int i = k * g; i < (k + 1) * g; i += L) {
        IntVector q = GroupLanes.nibblesAtTop(codes, c0 + (i >> 1)).lanewise(LSHR, 28);
        FloatVector v = VALUES.rearrange(q.toShuffle()).reinterpretAsFloats().mul(ak);
        if (accumulate) {
          FloatVector.fromArray(Lanes.F, out, dst + i).add(v).intoArray(out, dst + i);
        } else {
          v.intoArray(out, dst + i);
        }
      }
    }
  }
}
