package dev.taco.kernels.cuda;

import com.sun.jna.Pointer;

/**
 * Page-locked ("pinned") host memory from {@code cuMemAllocHost_v2}: the host side of asynchronous
 * copies, which are only asynchronous (and reach full PCIe/C2C bandwidth) from pinned memory.
 *
 * <p>Reference: CUDA Driver API, "Memory Management", {@code cuMemAllocHost}, {@code cuMemFreeHost}.
 */
public final class PinnedBuffer implements AutoCloseable {
  private final CudaContext ctx;
  private final long address;
  private final long bytes;
  private final Pointer pointer;
  private volatile boolean closed;

  PinnedBuffer(CudaContext ctx, long address, long bytes) {
    this.ctx = ctx;
    this.address = address;
    this.bytes = bytes;
    this.pointer = new Pointer(address);
  }

  /** @return the host address */
  public long address() { checkOpen(); return address; }

  /** @return the memory as a JNA pointer (valid until {@link #close()}) */
  public Pointer pointer() {
    checkOpen();
    return pointer;
  }

  /** @return size in bytes */
  public long bytes() { return bytes; }

  /** @return the context it was allocated in */
  public CudaContext context() { return ctx; }

  /**
   * Copies a whole primitive array into this buffer at byte offset {@code offset}.
   *
   * @param offset byte offset
   * @param array  a {@code float[]}, {@code short[]}, {@code byte[]}, {@code int[]}, {@code long[]} or {@code double[]}
   * @throws IndexOutOfBoundsException if it does not fit
   * @throws IllegalArgumentException  for an unsupported array type
   */
  public void write(long offset, Object array) {
    checkOpen();
    checkRange(offset, HostArrays.byteSize(array));
    HostArrays.write(pointer, offset, array, 0, HostArrays.length(array));
  }

  /**
   * Fills a whole primitive array from this buffer starting at byte offset {@code offset}.
   *
   * @param offset byte offset
   * @param array  destination array
   * @throws IndexOutOfBoundsException if the range exceeds the buffer
   * @throws IllegalArgumentException  for an unsupported array type
   */
  public void read(long offset, Object array) {
    checkOpen();
    checkRange(offset, HostArrays.byteSize(array));
    HostArrays.read(pointer, offset, array, 0, HostArrays.length(array));
  }

  private void checkRange(long offset, long n) {
    if (offset < 0 || n < 0 || offset + n > bytes) {
      throw new IndexOutOfBoundsException(
          "range [" + offset + ", " + (offset + n) + ") outside pinned buffer of " + bytes + " bytes");
    }
  }

  private void checkOpen() {
    if (closed) throw new IllegalStateException("pinned buffer is closed");
  }

  /**
   * Frees the memory ({@code cuMemFreeHost}); idempotent.
   *
   * @throws CudaException on failure
   */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    ctx.makeCurrent();
    ctx.driver().memFreeHost(address);
  }
}
