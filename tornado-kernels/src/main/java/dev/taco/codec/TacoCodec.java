package dev.taco.codec;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.simd.RowSplit;
import dev.taco.kernels.simd.Simd;
import dev.taco.kernels.simd.TacoDecodeLanes;
import dev.taco.kernels.simd.TacoLanes;
import java.util.Arrays;
import java.util.List;

/**
 * {@code taco}: the TACO FP8 codec of docs/design.md §3 (after arXiv 2604.24088): ASH pre-scale, Walsh-Hadamard transform
 * and Dual-Scale FP8 quantisation of groups of {@code G} contiguous values along each row. The numerics, their
 * guarantees (no saturation for any finite input; no zero collapse for groups down to about 2^-245 of their row's
 * max) and their limits are documented on {@link TacoKernels}, which holds the kernels; this class validates,
 * writes the header and calls them.
 *
 * <p><b>Parameters.</b> {@code G} in {32, 64, 128, 256}, default {@value #DEFAULT_GROUP}. Measured relative L2
 * error, E4M3, 64 x 4096, one seed ({@code GroupSizeTableTest} prints it):
 * <pre>
 *   G     gaussian  laplace+0.1%outliers  1%-outlier-channels  (their ordinary values)  bytes/el
 *   32    2.66 %    2.39 %                2.66 %               13.2 %                   1.032
 *   64    2.65 %    2.11 %                2.60 %               13.0 %                   1.017
 *   128   2.65 %    2.56 %                2.67 %               13.4 %                   1.009
 *   256   2.65 %    2.38 %                2.66 %               13.4 %                   1.005
 *   no Hadamard (any G)  2.65 %  1.79 %   2.48 %                2.65 %
 *   int8-group G=128     0.64 %  1.70 %   2.31 %               11.7 %                   1.031
 * </pre>
 * The error hardly depends on G; 64 was lowest or tied on every input at 1.6 % byte overhead, and a small group
 * confines what one outlier does to its neighbours, so it is the default (256 would save 1.2 % of the bytes).
 * Note the last column: FP8 is a floating-point format, so without the transform each value keeps its own ~2.6 %
 * relative error, while the transform spreads an outlier's error over its whole group (5x the error on ordinary
 * values next to outlier channels). On these inputs the Hadamard transform does not help FP8; it is on by default
 * because it is the reference design, and {@code hadamard=off} is one flag away. Format {@link Fp8Format#E4M3}
 * (default) or {@link Fp8Format#E5M2} (about twice the error: 2 mantissa bits). {@code alpha} in [0, 1]
 * (default 1): the ASH strength. Because the pre-scale and the fine scale are both per-group powers of two and a
 * scalar commutes with the transform, the fine exponent re-normalises every group whatever alpha did: alpha does
 * <b>not</b> change the payload or the error (tested: bit-identical bodies for alpha 0, 0.5, 1); it only changes
 * the range the float32 transform works in (alpha = 1 puts every group's max in [1, 2) before the transform). It
 * is kept for parity with the paper and recorded in the header's ASH flag. Hadamard on (default) or off.
 *
 * <p><b>Wire format.</b> {@link PayloadHeader} (codec id 4, format 1/2, flags bit0 Hadamard, bit1 ASH, G), then
 * the body: {@code rows} float32 coarse scales, {@code rows*ng} fine-exponent bytes, {@code rows*ng*G} FP8 codes,
 * with {@code ng = ceil(cols/G)} (rows padded to a multiple of G). Size:
 * {@code 28 + 4 rows + rows*ng*(G+1)} bytes, i.e. about {@code 1 + 1/G + 4/cols} bytes per element (+28/n for the
 * header; more when cols is not a multiple of G). Decoding reads format, G and flags from the header, not from this
 * instance's configuration.
 *
 * <p><b>Ablations</b> (same codec id 4, told apart by the header flags; docs/design.md §3 asks for them): {@code taco-no-ash}
 * = alpha 0 and no Hadamard (neither part of ASH), {@code taco-no-hadamard} = no Hadamard, and {@code taco-no-ds}
 * = single scale: the row's coarse scale only, no per-group fine exponent (flag bit2, body without the
 * {@code rows*ng} fine bytes). Without the fine exponent, a group far below its row's max falls under FP8's
 * subnormal range and decodes to zeros (zero collapse); {@code taco} keeps such groups (tested at 2^-40). Because
 * alpha does not change the payload (above), {@code taco-no-ash} and {@code taco-no-hadamard} give the same
 * decoded values (they differ only in the ASH flag bit).
 *
 * <p><b>Non-finite values</b> under {@code nonfinite=propagate}: scales come from the finite values; a row holding
 * NaN/Inf is sent without the Hadamard transform (negative coarse scale) so that the NaN cannot spread over its
 * group; NaN decodes to NaN, +-Inf to +-Inf in E5M2 and to NaN in E4M3 (which has no infinity).
 */
public final class TacoCodec extends AbstractCodec {

  /** Default group size. */
  public static final int DEFAULT_GROUP = 64;

  private final String name;
  private final int groupSize;
  private final Fp8Format format;
  private final float alpha;
  private final boolean hadamard;
  private final boolean dualScale;

  /** Defaults: G = {@value #DEFAULT_GROUP}, E4M3, alpha = 1, Hadamard on. */
  public TacoCodec() {
    this(DEFAULT_GROUP, Fp8Format.E4M3, 1f, true);
  }

  /**
   * {@code taco} with dual scales and policy {@link NonFinite#REFUSE}.
   *
   * @param groupSize G, a power of two in 32..256
   * @param format FP8 format of the codes
   * @param alpha ASH strength in [0, 1]
   * @param hadamard whether groups are Walsh-Hadamard transformed
   * @throws IllegalArgumentException for a bad G or alpha
   */
  public TacoCodec(int groupSize, Fp8Format format, float alpha, boolean hadamard) {
    this("taco", groupSize, format, alpha, hadamard, true, NonFinite.REFUSE);
  }

  /**
   * The general constructor, for the ablations.
   *
   * @param name the name this instance reports ({@code taco}, {@code taco-no-ash}, ...; messages use it)
   * @param groupSize G, a power of two in 32..256
   * @param format FP8 format of the codes
   * @param alpha ASH strength in [0, 1]
   * @param hadamard whether groups are Walsh-Hadamard transformed
   * @param dualScale per-group fine exponents (false: {@code taco-no-ds}, the row's coarse scale only)
   * @param nonFinite NaN/Inf policy
   * @throws IllegalArgumentException for a bad G or alpha
   */
  public TacoCodec(String name, int groupSize, Fp8Format format, float alpha, boolean hadamard, boolean dualScale,
      NonFinite nonFinite) {
    super(nonFinite);
    this.name = java.util.Objects.requireNonNull(name, "name");
    this.dualScale = dualScale;
    if (!PayloadHeader.validGroupSize(groupSize)) {
      throw new IllegalArgumentException(name + ": group size must be a power of two in 32..256, got " + groupSize);
    }
    if (!(alpha >= 0f && alpha <= 1f)) {
      throw new IllegalArgumentException(name + ": alpha must be in [0, 1], got " + alpha);
    }
    this.groupSize = groupSize;
    this.format = java.util.Objects.requireNonNull(format, "format");
    this.alpha = alpha;
    this.hadamard = hadamard;
  }

  /**
   * This codec with another group size and transform setting (same name, format, alpha, dual scale and NaN/Inf
   * policy): the candidate plans of a calibration (docs/design.md §3.1).
   *
   * @throws IllegalArgumentException for a bad G
   */
  public TacoCodec with(int groupSize, boolean hadamard) {
    return new TacoCodec(name, groupSize, format, alpha, hadamard, dualScale, nonFinite());
  }

  /** G. */
  @Override
  public int groupSize() {
    return groupSize;
  }

  /** The FP8 format of the codes. */
  public Fp8Format format() {
    return format;
  }

  /** ASH strength. */
  public float alpha() {
    return alpha;
  }

  /** Whether the Walsh-Hadamard transform is on. */
  public boolean hadamard() {
    return hadamard;
  }

  /** Whether each group has its own fine exponent (false for {@code taco-no-ds}). */
  public boolean dualScale() {
    return dualScale;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  protected int codecId() {
    return PayloadHeader.TACO;
  }

  @Override
  protected PayloadHeader header(int rows, int cols) {
    int flags = (hadamard ? PayloadHeader.FLAG_HADAMARD : 0) | (alpha > 0f ? PayloadHeader.FLAG_ASH : 0)
        | (dualScale ? 0 : PayloadHeader.FLAG_SINGLE_SCALE);
    return new PayloadHeader(codecId(), format.code(), flags, groupSize, rows, cols);
  }

  @Override
  protected void checkHeader(PayloadHeader h) {
    if (h.format() != Fp8Format.E4M3.code() && h.format() != Fp8Format.E5M2.code()) {
      throw PayloadHeader.bad(name(), "fp8 format " + h.format() + ", expected 1 (E4M3) or 2 (E5M2)");
    }
    if ((h.flags() & ~(PayloadHeader.FLAG_HADAMARD | PayloadHeader.FLAG_ASH | PayloadHeader.FLAG_SINGLE_SCALE)) != 0) {
      throw PayloadHeader.bad(name(), "unknown flag bits 0x" + Integer.toHexString(h.flags()));
    }
    if (!PayloadHeader.validGroupSize(h.groupSize())) {
      throw PayloadHeader.bad(name(), "group size " + h.groupSize() + " is not a power of two in 32..256");
    }
  }

  private static long groups(PayloadHeader h) {
    return (long) h.rows() * TacoKernels.groupsPerRow(h.cols(), h.groupSize());
  }

  private static boolean dual(PayloadHeader h) {
    return (h.flags() & PayloadHeader.FLAG_SINGLE_SCALE) == 0;
  }

  private static boolean had(PayloadHeader h) {
    return (h.flags() & PayloadHeader.FLAG_HADAMARD) != 0;
  }

  /** Bytes of fine exponents: one per group, none for single scale. */
  private static int fineBytes(PayloadHeader h) {
    return dual(h) ? (int) groups(h) : 0;
  }

  @Override
  protected long bodyLength(PayloadHeader h) {
    return 4L * h.rows() + groups(h) * (h.groupSize() + (dual(h) ? 1 : 0));
  }

  @Override
  protected long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff) {
    int fineOff = bodyOff + 4 * h.rows();
    if (Simd.enabled()) {
      int ng = TacoKernels.groupsPerRow(h.cols(), h.groupSize());
      int codeOff = fineOff + fineBytes(h);
      return RowSplit.run(h.rows(), h.cols(), (r0, r1) -> TacoLanes.encode(x, off + r0 * h.cols(), r1 - r0, h.cols(),
          h.groupSize(), h.format(), alpha, had(h), dual(h), out, bodyOff + 4 * r0, fineOff + (dual(h) ? r0 * ng : 0),
          codeOff + r0 * ng * h.groupSize()));
    }
    int ng = (int) groups(h);
    int[] sat = new int[ng];
    TacoKernels.rowScales(x, off, h.rows(), h.cols(), h.groupSize(), h.format(), had(h), out, bodyOff);
    TacoKernels.encodeGroups(x, off, h.rows(), h.cols(), h.groupSize(), h.format(), alpha, had(h), dual(h),
        new float[ng * h.groupSize()], sat, out, bodyOff, fineOff, fineOff + fineBytes(h));
    long s = 0;
    for (int v : sat) {
      s += v;
    }
    return s;
  }

  @Override
  protected String checkBody(PayloadHeader h, byte[] in, int bodyOff) {
    int ng = (int) groups(h);
    int codeOff = bodyOff + 4 * h.rows() + fineBytes(h);
    long bad = Simd.enabled()
        ? TacoDecodeLanes.firstInvalid(in, bodyOff, codeOff, h.rows(), ng * h.groupSize(), h.format(), h.nonFinite())
        : TacoKernels.firstInvalid(in, bodyOff, codeOff, h.rows(), ng * h.groupSize(), h.format(), h.nonFinite());
    if (bad < 0) {
      return null;
    }
    return bad < h.rows() ? "row " + bad + " has an invalid coarse scale (must be 0 or a finite normal > 0)"
        : "NaN/Inf FP8 code at code index " + (bad - h.rows());
  }

  @Override
  protected void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff, boolean accumulate) {
    int fineOff = bodyOff + 4 * h.rows();
    if (Simd.enabled()) {
      int ng = TacoKernels.groupsPerRow(h.cols(), h.groupSize());
      int codeOff = fineOff + fineBytes(h);
      RowSplit.run(h.rows(), h.cols(), (r0, r1) -> {
        TacoDecodeLanes.decode(in, bodyOff + 4 * r0, fineOff + (dual(h) ? r0 * ng : 0),
            codeOff + r0 * ng * h.groupSize(), r1 - r0, h.cols(), h.groupSize(), h.format(), had(h), dual(h),
            h.nonFinite(), out, outOff + r0 * h.cols(), accumulate);
        return 0;
      });
      return;
    }
    int ng = (int) groups(h);
    TacoKernels.decodeGroups(in, bodyOff, fineOff, fineOff + fineBytes(h), h.rows(), h.cols(), h.groupSize(),
        h.format(), had(h), dual(h), new float[ng * h.groupSize()], out, outOff, accumulate);
  }

  /**
   * Decompress-reduce in the rotated domain (docs/design.md §3.5): every payload's codes are dequantised, without the inverse
   * transform, into one accumulator ({@link TacoKernels#dequantAccumulate}), in list order, and the sum is transformed
   * back once ({@link TacoKernels#finishReduce}). A row that some payload sent untransformed (it held NaN/Inf, policy
   * propagate) is summed the plain way instead: each payload's row decoded in full, then added. The SIMD path
   * ({@link TacoDecodeLanes#reduce}) does the same group by group, with one group of scratch.
   */
  @Override
  protected void reduceBodies(List<PayloadHeader> headers, List<byte[]> payloads, int n, float[] own, int ownOff,
      float[] out, int outOff) {
    if (headers.isEmpty()) {
      super.reduceBodies(headers, payloads, n, own, ownOff, out, outOff);
      return;
    }
    PayloadHeader h0 = headers.get(0);
    int scaleOff = PayloadHeader.SIZE;
    int fineOff = scaleOff + 4 * h0.rows();
    int codeOff = fineOff + fineBytes(h0);
    if (Simd.enabled()) {
      boolean[] nonFinite = new boolean[headers.size()];
      for (int i = 0; i < nonFinite.length; i++) {
        nonFinite[i] = headers.get(i).nonFinite();
      }
      TacoDecodeLanes.reduce(payloads.toArray(byte[][]::new), nonFinite, scaleOff, fineOff, codeOff, h0.rows(),
          h0.cols(), h0.groupSize(), h0.format(), had(h0), dual(h0), own, ownOff, out, outOff);
      return;
    }
    float[] sum = new float[n];
    referenceReduce(headers, payloads, sum);
    addOwn(sum, 0, own, ownOff, out, outOff, n);
  }

  /** The reference kernels' reduce: {@code sum} (zero on entry) = the sum of the payloads, as the class doc says. */
  private static void referenceReduce(List<PayloadHeader> headers, List<byte[]> payloads, float[] sum) {
    PayloadHeader h0 = headers.get(0);
    int rows = h0.rows();
    int cols = h0.cols();
    int g = h0.groupSize();
    int ng = TacoKernels.groupsPerRow(cols, g);
    boolean transformed = had(h0);
    float[] acc = new float[rows * ng * g];
    boolean[] plain = new boolean[rows];
    for (int i = 0; i < headers.size(); i++) {
      PayloadHeader h = headers.get(i);
      byte[] p = payloads.get(i);
      int scaleOff = PayloadHeader.SIZE;
      int fineOff = scaleOff + 4 * rows;
      for (int r = 0; transformed && h.nonFinite() && r < rows; r++) {
        plain[r] |= Float.floatToRawIntBits(Bytes.getFloat(p, scaleOff + 4 * r)) < 0;
      }
      TacoKernels.dequantAccumulate(p, scaleOff, fineOff, fineOff + fineBytes(h), rows, cols, g, h.format(), dual(h),
          acc, 0);
    }
    TacoKernels.finishReduce(acc, 0, rows, cols, g, transformed, sum, 0);
    float[] work = new float[ng * g];
    for (int r = 0; r < rows; r++) {
      if (!plain[r]) {
        continue;
      }
      Arrays.fill(sum, r * cols, (r + 1) * cols, 0f);
      for (int i = 0; i < headers.size(); i++) {
        PayloadHeader h = headers.get(i);
        int scaleOff = PayloadHeader.SIZE;
        int fineOff = scaleOff + 4 * rows;
        int codeOff = fineOff + fineBytes(h);
        TacoKernels.decodeGroups(payloads.get(i), scaleOff + 4 * r, fineOff + (dual(h) ? r * ng : 0),
            codeOff + r * ng * g, 1, cols, g, h.format(), true, dual(h), work, sum, r * cols, true);
      }
    }
  }

  @Override
  public String toString() {
    return name + ":" + format.name().toLowerCase(java.util.Locale.ROOT) + ",g=" + groupSize
        + (name.equals("taco-no-ash") ? "" : ",alpha=" + alpha)
        + (name.equals("taco") || name.equals("taco-no-ds") ? ",hadamard=" + (hadamard ? "on" : "off") : "")
        + policySuffix();
  }
}
