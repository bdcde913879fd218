package dev.taco.runtime.model;

import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.runtime.layers.Matmul;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The GEMM operands of a GPU rank in bf16 mode ({@link CudaOps.Precision#BF16}): bf16 copies of fp32 tensors, made by
 * rounding ({@link Matmul#roundToBf16}) or written by the tensor's producer beside (or instead of) its fp32 values, and
 * the bookkeeping that says which copy may be taken as it is. In fp32 mode every operand is the fp32 tensor in place.
 *
 * <p>Three kinds of copy: a forward pass's operands (activations and weights) are kept per tensor ({@link #kept}) for
 * the backward of the same tensors ({@link #reused}); an output gradient goes to a work-space slot, used by one
 * backward call ({@link #operand}); a producer that writes a copy with its output marks it fresh ({@link #wroteCopy},
 * {@link #wroteGradientCopy}) so the next consumer takes it instead of rounding again. A collective that writes a
 * tensor ends every freshness ({@link #collectiveWrote}). Tensors whose producer writes only the copy
 * ({@link #bf16Only}) are refused for rounding, since their fp32 region holds no values.
 *
 * <p>The rule that makes keeping copies safe is the model's: a backward multiplies the activations and weights its
 * forward multiplied, unchanged in between ({@link Gpt#trainStep}: forward, backward, then the optimizer); every
 * forward rounds afresh, or its producer writes the copy. The copies cost 2 bytes per element of every GEMM input of
 * the step ({@link CudaOps#forwardCopyBytes}) and save a read and a half-size write of each in the backward.
 */
final class Bf16Copies {
  /** A GEMM operand: where it is and in which type ({@code off} in elements of that type). */
  record Operand(DeviceBuffer buf, long off, DataType type) {}

  /**
   * Work-space slots of the bf16 operands: an activation, a weight, an output gradient (a GEMM reads two at once),
   * dqkv's copy, which flash attention's backward writes while it reads dout's in the gradient slot, and the bf16
   * dout · w^T that the GELU backward reads.
   */
  enum Slot {
    ACTIVATION, WEIGHT, GRADIENT, DQKV, GELU_INPUT
  }

  /** Where a copy was made from: an arena's device address, an offset and a length, in elements. */
  private record Key(long pointer, long offset, long n) {
    static Key of(View<DeviceBuffer> v, long n) {
      return new Key(v.arena().pointer(), v.offset(), n);
    }
  }

  /** A bf16 copy of the {@code n} elements of a view that its producer wrote. */
  private record Fresh(Key key, DeviceBuffer copy) {}

  private final DeviceStream device;
  private final boolean bf16;
  private final DeviceBuffer[] slots = new DeviceBuffer[Slot.values().length];
  private final Map<Key, DeviceBuffer> forward = new HashMap<>();
  private final Set<Key> bf16Only = new HashSet<>();
  /** The activation whose kept copy its producer has just written, or null: the next {@link #kept} may take it. */
  private Key freshCopy;
  /** The gradient whose slot copy its producer has just written, or null: the next gradient operand may take it. */
  private Fresh freshGradient;

  /** @param bf16 whether the operands are bf16 copies (bf16 mode) or the fp32 tensors themselves */
  Bf16Copies(DeviceStream device, boolean bf16) {
    this.device = device;
    this.bf16 = bf16;
  }

  /**
   * The {@code n} elements of {@code v} as a GEMM operand: in place (fp32) in fp32 mode; in bf16 mode rounded into
   * work-space slot {@code slot} (an output gradient, used by one backward call), or the fresh copy its producer
   * wrote.
   */
  Operand operand(View<DeviceBuffer> v, long n, Slot slot) {
    if (!bf16) return new Operand(v.arena(), v.offset(), DataType.F32);
    if (slot == Slot.GRADIENT) {
      Fresh f = freshGradient;
      freshGradient = null;
      if (f != null && f.key.equals(Key.of(v, n))) return new Operand(f.copy, 0, DataType.BF16);
    }
    return roundInto(slot(slot, n), v, n);
  }

  /**
   * A forward pass's GEMM operand (an activation or a weight): as {@link #operand}, but in bf16 mode rounded into a
   * copy kept for this tensor (its arena, offset and size), which the backward takes through {@link #reused}; or the
   * copy its producer just wrote ({@link #wroteCopy}).
   */
  Operand kept(View<DeviceBuffer> v, long n) {
    if (!bf16) return operand(v, n, Slot.ACTIVATION);
    DeviceBuffer s = forwardCopy(v, n);
    boolean fresh = Key.of(v, n).equals(freshCopy);
    freshCopy = null;
    return fresh ? new Operand(s, 0, DataType.BF16) : roundInto(s, v, n);
  }

  /** A backward pass's operand: the copy {@link #kept} made in the forward, else {@link #operand}'s. */
  Operand reused(View<DeviceBuffer> v, long n, Slot slot) {
    DeviceBuffer s = bf16 ? forward.get(Key.of(v, n)) : null;
    return s != null ? new Operand(s, 0, DataType.BF16) : operand(v, n, slot);
  }

  /** The bf16 copy {@link #kept} keeps for {@code n} elements of {@code v}, allocated at first use. */
  DeviceBuffer forwardCopy(View<DeviceBuffer> v, long n) {
    return forward.computeIfAbsent(Key.of(v, n), k -> device.alloc(words(n)));
  }

  /** The kept copy of {@code n} elements of {@code v}, or null if no forward made one. */
  DeviceBuffer forwardCopyOf(View<DeviceBuffer> v, long n) {
    return forward.get(Key.of(v, n));
  }

  /** Work-space slot {@code slot}, of at least {@code n} bf16 elements. */
  DeviceBuffer slot(Slot slot, long n) {
    DeviceBuffer s = slots[slot.ordinal()];
    if (s == null || s.bytes() < 2 * n) {
      device.release(s);
      s = device.alloc(words(n));
      slots[slot.ordinal()] = s;
    }
    return s;
  }

  /** {@code v}'s producer has just written its kept copy ({@link #forwardCopy}) along with it. */
  void wroteCopy(View<DeviceBuffer> v, long n) {
    freshCopy = Key.of(v, n);
  }

  /** Nothing fresh in the forward copies: the next {@link #kept} rounds. */
  void noFreshCopy() {
    freshCopy = null;
  }

  /** {@code v}'s producer has just written its bf16 copy into {@code copy} (a slot): the next gradient operand. */
  void wroteGradientCopy(View<DeviceBuffer> v, long n, DeviceBuffer copy) {
    freshGradient = new Fresh(Key.of(v, n), copy);
  }

  /** Nothing fresh in the gradient slot (a kernel is about to overwrite it). */
  void noFreshGradient() {
    freshGradient = null;
  }

  /** {@code v}'s producer writes only its bf16 copy: its fp32 region holds no values and may not be rounded. */
  void bf16Only(View<DeviceBuffer> v, long n) {
    bf16Only.add(Key.of(v, n));
  }

  /** A collective may change a tensor whose copy was fresh: from here on every operand is rounded afresh. */
  void collectiveWrote() {
    freshCopy = null;
    freshGradient = null;
  }

  /** Rounds the {@code n} elements of {@code v} to bf16 into {@code s}, eight per thread where aligned. */
  private Operand roundInto(DeviceBuffer s, View<DeviceBuffer> v, long n) {
    if (bf16Only.contains(Key.of(v, n))) {
      throw new IllegalStateException("a GEMM operand of " + n + " elements at offset " + v.offset() + " is stored in "
          + "bf16 only, and its copy is not the one its producer wrote last");
    }
    DeviceBuffer in = DeviceStream.slice("operand", v, n);
    if (v.offset() % 4 == 0 && n % 8 == 0) { // 16-byte aligned: eight elements per thread
      device.parallel(n / 8).task("roundToBf16x8", Matmul::roundToBf16x8, s, 0, in, 0, (int) (n / 8));
    } else {
      device.parallel(n).task("roundToBf16", Matmul::roundToBf16, s, 0, in, 0, (int) n);
    }
    return new Operand(s, 0, DataType.BF16);
  }

  /** 32-bit words holding {@code n} bf16 elements. */
  static long words(long n) {
    if (n > Integer.MAX_VALUE) throw new IllegalArgumentException("a bf16 operand of " + n + " elements is too large");
    return (n + 1) / 2;
  }
}
