package dev.taco.kernels.cuda;

import com.sun.jna.Memory;

/**
 * A range of device memory ({@code CUdeviceptr} plus a size in bytes), owned (from
 * {@link CudaContext#alloc(long)}, freed by {@link #close()}) or a view ({@link #slice(long, long)},
 * whose {@code close()} does nothing).
 *
 * <p>Synchronous copies from and to Java arrays go through a native staging buffer of at most
 * {@value #STAGING_BYTES} bytes (JNA cannot hand the driver a Java array's storage), so they cost an
 * extra host copy; use {@link PinnedBuffer} and the {@code Async} methods on the hot path.
 *
 * <p>Reference: CUDA Driver API, "Memory Management": {@code cuMemAlloc_v2}, {@code cuMemFree_v2},
 * {@code cuMemcpyHtoD_v2}, {@code cuMemcpyDtoH_v2}, {@code cuMemcpyDtoD_v2} and their {@code Async}
 * forms, {@code cuMemsetD8_v2}.
 */
public final class DeviceBuffer implements AutoCloseable {
  /** Staging chunk for synchronous array copies, bytes. */
  public static final int STAGING_BYTES = 8 << 20;

  private final CudaContext ctx;
  private final long pointer;
  private final long bytes;
  private final boolean owner;
  private volatile boolean closed;

  /** Package-private: {@link CudaContext#alloc(long)} and tests (a fake pointer, never dereferenced). */
  DeviceBuffer(CudaContext ctx, long pointer, long bytes, boolean owner) {
    if (bytes < 0) throw new IllegalArgumentException("bytes must be >= 0, got " + bytes);
    this.ctx = ctx;
    this.pointer = pointer;
    this.bytes = bytes;
    this.owner = owner;
  }

  /** @return the device address ({@code CUdeviceptr}) */
  public long pointer() { checkOpen(); return pointer; }

  /** @return size in bytes */
  public long bytes() { return bytes; }

  /** @return the context the memory belongs to (null only for test fakes) */
  public CudaContext context() {
    return ctx;
  }

  /** @return whether this buffer frees its memory on {@link #close()} (false for slices) */
  public boolean isOwner() {
    return owner;
  }

  /**
   * A view of {@code [offset, offset + length)} of this buffer; closing it does nothing.
   *
   * @param offset byte offset
   * @param length bytes
   * @return the view
   * @throws IndexOutOfBoundsException if the range is outside this buffer
   */
  public DeviceBuffer slice(long offset, long length) {
    checkRange(offset, length);
    return new DeviceBuffer(ctx, pointer + offset, length, false);
  }

  // ------------------------------------------------------------ synchronous copies with Java arrays

  /**
   * Copies a whole {@code float[]} to the start of this buffer.
   *
   * @param src source
   * @throws IndexOutOfBoundsException if it does not fit
   * @throws CudaException             on a driver error
   */
  public void copyFrom(float[] src) { copyFromHost(src, 0, src.length, 0); }

  /**
   * Copies a whole {@code short[]} (e.g. bf16 bits) to the start of this buffer.
   *
   * @param src source
   * @throws IndexOutOfBoundsException if it does not fit
   * @throws CudaException             on a driver error
   */
  public void copyFrom(short[] src) { copyFromHost(src, 0, src.length, 0); }

  /**
   * Copies a whole {@code byte[]} to the start of this buffer.
   *
   * @param src source
   * @throws IndexOutOfBoundsException if it does not fit
   * @throws CudaException             on a driver error
   */
  public void copyFrom(byte[] src) { copyFromHost(src, 0, src.length, 0); }

  /**
   * Fills a whole {@code float[]} from the start of this buffer.
   *
   * @param dst destination
   * @throws IndexOutOfBoundsException if the buffer is smaller than the array
   * @throws CudaException             on a driver error (including errors of earlier async work)
   */
  public void copyTo(float[] dst) { copyToHost(dst, 0, dst.length, 0); }

  /**
   * Fills a whole {@code short[]} from the start of this buffer.
   *
   * @param dst destination
   * @throws IndexOutOfBoundsException if the buffer is smaller than the array
   * @throws CudaException             on a driver error
   */
  public void copyTo(short[] dst) { copyToHost(dst, 0, dst.length, 0); }

  /**
   * Fills a whole {@code byte[]} from the start of this buffer.
   *
   * @param dst destination
   * @throws IndexOutOfBoundsException if the buffer is smaller than the array
   * @throws CudaException             on a driver error
   */
  public void copyTo(byte[] dst) { copyToHost(dst, 0, dst.length, 0); }

  /**
   * Copies {@code count} elements of a primitive array, from index {@code from}, to byte offset
   * {@code dstOffset} of this buffer ({@code cuMemcpyHtoD_v2}, staged in chunks), complete on return: the driver
   * returns from a copy out of pageable memory once it is staged, before the DMA lands (CUDA Driver API, "API
   * synchronization behavior"), and work on the non-blocking streams this project uses does not wait for the legacy
   * stream that DMA is on; so the copy ends with {@code cuStreamSynchronize} of the legacy stream. (Without it, a
   * kernel enqueued right after could read the old contents, or see them land over its output: measured on the
   * H200 under load, a device-local all-reduce whose input upload landed after its result.)
   *
   * @param src       a {@code float[]}, {@code short[]}, {@code byte[]}, {@code int[]}, {@code long[]} or {@code double[]}
   * @param from      first element
   * @param count     element count
   * @param dstOffset byte offset into this buffer
   * @throws IndexOutOfBoundsException if a range is out of bounds
   * @throws IllegalArgumentException  for an unsupported array type
   * @throws CudaException             on a driver error
   */
  public void copyFromHost(Object src, int from, int count, long dstOffset) {
    staged(src, from, count, dstOffset, (staging, device, index, n, bytes) -> {
      HostArrays.write(staging, 0, src, index, n);
      ctx.driver().memcpyHtoD(device, staging, bytes);
    });
    if (count > 0) {
      ctx.driver().streamSynchronize(0L); // the legacy stream: the DMA has landed (method comment)
    }
  }

  /**
   * Copies bytes from byte offset {@code srcOffset} of this buffer into {@code count} elements of a
   * primitive array from index {@code from} ({@code cuMemcpyDtoH_v2}, synchronous, staged in chunks).
   *
   * @param dst       destination array
   * @param from      first element
   * @param count     element count
   * @param srcOffset byte offset into this buffer
   * @throws IndexOutOfBoundsException if a range is out of bounds
   * @throws IllegalArgumentException  for an unsupported array type
   * @throws CudaException             on a driver error
   */
  public void copyToHost(Object dst, int from, int count, long srcOffset) {
    staged(dst, from, count, srcOffset, (staging, device, index, n, bytes) -> {
      ctx.driver().memcpyDtoH(staging, device, bytes);
      HostArrays.read(staging, 0, dst, index, n);
    });
  }

  /** One chunk of a staged copy: {@code n} elements at array index {@code index}, {@code bytes} at {@code device}. */
  private interface Chunk {
    void copy(Memory staging, long device, int index, int n, long bytes);
  }

  /**
   * The staged copy both directions share: checks the ranges, then moves {@code count} elements of {@code array}
   * from {@code from} through one staging block of at most {@value #STAGING_BYTES} bytes, chunk by chunk, against
   * this buffer from byte {@code offset}.
   */
  private void staged(Object array, int from, int count, long offset, Chunk chunk) {
    int eb = HostArrays.elementBytes(array);
    java.util.Objects.checkFromIndexSize(from, count, HostArrays.length(array));
    long total = (long) count * eb;
    checkRange(offset, total);
    if (total == 0) return;
    ctx.makeCurrent();
    int perChunk = Math.max(1, STAGING_BYTES / eb);
    try (Memory staging = new Memory(Math.min(total, (long) perChunk * eb))) {
      for (int done = 0; done < count;) {
        int n = Math.min(perChunk, count - done);
        chunk.copy(staging, pointer + offset + (long) done * eb, from + done, n, (long) n * eb);
        done += n;
      }
    }
  }

  // ------------------------------------------------------------ device and pinned copies

  /**
   * Copies {@code length} bytes from the start of {@code src} to the start of this buffer
   * ({@code cuMemcpyDtoD_v2}; ordered after earlier work on the legacy default stream).
   *
   * @param src    source buffer
   * @param length bytes
   * @throws IndexOutOfBoundsException if either buffer is too small
   * @throws CudaException             on a driver error
   */
  public void copyFrom(DeviceBuffer src, long length) {
    src.checkRange(0, length);
    checkRange(0, length);
    ctx.makeCurrent();
    ctx.driver().memcpyDtoD(pointer, src.pointer(), length);
  }

  /**
   * Enqueues a copy of {@code length} bytes from {@code src} to this buffer on {@code stream}
   * ({@code cuMemcpyDtoDAsync_v2}, direct mapping).
   *
   * @param src    source buffer
   * @param length bytes
   * @param stream the stream
   * @throws IndexOutOfBoundsException if either buffer is too small
   * @throws CudaException             on a driver error
   */
  public void copyFromAsync(DeviceBuffer src, long length, CudaStream stream) {
    src.checkRange(0, length);
    checkRange(0, length);
    ctx.makeCurrent();
    ctx.driver().memcpyDtoDAsync(pointer, src.pointer(), length, stream.handle());
  }

  /**
   * Enqueues a host-to-device copy from pinned memory on {@code stream} ({@code cuMemcpyHtoDAsync_v2}).
   * The pinned range must not be changed until the stream reaches this copy.
   *
   * @param src       pinned source
   * @param srcOffset byte offset into {@code src}
   * @param dstOffset byte offset into this buffer
   * @param length    bytes
   * @param stream    the stream
   * @throws IndexOutOfBoundsException if a range is out of bounds
   * @throws CudaException             on a driver error
   */
  public void copyFromAsync(PinnedBuffer src, long srcOffset, long dstOffset, long length, CudaStream stream) {
    checkRange(dstOffset, length);
    if (srcOffset < 0 || srcOffset + length > src.bytes())
      throw new IndexOutOfBoundsException("pinned source range out of bounds");
    ctx.makeCurrent();
    ctx.driver().memcpyHtoDAsync(pointer + dstOffset, src.address() + srcOffset, length, stream.handle());
  }

  /**
   * Enqueues a device-to-host copy into pinned memory on {@code stream} ({@code cuMemcpyDtoHAsync_v2});
   * the data is there once the stream is synchronised.
   *
   * @param dst       pinned destination
   * @param dstOffset byte offset into {@code dst}
   * @param srcOffset byte offset into this buffer
   * @param length    bytes
   * @param stream    the stream
   * @throws IndexOutOfBoundsException if a range is out of bounds
   * @throws CudaException             on a driver error
   */
  public void copyToAsync(PinnedBuffer dst, long dstOffset, long srcOffset, long length, CudaStream stream) {
    checkRange(srcOffset, length);
    if (dstOffset < 0 || dstOffset + length > dst.bytes())
      throw new IndexOutOfBoundsException("pinned destination range out of bounds");
    ctx.makeCurrent();
    ctx.driver().memcpyDtoHAsync(dst.address() + dstOffset, pointer + srcOffset, length, stream.handle());
  }

  /**
   * Sets every byte to {@code value} ({@code cuMemsetD8_v2}).
   *
   * @param value the byte
   * @throws CudaException on a driver error
   */
  public void memset(byte value) {
    ctx.makeCurrent();
    ctx.driver().memsetD8(pointer(), value, bytes);
  }

  /**
   * Enqueues setting every byte to {@code value} on {@code stream} ({@code cuMemsetD8Async}).
   *
   * @param value  the byte
   * @param stream the stream
   * @throws CudaException on a driver error
   */
  public void memsetAsync(byte value, CudaStream stream) {
    ctx.makeCurrent();
    ctx.driver().memsetD8Async(pointer(), value, bytes, stream.handle());
  }

  void checkRange(long offset, long length) {
    if (offset < 0 || length < 0 || offset + length > bytes) {
      throw new IndexOutOfBoundsException(
          "range [" + offset + ", " + (offset + length) + ") outside device buffer of " + bytes + " bytes");
    }
  }

  private void checkOpen() {
    if (closed) throw new IllegalStateException("device buffer is closed");
  }

  /** @return whether {@link #close()} has been called */
  public boolean isClosed() { return closed; }

  /**
   * Frees the memory if this buffer owns it ({@code cuMemFree_v2}); idempotent; a no-op for slices.
   *
   * @throws CudaException on a driver error
   */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    if (owner && ctx != null) {
      ctx.makeCurrent();
      ctx.driver().memFree(pointer);
    }
  }

  @Override
  public String toString() {
    return String.format("DeviceBuffer[0x%x, %d bytes%s]", pointer, bytes, owner ? "" : ", view");
  }
}
