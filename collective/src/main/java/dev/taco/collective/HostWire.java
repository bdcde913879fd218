package dev.taco.collective;

import dev.taco.codec.MalformedPayloadException;
import dev.taco.codec.NcclFp8Codec;
import dev.taco.codec.NonFiniteInputException;
import dev.taco.codec.PayloadHeader;
import dev.taco.kernels.Bytes;
import dev.taco.kernels.NcclFp8;
import dev.taco.kernels.gpu.NcclFp8Kernels;
import dev.taco.kernels.cpu.Transpose;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * The host side of the {@link Wire} seam (docs/design.md §4): tensors are {@code float[]} (row-major, from index 0), a payload
 * buffer is {@link Slots} ({@code worldSize()} byte payloads), the codec runs on the CPU and the bytes move through a
 * {@link Communicator}'s {@link Communicator#allToAllBytes} (the {@code local} transport: threads as ranks). Steps run
 * at once, in call order; one piece per collective (no pipelining on the host).
 *
 * <p>Payloads are the codec's self-describing payloads (header, scales, codes), or raw little-endian float32 for the
 * exact plan. Every payload that arrives is validated when it arrives, before any step writes to a tensor: one that is
 * not what the plan and the chunk's shape imply (another length or shape, a bad checksum, a malformed body) is rejected
 * with a {@link MalformedPayloadException} naming its source rank, and the caller's tensor is left as it was. What is
 * not checked: raw float32 payloads of the exact plan carry no checksum (only their length is checked; the transport's
 * own integrity is relied on, as NCCL does), and no payload names its source rank or collective, so a transport that
 * delivered a valid payload to the wrong rank or call would go unnoticed.
 *
 * <p>{@code nccl-fp8} ({@link Plan#groupScaled}): the group's absmax is exchanged by an all-gather of one float per
 * rank, every payload is cast with the group's scale (and must carry it), and the reduce sums the peers' codes and the
 * own chunk's in FP8 in NCCL's ring order ({@link NcclFp8Kernels#ringReduce}, the device's kernel run as a loop).
 */
public final class HostWire implements Wire<float[], HostWire.Slots> {
  private static final byte[] EMPTY = new byte[0];

  private final Communicator comm;
  private NcclFp8Codec scaled; // nccl-fp8: the codec with this collective's group scale (groupScale)
  private float groupAmax;
  private int groupDivisor;

  /**
   * A payload buffer: one payload per rank ({@code slots[q]}, empty until written or received), all for a
   * {@code rows x cols} chunk under {@code plan}.
   */
  public record Slots(Plan plan, int rows, int cols, byte[][] slots) {}

  /** @param comm the transport (its rank, world size and byte all-to-all) */
  public HostWire(Communicator comm) {
    this.comm = java.util.Objects.requireNonNull(comm, "comm");
  }

  @Override
  public int rank() {
    return comm.rank();
  }

  @Override
  public int worldSize() {
    return comm.worldSize();
  }

  /** Bytes of one {@code rows x cols} chunk's payload under {@code plan}. */
  public static int payloadBytes(Plan plan, int rows, int cols) {
    if (plan.exact()) {
      long bytes = (long) Float.BYTES * rows * cols;
      if (bytes > Integer.MAX_VALUE) {
        throw new IllegalArgumentException("a " + rows + " x " + cols + " exact float32 chunk would be " + bytes
            + " bytes, over 2^31-1: use more ranks or a smaller tensor");
      }
      return (int) bytes;
    }
    return plan.codec().encodedSize(rows, cols);
  }

  @Override
  public long capacity(float[] tensor) {
    return tensor.length;
  }

  /** Swaps the descriptions over the transport and compares them (one small exchange). */
  @Override
  public void agree(String description) {
    byte[] mine = description.getBytes(StandardCharsets.UTF_8);
    byte[][] out = new byte[worldSize()][];
    Arrays.fill(out, mine);
    byte[][] in = comm.allToAllControl(out);
    for (int q = 0; q < in.length; q++) {
      String theirs = new String(in[q], StandardCharsets.UTF_8);
      if (!theirs.equals(description)) {
        throw new CollectiveException("rank " + rank() + " called " + description + ", rank " + q + " " + theirs
            + ": every rank must call the same collective with the same shape and plan");
      }
    }
  }

  @Override
  public int pieceRows(Plan plan, int rowsPerRank, int cols) {
    return rowsPerRank;
  }

  @Override
  public Slots payloads(Plan plan, int rows, int cols) {
    byte[][] slots = new byte[worldSize()][];
    Arrays.fill(slots, EMPTY);
    return new Slots(plan, rows, cols, slots);
  }

  @Override
  public float[] scratch(int rows, int cols) {
    return new float[rows * cols];
  }

  /** Exchanges every rank's largest finite {@code |x|} (an all-gather of one float) and keeps the group's scale. */
  @Override
  public void groupScale(Plan plan, float[] x, int rows, int cols) {
    float a = NcclFp8Codec.finiteAbsMax(x, 0, rows * cols);
    float[] all = new float[worldSize()];
    comm.allGather(new float[] {a}, 0, 1, all, 0);
    float group = 0f;
    for (float q : all) group = Math.max(group, q);
    NcclFp8Codec c = (NcclFp8Codec) plan.codec();
    groupAmax = group;
    groupDivisor = c.divisor(worldSize());
    scaled = c.withScale(group, groupDivisor);
  }

  /** The codec of {@code plan} with this collective's group scale. */
  private NcclFp8Codec scaled(Plan plan) {
    if (scaled == null || !scaled.toString().equals(plan.codec().toString())) {
      throw new IllegalStateException(plan.describe() + ": the group scale was not agreed before this step");
    }
    return scaled;
  }

  /** The group scale as {@link NcclFp8Kernels} read it: amax, then the divisor. */
  private byte[] scaleBytes() {
    byte[] b = new byte[NcclFp8.HEADER];
    Bytes.putFloat(b, 0, groupAmax);
    Bytes.putInt(b, 4, groupDivisor);
    return b;
  }

  /**
   * nccl-fp8: the R bodies of this rank's chunk as {@link NcclFp8Kernels#ringReduce} reads them, {@code HEADER + rows *
   * cols} bytes apart: the peers' received payloads' (which must carry the group scale) and the own chunk's, cast here.
   */
  private byte[] ringSlots(Plan plan, float[] x, int row0, int realRows, int rows, int cols, Slots recv) {
    int slot = NcclFp8.HEADER + rows * cols;
    byte[] slots = new byte[worldSize() * slot];
    for (int q = 0; q < worldSize(); q++) {
      byte[] p = q == rank() ? encodeAt(plan, x, row0, realRows, rows, cols) : checked(plan, recv.slots()[q], q, rows,
          cols);
      if (NcclFp8Codec.amaxOf(p) != groupAmax || NcclFp8Codec.divisorOf(p) != groupDivisor) {
        throw new MalformedPayloadException("rank " + rank() + ": " + plan.describe() + " payload from rank " + q
            + " carries the scale (amax " + NcclFp8Codec.amaxOf(p) + ", divisor " + NcclFp8Codec.divisorOf(p)
            + "), the group's is (amax " + groupAmax + ", divisor " + groupDivisor + ")");
      }
      System.arraycopy(p, PayloadHeader.SIZE, slots, q * slot, slot);
    }
    return slots;
  }

  @Override
  public void encode(Plan plan, float[] x, int row0, int realRows, int rows, int cols, Slots out, int slot,
      int piece) {
    out.slots()[slot] = encodeAt(plan, x, row0, realRows, rows, cols);
  }

  /** The payload of the chunk at {@code x} rows {@code row0 ..} (then zero rows), a refusal saying where it is. */
  private byte[] encodeAt(Plan plan, float[] x, int row0, int realRows, int rows, int cols) {
    try {
      return encodeChunk(plan, chunk(x, row0, realRows, rows, cols), rows, cols);
    } catch (NonFiniteInputException e) { // say where in the tensor the refused chunk is
      throw new NonFiniteInputException(where(plan, row0, realRows) + ", rank " + rank(), e);
    }
  }

  @Override
  public void reduce(Plan plan, float[] x, int row0, int realRows, int rows, int cols, Slots recv, float[] y,
      int yRow0, int piece) {
    if (plan.groupScaled()) {
      NcclFp8Kernels.ringReduce(ringSlots(plan, x, row0, realRows, rows, cols, recv), NcclFp8.HEADER + rows * cols,
          rank(), worldSize(), scaleBytes(), null, null, y, yRow0, realRows, rows, cols, scaled(plan).format().code(),
          false);
      return;
    }
    float[] sum = reduceChunk(plan, x, row0, realRows, rows, cols, recv);
    if (realRows > 0) {
      System.arraycopy(sum, 0, y, yRow0 * cols, realRows * cols);
    }
  }

  @Override
  public void reduceEncode(Plan plan, float[] x, int row0, int realRows, int rows, int cols, Slots recv,
      Slots out, int piece) {
    if (plan.groupScaled()) {
      byte[] codes = new byte[rows * cols];
      NcclFp8Kernels.ringReduce(ringSlots(plan, x, row0, realRows, rows, cols, recv), NcclFp8.HEADER + rows * cols,
          rank(), worldSize(), scaleBytes(), new byte[NcclFp8.HEADER], codes, null, 0, realRows, rows, cols,
          scaled(plan).format().code(), true);
      out.slots()[rank()] = scaled.payload(groupAmax, groupDivisor, codes, rows, cols);
      return;
    }
    float[] sum = reduceChunk(plan, x, row0, realRows, rows, cols, recv);
    try {
      out.slots()[rank()] = encodeChunk(plan, sum, rows, cols);
    } catch (NonFiniteInputException e) { // own rows NaN/Inf, or a sum that overflowed float32
      throw new NonFiniteInputException("the sum over ranks of the " + where(plan, row0, realRows) + ", rank " + rank()
          + ", is not finite (its own rows hold NaN/Inf, or the sum overflowed float32; a codec with a Walsh-Hadamard"
          + " transform, as taco's, also overflows in its inverse transform from about 3.4e38 / sqrt(group size) on,"
          + " which hadamard=off avoids)", e);
    }
  }

  @Override
  public void decodeAll(Plan plan, Slots in, int rowsTotal, int rowsPerRank, int pieceRow0, int pieceRows, int cols,
      float[] out, int piece) {
    for (int q = 0; q < worldSize(); q++) {
      int row0 = q * rowsPerRank + pieceRow0;
      int realRows = Math.max(0, Math.min(pieceRows, rowsTotal - row0));
      if (realRows == 0) {
        continue;
      }
      byte[] p = checked(plan, in.slots()[q], q, pieceRows, cols);
      float[] chunk = new float[pieceRows * cols];
      if (plan.exact()) {
        floats(p).get(chunk);
      } else {
        plan.codec().decode(p, 0, p.length, chunk, 0, false);
      }
      System.arraycopy(chunk, 0, out, row0 * cols, realRows * cols);
    }
  }

  @Override
  public void allToAll(Slots send, Slots recv, int piece) {
    byte[][] out = send.slots().clone();
    out[rank()] = EMPTY;
    received(comm.allToAllBytes(out), recv);
  }

  @Override
  public void allGather(Slots buf, int piece) {
    byte[][] out = new byte[worldSize()][];
    Arrays.fill(out, buf.slots()[rank()]);
    received(comm.allToAllBytes(out), buf);
  }

  /** Validates every peer's payload in {@code in} (length, header, checksums, body), then stores them in {@code to}. */
  private void received(byte[][] in, Slots to) {
    for (int q = 0; q < in.length; q++) {
      if (q == rank()) {
        continue;
      }
      byte[] p = checked(to.plan(), in[q], q, to.rows(), to.cols());
      if (!to.plan().exact()) {
        try {
          var h = to.plan().codec().parse(p, 0, p.length);
          if (h.rows() != to.rows() || h.cols() != to.cols()) {
            throw new MalformedPayloadException("holds " + h.rows() + " x " + h.cols());
          }
        } catch (MalformedPayloadException e) {
          throw new MalformedPayloadException("rank " + rank() + ": payload from rank " + q + " for a " + to.rows()
              + " x " + to.cols() + " chunk (" + to.plan().describe() + "): " + e.getMessage(), e);
        }
      }
    }
    for (int q = 0; q < in.length; q++) {
      if (q != rank()) {
        to.slots()[q] = in[q];
      }
    }
  }

  @Override
  public void copyRows(float[] src, int srcRow0, float[] dst, int dstRow0, int rows, int cols) {
    System.arraycopy(src, srcRow0 * cols, dst, dstRow0 * cols, rows * cols);
  }

  @Override
  public void toWire(Plan plan, float[] x, int rows, int cols, float[] wire) {
    if (plan.layout() == WireLayout.PERMUTED) {
      permute(x, wire, plan.permutation(), rows, cols, false);
    } else if (plan.layout() == WireLayout.TOKEN_AXIS) {
      transpose(x, wire, rows, cols);
    } else {
      System.arraycopy(x, 0, wire, 0, rows * cols);
    }
  }

  @Override
  public void fromWire(Plan plan, float[] wire, int rows, int cols, float[] x) {
    if (plan.layout() == WireLayout.PERMUTED) {
      permute(wire, x, plan.permutation(), rows, cols, true);
    } else if (plan.layout() == WireLayout.TOKEN_AXIS) {
      transpose(wire, x, cols, rows);
    } else {
      System.arraycopy(wire, 0, x, 0, rows * cols);
    }
  }

  /** {@code dst (cols x rows) = src (rows x cols)^T}. */
  static void transpose(float[] src, float[] dst, int rows, int cols) {
    Transpose.transpose(src, 0, rows, cols, dst, 0);
  }

  /** {@code dst[r, j] = src[r, perm[j]]}, or the inverse {@code dst[r, perm[j]] = src[r, j]}. */
  static void permute(float[] src, float[] dst, int[] perm, int rows, int cols, boolean inverse) {
    for (int r = 0; r < rows; r++) {
      int o = r * cols;
      for (int j = 0; j < cols; j++) {
        if (inverse) {
          dst[o + perm[j]] = src[o + j];
        } else {
          dst[o + j] = src[o + perm[j]];
        }
      }
    }
  }

  /** Where a chunk is, for messages: its tensor rows, how its own rows and columns map to the tensor's. */
  private static String where(Plan plan, int row0, int realRows) {
    String axes = plan.layout() == WireLayout.TOKEN_AXIS ? "; the token-axis layout sends the tensor transposed, so"
        + " a chunk row is a tensor column and a chunk column a tensor row" : "";
    return "chunk of " + (plan.layout() == WireLayout.TOKEN_AXIS ? "wire" : "tensor") + " rows " + row0 + ".."
        + (row0 + realRows) + " (its row r is row " + row0 + " + r" + axes + ")";
  }

  /** The chunk {@code rows x cols}: {@code realRows} rows of {@code x} from {@code row0}, then zero rows. */
  private static float[] chunk(float[] x, int row0, int realRows, int rows, int cols) {
    float[] c = new float[rows * cols];
    if (realRows > 0) {
      System.arraycopy(x, row0 * cols, c, 0, realRows * cols);
    }
    return c;
  }

  private byte[] encodeChunk(Plan plan, float[] chunk, int rows, int cols) {
    byte[] p = new byte[payloadBytes(plan, rows, cols)];
    if (plan.exact()) {
      floats(p).put(chunk);
    } else {
      (plan.groupScaled() ? scaled(plan) : plan.codec()).encode(chunk, 0, rows, cols, p, 0);
    }
    return p;
  }

  /** Own chunk + the peers' payloads (every slot but this rank's), as {@link Wire#reduce} says. */
  private float[] reduceChunk(Plan plan, float[] x, int row0, int realRows, int rows, int cols, Slots recv) {
    float[] own = chunk(x, row0, realRows, rows, cols);
    byte[][] peers = new byte[worldSize()][];
    for (int q = 0; q < peers.length; q++) {
      peers[q] = q == rank() ? null : checked(plan, recv.slots()[q], q, rows, cols);
    }
    if (!plan.exact()) {
      try {
        plan.codec().decodeReduce(peers, rows, cols, own, 0, own, 0);
      } catch (MalformedPayloadException e) {
        throw new MalformedPayloadException("rank " + rank() + " decompress-reduce: " + e.getMessage(), e);
      }
      return own;
    }
    float[] sum = new float[rows * cols];
    for (byte[] p : peers) {
      if (p != null) {
        java.nio.FloatBuffer f = floats(p);
        for (int i = 0; i < sum.length; i++) {
          sum[i] += f.get(i);
        }
      }
    }
    for (int i = 0; i < sum.length; i++) {
      own[i] = sum[i] + own[i];
    }
    return own;
  }

  /** The payload from rank {@code src}, if its length is what the plan and shape imply. */
  private byte[] checked(Plan plan, byte[] p, int src, int rows, int cols) {
    int expected = payloadBytes(plan, rows, cols);
    if (p == null || p.length != expected) {
      throw new MalformedPayloadException("rank " + rank() + ": payload from rank " + src + " for a " + rows + " x "
          + cols + " chunk (" + plan.describe() + ") has " + (p == null ? "no" : String.valueOf(p.length))
          + " bytes, expected " + expected);
    }
    return p;
  }

  private static java.nio.FloatBuffer floats(byte[] b) {
    return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
  }
}
