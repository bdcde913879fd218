package dev.taco.collective;

/**
 * What one collective would cost with a given plan, for {@code --compression auto} (docs/design.md §9): the predicted
 * seconds at this rank of its compress / reduce / decompress work plus its wire phases on a link model. Implementations
 * measure the work on the hardware the run uses ({@link HostPricing} on the CPU, {@code device.DevicePricing} on a GPU)
 * and cache it per shape.
 */
@FunctionalInterface
public interface Pricing {
  /**
   * Predicted seconds of one collective of {@code kind} with {@code plan} over a {@code rows x cols} fp32 tensor
   * ({@code rows} as {@link CollectiveSites#planAt} takes them), its work and its wire phases together.
   */
  double seconds(Plan plan, CollectiveKind kind, int rows, int cols);
}
