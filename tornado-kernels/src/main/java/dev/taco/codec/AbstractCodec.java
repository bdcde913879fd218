package dev.taco.codec;

import dev.taco.kernels.simd.Lanes;
import dev.taco.kernels.simd.Simd;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The shared skeleton of every codec: argument and finiteness checks, the {@link PayloadHeader}, checksums and
 * the validate-everything-then-write decode. A concrete codec supplies its header fields, its exact body length
 * and its body kernels. Thread-safe if the subclass is (all shipped codecs are immutable).
 */
public abstract class AbstractCodec implements Codec {

  /** What an encoder does with NaN and Inf inputs (see {@link Codec}). */
  public enum NonFinite {
    /** Throw IllegalArgumentException naming the index, row and column of the first non-finite value (default). */
    REFUSE,
    /** Send them: they decode to NaN (or to the same infinity where the wire format has one), see {@link Codec}. */
    PROPAGATE
  }

  private final NonFinite nonFinite;

  /** For subclasses: policy {@link NonFinite#REFUSE}. */
  protected AbstractCodec() {
    this(NonFinite.REFUSE);
  }

  /**
   * For subclasses.
   *
   * @param nonFinite the NaN/Inf policy of {@link #encode}
   */
  protected AbstractCodec(NonFinite nonFinite) {
    this.nonFinite = Objects.requireNonNull(nonFinite, "nonFinite");
  }

  /** The NaN/Inf policy of {@link #encode}. */
  public final NonFinite nonFinite() {
    return nonFinite;
  }

  /**
   * The group size G along a row this codec quantises with (the value of {@code g=} in its spec), or 0 for codecs
   * without groups along rows ({@code fp32}, {@code none}, {@code fp8-tensor}).
   */
  public int groupSize() {
    return 0;
  }

  /** The spec suffix of the non-finite policy: {@code ""} or {@code ",nonfinite=propagate"}. */
  protected final String policySuffix() {
    return nonFinite == NonFinite.PROPAGATE ? ",nonfinite=propagate" : "";
  }

  /** The codec id byte ({@link PayloadHeader#FP32} ...). */
  protected abstract int codecId();

  /** The header this codec writes for a {@code rows x cols} tensor (sizes already checked). */
  protected abstract PayloadHeader header(int rows, int cols);

  /**
   * Checks the codec-specific header fields (format, flags, G) of a received payload. The header passed here has
   * {@link PayloadHeader#FLAG_NONFINITE} cleared (AbstractCodec handles it); the one passed to the body methods
   * keeps it.
   */
  protected abstract void checkHeader(PayloadHeader h);

  /** Exact body length in bytes implied by a (validated) header; may exceed 2^31. */
  protected abstract long bodyLength(PayloadHeader h);

  /**
   * Writes the body at {@code out[bodyOff ..]}; returns the saturation count. With the scalar reference kernels the
   * input is finite unless {@code h.nonFinite()}. With the SIMD kernels ({@link Simd#enabled}) the input was not
   * scanned first and {@code h} has no non-finite flag: a body whose input holds NaN/Inf writes it as policy propagate
   * would and adds {@link Lanes#NON_FINITE} to the count (the caller then refuses or flags the payload).
   */
  protected abstract long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff);

  /** Checks a checksummed body; returns null if valid, else what is wrong. Must not write anything. */
  protected abstract String checkBody(PayloadHeader h, byte[] in, int bodyOff);

  /**
   * Validates a body of {@code bodyLen} bytes at {@code in[bodyOff]}: its CRC-32 against {@code stored}, then
   * {@link #checkBody}; returns null if valid, else what is wrong, a checksum mismatch before anything the body check
   * finds. A codec may do both in one pass ({@link ElementCodec}: a cache-sized piece at a time). Must not write
   * anything.
   */
  protected String checkChecksummedBody(PayloadHeader h, byte[] in, int bodyOff, int bodyLen, int stored) {
    String mismatch = checksumMismatch(stored, PayloadHeader.crc(in, bodyOff, bodyLen));
    return mismatch != null ? mismatch : checkBody(h, in, bodyOff);
  }

  /** What is wrong when a body's checksum {@code actual} is not the {@code stored} one, or null when they agree. */
  protected static String checksumMismatch(int stored, int actual) {
    return stored == actual ? null
        : String.format("body checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, actual);
  }

  /** Decodes a validated body into (or adds it to) {@code out[outOff .. outOff + rows*cols)}. */
  protected abstract void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff,
      boolean accumulate);

  @Override
  public final int encodedSize(int rows, int cols) {
    checkShape(rows, cols);
    long size = PayloadHeader.SIZE + bodyLength(header(rows, cols));
    if (size > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(name() + ": a " + rows + " x " + cols + " payload would be " + size
          + " bytes, over 2^31-1");
    }
    return (int) size;
  }

  @Override
  public final int encode(float[] x, int off, int rows, int cols, byte[] out, int outOff) {
    return encodeWithStats(x, off, rows, cols, out, outOff).bytes();
  }

  /**
   * As {@link #encode}, also reporting the saturation count.
   *
   * @throws IllegalArgumentException as {@link #encode}
   */
  public final EncodeResult encodeWithStats(float[] x, int off, int rows, int cols, byte[] out, int outOff) {
    int size = encodedSize(rows, cols);
    int n = rows * cols;
    Objects.requireNonNull(x, "x");
    Objects.requireNonNull(out, "out");
    if (off < 0 || off > x.length - n) {
      throw new IllegalArgumentException(name() + ": input x[" + off + " .. +" + n + ") is outside x.length "
          + x.length);
    }
    if (outOff < 0 || outOff > out.length - size) {
      throw new IllegalArgumentException(name() + ": output needs " + size + " bytes at " + outOff + ", out.length is "
          + out.length);
    }
    boolean simd = Simd.enabled(); // the SIMD bodies find NaN/Inf as they read the input: no scan first
    PayloadHeader h = header(rows, cols);
    if (!simd) {
      h = refuseOrFlag(h, x, off, cols, firstNonFinite(x, off, n));
    }
    int bodyOff = outOff + PayloadHeader.SIZE;
    long sat = encodeBody(h, x, off, out, bodyOff);
    if (simd && (sat & Lanes.NON_FINITE) != 0) {
      sat &= ~Lanes.NON_FINITE;
      h = refuseOrFlag(h, x, off, cols, Lanes.firstNonFinite(x, off, n));
    }
    h.write(out, outOff, PayloadHeader.crc(out, bodyOff, size - PayloadHeader.SIZE));
    return new EncodeResult(size, sat);
  }

  /**
   * The header, flagged non-finite when the input's first NaN/Inf is at index {@code i} ({@code i >= 0}).
   *
   * @throws NonFiniteInputException naming that index, its row and column, under policy refuse
   */
  private PayloadHeader refuseOrFlag(PayloadHeader h, float[] x, int off, int cols, int i) {
    if (i < 0) {
      return h;
    }
    if (nonFinite == NonFinite.REFUSE) {
      throw new NonFiniteInputException(name(), x[off + i], i, cols);
    }
    return h.withFlags(h.flags() | PayloadHeader.FLAG_NONFINITE);
  }

  /** The index of the first NaN/Inf of {@code x[off .. off + n)}, counted from {@code off}, or -1. */
  private static int firstNonFinite(float[] x, int off, int n) {
    for (int i = 0; i < n; i++) {
      if (!Float.isFinite(x[off + i])) {
        return i;
      }
    }
    return -1;
  }

  @Override
  public final int decode(byte[] in, int inOff, int len, float[] out, int outOff, boolean accumulate) {
    Objects.requireNonNull(out, "out");
    PayloadHeader h = parse(in, inOff, len);
    int n = h.count();
    if (outOff < 0 || outOff > out.length - n) {
      throw new IllegalArgumentException(name() + ": payload holds " + h.rows() + " x " + h.cols() + " = " + n
          + " values, out has room for " + Math.max(0, out.length - Math.max(0, outOff)) + " at " + outOff);
    }
    decodeBody(h, in, inOff + PayloadHeader.SIZE, out, outOff, accumulate);
    return n;
  }

  @Override
  public final void decodeReduce(byte[][] payloads, int rows, int cols, float[] own, int ownOff, float[] out,
      int outOff) {
    checkShape(rows, cols);
    Objects.requireNonNull(payloads, "payloads");
    Objects.requireNonNull(out, "out");
    int n = rows * cols;
    if (outOff < 0 || outOff > out.length - n || own != null && (ownOff < 0 || ownOff > own.length - n)) {
      throw new IllegalArgumentException(name() + ": decodeReduce of " + rows + " x " + cols + " needs " + n
          + " values at out[" + outOff + "]" + (own == null ? "" : " and own[" + ownOff + "]"));
    }
    if (own == out && ownOff != outOff && Math.abs(ownOff - outOff) < n) {
      throw new IllegalArgumentException(name() + ": decodeReduce of " + n + " values: out[" + outOff + " ..] overlaps"
          + " own[" + ownOff + " ..] in the same array; out may be own only at the same offset");
    }
    List<PayloadHeader> headers = new ArrayList<>();
    List<byte[]> bodies = new ArrayList<>();
    for (int q = 0; q < payloads.length; q++) {
      if (payloads[q] == null) {
        continue;
      }
      PayloadHeader h;
      try {
        h = parse(payloads[q], 0, payloads[q].length);
      } catch (MalformedPayloadException e) {
        throw new MalformedPayloadException("payload " + q + ": " + e.getMessage(), e);
      }
      if (h.rows() != rows || h.cols() != cols) {
        throw PayloadHeader.bad(name(), "payload " + q + " holds " + h.rows() + " x " + h.cols() + ", expected " + rows
            + " x " + cols);
      }
      PayloadHeader first = headers.isEmpty() ? h : headers.get(0);
      if (h.format() != first.format() || h.groupSize() != first.groupSize()
          || (h.flags() & ~PayloadHeader.FLAG_NONFINITE) != (first.flags() & ~PayloadHeader.FLAG_NONFINITE)) {
        throw PayloadHeader.bad(name(), "payload " + q + " (format " + h.format() + ", G " + h.groupSize()
            + ", flags 0x" + Integer.toHexString(h.flags()) + ") disagrees with the others on the plan");
      }
      headers.add(h);
      bodies.add(payloads[q]);
    }
    reduceBodies(headers, bodies, n, own, ownOff, out, outOff);
  }

  /** Per thread, the sum buffer of {@link #reduceBodies}' default (grown to the largest tensor reduced). */
  private static final ThreadLocal<float[]> REDUCE_SCRATCH = new ThreadLocal<>();

  /**
   * The reduce step of {@link #decodeReduce} once every payload is validated: {@code out[outOff + i] = S_i +
   * own[ownOff + i]} ({@code S_i} alone when {@code own} is null) for {@code i < n}, where {@code S} is the sum of the
   * payloads' decoded tensors, in list order, float32 from +0. The default decodes each payload with accumulation into
   * a per-thread buffer (the reference kernels: a fresh one). Payload {@code i} is the whole array
   * {@code payloads.get(i)}, its body at {@link PayloadHeader#SIZE}; {@code own} may be {@code out} at the same offset.
   */
  protected void reduceBodies(List<PayloadHeader> headers, List<byte[]> payloads, int n, float[] own, int ownOff,
      float[] out, int outOff) {
    float[] y = Simd.enabled() ? zeroedScratch(n) : new float[n];
    for (int i = 0; i < headers.size(); i++) {
      decodeBody(headers.get(i), payloads.get(i), PayloadHeader.SIZE, y, 0, true);
    }
    addOwn(y, 0, own, ownOff, out, outOff, n);
  }

  /** This thread's reduce buffer, at least {@code n} long, its first {@code n} values +0. */
  private static float[] zeroedScratch(int n) {
    float[] y = REDUCE_SCRATCH.get();
    if (y == null || y.length < n) {
      y = new float[n];
      REDUCE_SCRATCH.set(y);
    } else {
      Arrays.fill(y, 0, n, 0f);
    }
    return y;
  }

  /** {@code out[outOff + i] = sum[sumOff + i] + own[ownOff + i]} ({@code sum[sumOff + i]} when {@code own} is null). */
  protected static void addOwn(float[] sum, int sumOff, float[] own, int ownOff, float[] out, int outOff, int n) {
    if (own == null) {
      System.arraycopy(sum, sumOff, out, outOff, n);
    } else if (Simd.enabled()) {
      Lanes.add(sum, sumOff, own, ownOff, out, outOff, n);
    } else {
      for (int i = 0; i < n; i++) {
        out[outOff + i] = sum[sumOff + i] + own[ownOff + i];
      }
    }
  }

  /**
   * Validates a whole payload (header, exact length, both checksums, body contents) without decoding it.
   *
   * @return the header
   * @throws MalformedPayloadException if anything is wrong
   * @throws IllegalArgumentException if {@code in[inOff .. inOff + len)} is not inside {@code in}
   */
  public final PayloadHeader parse(byte[] in, int inOff, int len) {
    Objects.requireNonNull(in, "in");
    if (inOff < 0 || len < 0 || inOff > in.length - len) {
      throw new IllegalArgumentException(name() + ": in[" + inOff + " .. +" + len + ") is outside in.length "
          + in.length);
    }
    PayloadHeader h = PayloadHeader.read(in, inOff, len, codecId(), name());
    checkHeader(h.withFlags(h.flags() & ~PayloadHeader.FLAG_NONFINITE));
    long expected = PayloadHeader.SIZE + bodyLength(h);
    if (len != expected) {
      throw PayloadHeader.bad(name(), (len < expected ? "truncated" : "too long") + ": " + len
          + " bytes, the header (" + h.rows() + " x " + h.cols() + ", G " + h.groupSize() + ") implies " + expected);
    }
    String why = checkChecksummedBody(h, in, inOff + PayloadHeader.SIZE, len - PayloadHeader.SIZE,
        PayloadHeader.storedBodyCrc(in, inOff));
    if (why != null) {
      throw PayloadHeader.bad(name(), why);
    }
    return h;
  }

  /** Throws unless the fields are exactly these (for codecs with fixed format/flags/G). */
  protected final void expectFields(PayloadHeader h, int format, int flags, int groupSize) {
    if (h.format() != format) {
      throw PayloadHeader.bad(name(), "fp8 format " + h.format() + ", expected " + format);
    }
    if (h.flags() != flags) {
      throw PayloadHeader.bad(name(), "flags 0x" + Integer.toHexString(h.flags()) + ", expected 0x"
          + Integer.toHexString(flags));
    }
    if (h.groupSize() != groupSize) {
      throw PayloadHeader.bad(name(), "group size " + h.groupSize() + ", expected " + groupSize);
    }
  }

  private void checkShape(int rows, int cols) {
    if (rows <= 0 || cols <= 0) {
      throw new IllegalArgumentException(name() + ": rows and cols must be positive, got " + rows + " x " + cols);
    }
    if ((long) rows * cols > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(name() + ": " + rows + " x " + cols + " has more than 2^31-1 elements");
    }
  }

  /** The spec that {@link Codecs#byName} turns back into an equal codec, e.g. {@code none:nonfinite=propagate}. */
  @Override
  public String toString() {
    return name() + (policySuffix().isEmpty() ? "" : ":" + policySuffix().substring(1));
  }
}
