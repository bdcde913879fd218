package dev.taco.kernels.cuda;

/**
 * A step standing in for a collective in tests: copies {@code src} into {@code dst} on its lane's stream
 * ({@code cuMemcpyDtoDAsync_v2}), like the body going over the wire to a peer.
 *
 * @param name       the step's name
 * @param src        the source (all of it is copied)
 * @param dst        the destination, at least as large
 * @param capturable what {@link TaskGraph.Step#capturable()} answers
 */
record CopyStep(String name, DeviceBuffer src, DeviceBuffer dst, boolean capturable) implements TaskGraph.Step {
  @Override
  public void enqueue(CudaStream stream, boolean first) {
    dst.copyFromAsync(src, src.bytes(), stream);
  }
}
