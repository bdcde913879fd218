package dev.taco.collective.device;

import dev.taco.kernels.cuda.DeviceBuffer;
import java.util.Objects;

/**
 * A row-major tensor on the device: its buffer and element type (bf16 or fp32); the shape travels with each call.
 *
 * @param buffer the device memory (16-byte aligned: allocations and 16-byte multiple slices are)
 * @param bf16 true for bfloat16 elements (2 bytes), false for float32 (4 bytes)
 */
public record DeviceTensor(DeviceBuffer buffer, boolean bf16) {
  /** @throws NullPointerException if {@code buffer} is null */
  public DeviceTensor {
    Objects.requireNonNull(buffer, "buffer");
  }

  /** Bytes per element: 2 or 4. */
  public int elementBytes() {
    return bf16 ? 2 : 4;
  }
}
