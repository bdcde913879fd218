package dev.taco.codec;

import dev.taco.kernels.Bytes;
import java.util.zip.CRC32;

/**
 * The 28-byte header every codec payload starts with (docs/design.md §3.4), little-endian:
 *
 * <pre>
 * off size field
 *   0   4  magic "TACO" (ASCII)
 *   4   1  version, = 1
 *   5   1  codec id ({@link #FP32} 1, {@link #BF16} 2, {@link #INT8_GROUP} 3, {@link #TACO} 4,
 *          {@link #FP8_TENSOR} 5, {@link #FP8_GROUP} 6, {@link #INT4_GROUP} 7, {@link #HADAMARD_INT8} 8,
 *          {@link #MXFP4} 9, {@link #NVFP4} 10, {@link #NCCL_FP8} 11)
 *   6   1  fp8 format: 0 none, 1 E4M3, 2 E5M2
 *   7   1  flags: bit0 Hadamard on, bit1 ASH pre-scale on, bit2 single scale (taco-no-ds), bit7 the body holds
 *          non-finite values (policy propagate; any codec); other bits must be 0
 *   8   2  group size G (u16; 0 for codecs without groups; the format's own, 32 or 16, for mxfp4 and nvfp4)
 *  10   2  reserved, = 0
 *  12   4  rows (u32, 1 .. 2^31-1)
 *  16   4  cols (u32, 1 .. 2^31-1), rows*cols &lt; 2^31
 *  20   4  CRC-32 (java.util.zip.CRC32, IEEE 802.3) of bytes 0..20
 *  24   4  CRC-32 of the body
 *  28   .. body (codec-specific; its exact length follows from the header)
 * </pre>
 *
 * @param codecId codec id byte
 * @param format FP8 format byte (0, 1, 2)
 * @param flags flag bits
 * @param groupSize G, or 0
 * @param rows tensor rows, &ge; 1
 * @param cols tensor columns, &ge; 1
 */
public record PayloadHeader(int codecId, int format, int flags, int groupSize, int rows, int cols) {

  /** Header size in bytes. */
  public static final int SIZE = 28;
  /** Wire format version written and accepted. */
  public static final int VERSION = 1;
  /** Codec id of {@link Fp32Codec}. */
  public static final int FP32 = 1;
  /** Codec id of {@link Bf16Codec} ({@code none}). */
  public static final int BF16 = 2;
  /** Codec id of {@link Int8GroupCodec}. */
  public static final int INT8_GROUP = 3;
  /** Codec id of {@link TacoCodec}. */
  public static final int TACO = 4;
  /** Codec id of {@link Fp8TensorCodec}. */
  public static final int FP8_TENSOR = 5;
  /** Codec id of {@link Fp8GroupCodec}. */
  public static final int FP8_GROUP = 6;
  /** Codec id of {@link Int4GroupCodec}. */
  public static final int INT4_GROUP = 7;
  /** Codec id of {@link HadamardInt8Codec}. */
  public static final int HADAMARD_INT8 = 8;
  /** Codec id of {@link MxFp4Codec}. */
  public static final int MXFP4 = 9;
  /** Codec id of {@link NvFp4Codec}. */
  public static final int NVFP4 = 10;
  /** Codec id of {@link NcclFp8Codec}. */
  public static final int NCCL_FP8 = 11;
  /** Flag bit: Hadamard transform applied. */
  public static final int FLAG_HADAMARD = 1;
  /** Flag bit: ASH pre-scale on (alpha &gt; 0). */
  public static final int FLAG_ASH = 2;
  /** Flag bit (taco only): single scale, one coarse scale per row and no per-group fine exponent (taco-no-ds). */
  public static final int FLAG_SINGLE_SCALE = 4;
  /**
   * Flag bit (any codec, handled by {@link AbstractCodec}): the encoder's policy was {@code nonfinite=propagate}
   * and the tensor held NaN/Inf, so the body may hold NaN/Inf codes (and negative scales marking untransformed
   * groups or rows of Hadamard codecs).
   */
  public static final int FLAG_NONFINITE = 0x80;

  private static final int MAGIC = 'T' | 'A' << 8 | 'C' << 16 | 'O' << 24;
  private static final int CRC_OFF = 20;

  /** True if {@link #FLAG_NONFINITE} is set. */
  public boolean nonFinite() {
    return (flags & FLAG_NONFINITE) != 0;
  }

  /** This header with the flags replaced. */
  public PayloadHeader withFlags(int newFlags) {
    return new PayloadHeader(codecId, format, newFlags, groupSize, rows, cols);
  }

  /** Number of tensor elements, {@code rows*cols}. */
  public int count() {
    return rows * cols;
  }

  /**
   * Writes this header at {@code out[off .. off+28)}, with its CRC and the given body CRC.
   *
   * @throws IllegalArgumentException if a field does not fit its place (codec id, format and flags one byte each, G
   *     two, rows and cols positive) or {@code rows * cols} passes 2^31 - 1: a header that read back as another
   */
  public void write(byte[] out, int off, int bodyCrc) {
    if ((codecId | format | flags) >>> 8 != 0 || groupSize >>> 16 != 0 || rows < 1 || cols < 1
        || (long) rows * cols > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("payload header " + this + " does not fit the wire format (codec id, format"
          + " and flags 0..255, G 0..65535, rows and cols >= 1, rows * cols < 2^31)");
    }
    Bytes.putInt(out, off, MAGIC);
    out[off + 4] = (byte) VERSION;
    out[off + 5] = (byte) codecId;
    out[off + 6] = (byte) format;
    out[off + 7] = (byte) flags;
    Bytes.putU16(out, off + 8, groupSize);
    Bytes.putU16(out, off + 10, 0);
    Bytes.putInt(out, off + 12, rows);
    Bytes.putInt(out, off + 16, cols);
    Bytes.putInt(out, off + CRC_OFF, crc(out, off, CRC_OFF));
    Bytes.putInt(out, off + 24, bodyCrc);
  }

  /** CRC-32 of {@code b[off .. off+len)}. */
  public static int crc(byte[] b, int off, int len) {
    CRC32 c = new CRC32();
    c.update(b, off, len);
    return (int) c.getValue();
  }

  /**
   * Reads and validates the generic part of a header: length, magic, version, header CRC, codec id (must be
   * {@code expectedCodecId}), reserved bits, shape. Codec-specific fields (format, flags, G) are the codec's to
   * check. Reads only {@code in[off .. off+min(len,28))}.
   *
   * @param name codec name for messages
   * @throws MalformedPayloadException on any violation
   */
  public static PayloadHeader read(byte[] in, int off, int len, int expectedCodecId, String name) {
    if (len < SIZE) {
      throw bad(name, "truncated: " + len + " bytes, the header alone needs " + SIZE);
    }
    int magic = Bytes.getInt(in, off);
    if (magic != MAGIC) {
      throw bad(name, String.format("bad magic 0x%08x, expected \"TACO\"", magic));
    }
    int version = in[off + 4] & 0xFF;
    if (version != VERSION) {
      throw bad(name, "unsupported version " + version + ", expected " + VERSION);
    }
    int stored = Bytes.getInt(in, off + CRC_OFF);
    int actual = crc(in, off, CRC_OFF);
    if (stored != actual) {
      throw bad(name, String.format("header checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, actual));
    }
    int id = in[off + 5] & 0xFF;
    if (id != expectedCodecId) {
      throw bad(name, "codec id " + id + " (" + codecName(id) + ") does not match this codec (" + name + ", id "
          + expectedCodecId + ")");
    }
    if (Bytes.getU16(in, off + 10) != 0) {
      throw bad(name, "reserved field is " + Bytes.getU16(in, off + 10) + ", must be 0");
    }
    long rows = Bytes.getInt(in, off + 12) & 0xFFFFFFFFL;
    long cols = Bytes.getInt(in, off + 16) & 0xFFFFFFFFL;
    if (rows < 1 || cols < 1 || rows * cols > Integer.MAX_VALUE) {
      throw bad(name, "bad shape " + rows + " x " + cols + " (need rows, cols >= 1 and rows*cols < 2^31)");
    }
    return new PayloadHeader(id, in[off + 6] & 0xFF, in[off + 7] & 0xFF, Bytes.getU16(in, off + 8), (int) rows,
        (int) cols);
  }

  /** Stored body CRC of the payload at {@code in[off]} (header already validated). */
  static int storedBodyCrc(byte[] in, int off) {
    return Bytes.getInt(in, off + 24);
  }

  /** The group sizes of the wire format (docs/design.md §3.1): the powers of two in 32..256. */
  public static final java.util.List<Integer> GROUP_SIZES = java.util.List.of(32, 64, 128, 256);

  /** True if {@code g} is one of {@link #GROUP_SIZES}. */
  public static boolean validGroupSize(int g) {
    return GROUP_SIZES.contains(g);
  }

  static MalformedPayloadException bad(String name, String what) {
    return new MalformedPayloadException(name + " payload: " + what);
  }

  private static String codecName(int id) {
    return switch (id) {
      case FP32 -> "fp32";
      case BF16 -> "none";
      case INT8_GROUP -> "int8-group";
      case TACO -> "taco";
      case FP8_TENSOR -> "fp8-tensor";
      case FP8_GROUP -> "fp8-group";
      case INT4_GROUP -> "int4-group";
      case HADAMARD_INT8 -> "hadamard-int8";
      case MXFP4 -> "mxfp4";
      case NVFP4 -> "nvfp4";
      case NCCL_FP8 -> "nccl-fp8";
      default -> "unknown";
    };
  }
}
