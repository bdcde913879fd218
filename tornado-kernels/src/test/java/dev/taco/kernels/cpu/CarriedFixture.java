package dev.taco.kernels.cpu;

/** A class for {@link ParallelKernelsTest} to compile a broken {@code @Parallel} source against (see there). */
final class CarriedFixture {
  private CarriedFixture() {}
}
