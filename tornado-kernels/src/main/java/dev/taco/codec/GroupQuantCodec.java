package dev.taco.codec;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.Fp4;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.simd.Fp4Lanes;
import dev.taco.kernels.simd.GroupLanes;
import dev.taco.kernels.simd.Lanes;
import dev.taco.kernels.simd.RowSplit;
import dev.taco.kernels.simd.Simd;

/**
 * The shared body of the absmax-per-group baselines ({@code int8-group}, {@code int4-group}, {@code fp8-group},
 * {@code hadamard-int8}, {@code fp8-tensor}, {@code mxfp4}, {@code nvfp4}): one scale per group from its absmax and
 * one code per value, by {@link GroupKernels} (which documents numerics, layout and the non-finite markers). A
 * subclass fixes the name, codec id, code kind, transform and G; this class validates, sizes and calls the kernels.
 *
 * <p>Wire format: {@link PayloadHeader} (format 1 for the E4M3 codecs, else 0; flags bit0 for Hadamard; G, or 0
 * for {@code fp8-tensor}), then the body: the scales ({@link GroupKernels#scaleBytes}: {@code nScales} float32 LE
 * absmaxes, or the E2M1 kinds' scale bytes), then the codes ({@link GroupKernels#codeBytes}). The E2M1 kinds count the
 * values they clip as saturated; under {@link Simd} they run {@link Fp4Lanes} for finite input and for bodies without
 * marker codes, and the scalar kernels for the others (NaN/Inf handling is theirs alone).
 */
public abstract class GroupQuantCodec extends AbstractCodec {

  private final String name;
  private final int codecId;
  private final int groupSize;
  private final int kind;
  private final boolean hadamard;

  /**
   * @param name the codec's name
   * @param codecId its {@link PayloadHeader} codec id
   * @param groupSize G, a power of two in 32..256; 0 (one group spanning the whole tensor) for fp8-tensor only; the
   *     format's block size for the E2M1 kinds ({@link GroupKernels#blockSize})
   * @param kind {@link GroupKernels#INT8}, {@link GroupKernels#INT4}, {@link GroupKernels#E4M3},
   *     {@link GroupKernels#MXFP4} or {@link GroupKernels#NVFP4}
   * @param hadamard WHT each group before quantising
   * @param nonFinite NaN/Inf policy
   * @throws IllegalArgumentException for a bad G
   */
  GroupQuantCodec(String name, int codecId, int groupSize, int kind, boolean hadamard, NonFinite nonFinite) {
    super(nonFinite);
    this.name = name;
    this.codecId = codecId;
    if (GroupKernels.fp4(kind) && groupSize != GroupKernels.blockSize(kind)) {
      throw new IllegalArgumentException(name() + ": the format fixes the block size at "
          + GroupKernels.blockSize(kind) + ", got " + groupSize);
    }
    // 0 (one group spanning the tensor) is fp8-tensor's alone: for the grouped codecs g=0 is a user's mistake
    if (codecId == PayloadHeader.FP8_TENSOR ? groupSize != 0
        : !GroupKernels.fp4(kind) && !PayloadHeader.validGroupSize(groupSize)) {
      throw new IllegalArgumentException(name() + ": group size must be a power of two in 32..256, got "
          + groupSize);
    }
    this.groupSize = groupSize;
    this.kind = kind;
    this.hadamard = hadamard;
  }

  @Override
  public final String name() {
    return name;
  }

  @Override
  protected final int codecId() {
    return codecId;
  }

  /** G, or 0 for the per-tensor codec. */
  @Override
  public int groupSize() {
    return groupSize;
  }

  /** The code kind ({@link GroupKernels#INT8} ... {@link GroupKernels#NVFP4}). */
  public int kind() {
    return kind;
  }

  /** Whether each group is Walsh-Hadamard transformed before quantising. */
  public boolean hadamard() {
    return hadamard;
  }

  private int format() {
    return kind == GroupKernels.E4M3 ? Fp8Format.E4M3.code() : 0;
  }

  @Override
  protected PayloadHeader header(int rows, int cols) {
    return new PayloadHeader(codecId(), format(), hadamard ? PayloadHeader.FLAG_HADAMARD : 0, groupSize, rows, cols);
  }

  @Override
  protected void checkHeader(PayloadHeader h) {
    if (GroupKernels.fp4(kind)) {
      expectFields(h, format(), hadamard ? PayloadHeader.FLAG_HADAMARD : 0, groupSize);
      return;
    }
    if (groupSize != 0 && !PayloadHeader.validGroupSize(h.groupSize())) {
      throw PayloadHeader.bad(name(), "group size " + h.groupSize() + " is not a power of two in 32..256");
    }
    expectFields(h, format(), hadamard ? PayloadHeader.FLAG_HADAMARD : 0, groupSize == 0 ? 0 : h.groupSize());
  }

  /** The kernel view: {rows, cols, G}; the per-tensor codec is one {@code 1 x n} group. */
  private static int[] view(PayloadHeader h) {
    return h.groupSize() == 0 ? new int[] {1, h.count(), h.count()} : new int[] {h.rows(), h.cols(), h.groupSize()};
  }

  private static long scales(int[] v) {
    return (long) v[0] * TacoKernels.groupsPerRow(v[1], v[2]);
  }

  @Override
  protected long bodyLength(PayloadHeader h) {
    int[] v = view(h);
    return scaleBytes(v) + GroupKernels.codeBytes(v[0], v[1], v[2], kind, hadamard);
  }

  private long scaleBytes(int[] v) {
    return GroupKernels.scaleBytes(v[0], v[1], v[2], kind);
  }

  private static int groupsPerRow(int[] v) {
    return TacoKernels.groupsPerRow(v[1], v[2]);
  }

  /** Code bytes before row {@code r} (rows of codeStride codes; int4 and E2M1 rows are even, two codes a byte). */
  private int rowCodeBytes(int[] v, int r) {
    long codes = (long) r * GroupKernels.codeStride(v[1], v[2], kind, hadamard);
    return (int) (GroupKernels.nibbles(kind) ? codes / 2 : codes);
  }

  private float[] work(int[] v) {
    return new float[hadamard ? (int) scales(v) * v[2] : 0];
  }

  @Override
  protected long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff) {
    int[] v = view(h);
    int codeOff = bodyOff + (int) scaleBytes(v);
    if (GroupKernels.fp4(kind)) {
      return encodeFp4(x, off, v, out, bodyOff, codeOff);
    }
    long flags = 0; // 0, or Lanes.NON_FINITE; |x/absmax| <= 1: no finite value can exceed the code range
    if (Simd.enabled()) {
      flags = RowSplit.run(v[0], v[1], (r0, r1) -> GroupLanes.encode(x, off + r0 * v[1], r1 - r0, v[1], v[2], kind,
          hadamard, out, bodyOff + 4 * r0 * groupsPerRow(v), codeOff + rowCodeBytes(v, r0)));
    } else {
      GroupKernels.encode(x, off, v[0], v[1], v[2], kind, hadamard, work(v), out, bodyOff, codeOff,
          new int[(int) scales(v)]);
    }
    if (hadamard) {
      refuseOverflow(x, off, v, out, bodyOff);
    }
    return flags;
  }

  /**
   * The E2M1 kinds' body: NVFP4's row absmaxes, then scales and codes, by {@link Fp4Lanes} (finite input under
   * {@link Simd}) or the scalar kernels. Returns the count of clipped values, with {@link Lanes#NON_FINITE} under
   * {@link Simd} (whose callers did not scan the input first).
   *
   * @throws IllegalArgumentException for a finite magnitude above {@link GroupKernels#FP4_MAX_INPUT}, naming the
   *     first one's index, row and column
   */
  private long encodeFp4(float[] x, int off, int[] v, byte[] out, int bodyOff, int codeOff) {
    if (fp4Lanes() && Fp4Lanes.inRange(x, off, v[0] * v[1])) {
      int ng = groupsPerRow(v);
      int scaleOff = GroupKernels.scaleAt(bodyOff, v[0], 0, kind);
      return RowSplit.run(v[0], v[1], (r0, r1) -> Fp4Lanes.encode(x, off + r0 * v[1], r1 - r0, v[1], kind, hadamard,
          out, bodyOff + 4 * r0, scaleOff + r0 * ng, codeOff + rowCodeBytes(v, r0)));
    }
    long nonFinite = 0;
    int huge = -1;
    for (int i = 0; i < v[0] * v[1]; i++) {
      float e = Math.abs(x[off + i]);
      if (!(e <= Float.MAX_VALUE)) {
        nonFinite = Lanes.NON_FINITE;
      } else if (e > GroupKernels.FP4_MAX_INPUT && huge < 0) {
        huge = i;
      }
    }
    // a NaN/Inf that policy refuse will refuse (under Simd, after this returns) goes first, as without Simd
    if (huge >= 0 && (nonFinite == 0 || nonFinite() == NonFinite.PROPAGATE)) {
      throw new IllegalArgumentException(name() + ": |x| = " + Math.abs(x[off + huge]) + " at index " + huge
          + " (row " + huge / v[1] + ", col " + huge % v[1] + ") is above 2^119 = " + GroupKernels.FP4_MAX_INPUT
          + ", the largest magnitude " + name() + " takes (its scales and transform must stay inside float32):"
          + " scale the tensor down");
    }
    float[] work = work(v);
    int[] clipped = new int[(int) scales(v)];
    if (kind == GroupKernels.NVFP4) {
      GroupKernels.rowMaxima(x, off, v[0], v[1], v[2], hadamard, work, out, bodyOff);
    }
    GroupKernels.encode(x, off, v[0], v[1], v[2], kind, hadamard, work, out, bodyOff, codeOff, clipped);
    long n = 0;
    for (int c : clipped) {
      n += c;
    }
    return n | (Simd.enabled() ? nonFinite : 0);
  }

  /** Whether the E2M1 kinds run {@link Fp4Lanes} (for finite input, for bodies without markers). */
  private static boolean fp4Lanes() {
    return Simd.enabled() && Fp4Lanes.supported();
  }

  /**
   * Whether the inverse transform of a group of scale {@code a} may overflow float32: the decoder's butterflies add up
   * to G dequantised values of magnitude up to {@code a} before the {@code 1/sqrt(G)} (so a single value of 1e38 in a
   * group of 128, whose forward sums do not overflow, decoded to infinity); a little margin for the sums' rounding.
   */
  private static boolean inverseOverflows(float a, int groupSize) {
    return (double) a * groupSize > Float.MAX_VALUE * (1 - 0x1p-16);
  }

  /**
   * Throws if a group's scale came out non-finite, or so large that the decoder's inverse transform would overflow
   * ({@link #inverseOverflows}): the transform's sums of finite values overflow float32 from about
   * {@code Float.MAX_VALUE / G} up (a group holding NaN/Inf is sent untransformed with a finite scale), and the
   * decoder would refuse the payload as malformed, or decode infinities.
   *
   * @throws IllegalArgumentException naming the group, its row and the group's largest magnitude
   */
  private void refuseOverflow(float[] x, int off, int[] v, byte[] out, int bodyOff) {
    int ng = groupsPerRow(v);
    for (int s = 0; s < v[0] * ng; s++) {
      float a = Bytes.getFloat(out, bodyOff + 4 * s);
      if (!Float.isFinite(a) || inverseOverflows(a, v[2])) {
        int row = s / ng, c0 = (s % ng) * v[2];
        float max = 0f;
        for (int c = c0; c < Math.min(c0 + v[2], v[1]); c++) {
          max = Math.max(max, Math.abs(x[off + row * v[1] + c]));
        }
        throw new IllegalArgumentException(name() + ": the Walsh-Hadamard transform of group " + s % ng + " of row "
            + row + " overflows float32, in the encoder's or the decoder's transform (its largest magnitude is " + max
            + "; the transform adds up to G = " + v[2]
            + " values): scale the tensor down, or use taco, which pre-scales each row by a power of two");
      }
    }
  }

  @Override
  protected String checkBody(PayloadHeader h, byte[] in, int bodyOff) {
    int[] v = view(h);
    boolean fp4 = GroupKernels.fp4(kind);
    String scale = fp4 ? checkFp4Scales(v, in, bodyOff) : null;
    if (scale != null) {
      return scale;
    }
    // the E2M1 kinds' scales are checked above, so only their codes are scanned here (ns = 0)
    int ns = fp4 ? 0 : (int) scales(v);
    int codeOff = bodyOff + (int) scaleBytes(v);
    long nCodes = (long) v[0] * GroupKernels.codeStride(v[1], v[2], kind, hadamard);
    long bad = Simd.enabled()
        ? GroupLanes.firstInvalid(in, bodyOff, codeOff, ns, nCodes, kind, hadamard, h.nonFinite())
        : GroupKernels.firstInvalid(in, bodyOff, codeOff, ns, nCodes, kind, hadamard, h.nonFinite());
    for (int s = 0; bad < 0 && hadamard && s < ns; s++) { // a transformed group (scale >= 0) the inverse overflows
      float a = Bytes.getFloat(in, bodyOff + 4 * s);
      if (Float.floatToRawIntBits(a) >= 0 && inverseOverflows(a, v[2])) {
        return "group " + s + " has scale " + a
            + ", whose inverse transform overflows float32 (over Float.MAX_VALUE / G"
            + " = " + Float.MAX_VALUE / v[2] + "; the encoder refuses such groups)";
      }
    }
    if (bad < 0) {
      return null;
    }
    return bad < ns ? "group " + bad + " has a negative or non-finite scale"
        : "non-finite marker code at code index " + (bad - ns) + " (flag 0x80 not set)";
  }

  /** {@link #checkBody}'s check of the E2M1 kinds' scale bytes (and NVFP4's row absmaxes): what is wrong, or null. */
  private String checkFp4Scales(int[] v, byte[] in, int bodyOff) {
    int ng = groupsPerRow(v);
    long bad = GroupKernels.firstInvalidScale(in, bodyOff, v[0], ng, kind);
    if (bad >= 0 && bad < v[0]) {
      return "row " + bad + " has row absmax " + Bytes.getFloat(in, bodyOff + 4 * (int) bad)
          + " (must be finite, >= +0 and at most 2^123 = " + GroupKernels.NV_MAX_ROW + ")";
    }
    if (bad >= 0) {
      int t = (int) (bad - v[0]);
      int c = in[GroupKernels.scaleAt(bodyOff, v[0], t, kind)] & 0xFF;
      String where = "group " + t + " (row " + t / ng + ") has ";
      if (kind == GroupKernels.MXFP4) {
        return where + String.format("E8M0 scale 0x%02x", c) + (c == Fp4.E8M0_NAN ? ": NaN in the MX format"
            : " = 2^" + (c - 127) + ", above 2^120 (no tensor the encoder takes gives it: its values could overflow"
                + " float32)");
      }
      return where + String.format("E4M3 block scale 0x%02x: ", c) + ((c & 0x7F) == 0x7F ? "NaN" : "negative");
    }
    return null;
  }

  @Override
  protected void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff, boolean accumulate) {
    int[] v = view(h);
    int codeOff = bodyOff + (int) scaleBytes(v);
    if (GroupKernels.fp4(kind) && fp4Lanes() && !h.nonFinite()) {
      int ng = groupsPerRow(v);
      int scaleOff = GroupKernels.scaleAt(bodyOff, v[0], 0, kind);
      RowSplit.run(v[0], v[1], (r0, r1) -> {
        Fp4Lanes.decode(in, bodyOff + 4 * r0, scaleOff + r0 * ng, codeOff + rowCodeBytes(v, r0), r1 - r0, v[1],
            kind, hadamard, out, outOff + r0 * v[1], accumulate);
        return 0;
      });
    } else if (!GroupKernels.fp4(kind) && Simd.enabled()) {
      RowSplit.run(v[0], v[1], (r0, r1) -> {
        GroupLanes.decode(in, bodyOff + 4 * r0 * groupsPerRow(v), codeOff + rowCodeBytes(v, r0), r1 - r0, v[1], v[2],
            kind, hadamard, h.nonFinite(), out, outOff + r0 * v[1], accumulate);
        return 0;
      });
    } else {
      GroupKernels.decode(in, bodyOff, codeOff, v[0], v[1], v[2], kind, hadamard, work(v), out, outOff, accumulate);
    }
  }

  @Override
  public String toString() {
    if (GroupKernels.fp4(kind)) {
      return name() + ":hadamard=" + (hadamard ? "on" : "off") + policySuffix();
    }
    return name() + (groupSize == 0 ? (policySuffix().isEmpty() ? "" : ":" + policySuffix().substring(1))
        : ":g=" + groupSize + policySuffix());
  }
}
