package dev.taco.kernels.cuda;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;

/**
 * Kernel arguments packed for {@code cuLaunchKernel}'s {@code kernelParams}: a native array of
 * {@code void*}, entry i pointing at argument i's value.
 *
 * <p>Each value sits in its own 8-byte slot. Accepted Java values and the C parameter they fill:
 * {@link DeviceBuffer} → a device pointer ({@code T*}, 8 bytes); {@code Integer} → {@code int} /
 * {@code unsigned}; {@code Long} → {@code long long}; {@code Float} → {@code float};
 * {@code Double} → {@code double}; {@code Short} → {@code short}; {@code Byte} → {@code char};
 * {@code Boolean} → {@code bool}. The driver reads the values during {@code cuLaunchKernel}, so one
 * {@code KernelArgs} can be re-launched and {@link #set(int, Object)} between launches (a pre-packed
 * argument list makes a launch allocation-free).
 *
 * <p>Reference: CUDA Driver API, "Execution Control", {@code cuLaunchKernel} (parameter
 * {@code kernelParams}).
 */
public final class KernelArgs {
  private final int count;
  private final Memory values; // count × 8 bytes
  private final Memory pointers; // count × 8 bytes: &values[i]

  /**
   * Packs {@code args}.
   *
   * @param args the arguments, in the kernel's parameter order
   * @throws IllegalArgumentException for a null or unsupported argument (the message names its index)
   */
  public KernelArgs(Object... args) {
    this.count = args.length;
    for (int i = 0; i < count; i++) check(i, args[i]);
    if (count == 0) {
      values = null;
      pointers = null;
      return;
    }
    values = new Memory(8L * count);
    pointers = new Memory(8L * count);
    values.clear();
    for (int i = 0; i < count; i++) {
      pointers.setPointer(8L * i, values.share(8L * i));
      store(i, args[i]);
    }
  }

  /**
   * Checks that {@code arg} can be a kernel argument.
   *
   * @param index the argument's position, for the message
   * @param arg   the value
   * @throws IllegalArgumentException if null or of an unsupported type
   */
  public static void check(int index, Object arg) {
    switch (arg) {
      case DeviceBuffer b -> {}
      case Integer v -> {}
      case Long v -> {}
      case Float v -> {}
      case Double v -> {}
      case Short v -> {}
      case Byte v -> {}
      case Boolean v -> {}
      case null -> throw new IllegalArgumentException("kernel argument " + index + " is null");
      default -> throw new IllegalArgumentException("kernel argument " + index + " has unsupported type "
          + arg.getClass().getName() + " (DeviceBuffer, Integer, Long, Float, Double, Short, Byte, Boolean)");
    }
  }

  /**
   * Replaces argument {@code index}; the next launch uses the new value.
   *
   * @param index argument position
   * @param arg   the new value
   * @throws IndexOutOfBoundsException if {@code index} is out of range
   * @throws IllegalArgumentException  for an unsupported value
   */
  public void set(int index, Object arg) {
    java.util.Objects.checkIndex(index, count);
    check(index, arg);
    store(index, arg);
  }

  private void store(int i, Object arg) {
    long off = 8L * i;
    values.setLong(off, 0L);
    switch (arg) {
      case DeviceBuffer b -> values.setLong(off, b.pointer());
      case Integer v -> values.setInt(off, v);
      case Long v -> values.setLong(off, v);
      case Float v -> values.setFloat(off, v);
      case Double v -> values.setDouble(off, v);
      case Short v -> values.setShort(off, v);
      case Byte v -> values.setByte(off, v);
      case Boolean v -> values.setByte(off, (byte) (v ? 1 : 0));
      default -> throw new IllegalArgumentException("unsupported kernel argument");
    }
  }

  /** @return the number of arguments */
  public int count() { return count; }

  /** @return the address of the {@code void*[]} to pass as {@code kernelParams}, 0 if there are none */
  public long address() {
    return pointers == null ? 0L : Pointer.nativeValue(pointers);
  }

  /** @return the {@code void*[]} as a JNA pointer, null if there are no arguments */
  public Pointer pointer() {
    return pointers;
  }
}
