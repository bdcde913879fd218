package dev.taco.runtime.analyze;

import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * One tensor read from a file, converted to float32, in C (row-major) order.
 *
 * @param name the tensor's name in its file ({@code ""} for a {@code .npy} file, which holds one unnamed array)
 * @param shape the dimensions, outermost first ({@code []} for a scalar); each &ge; 0
 * @param dtype the dtype as the file spells it ({@code "<f4"}, {@code "BF16"} ...), before conversion
 * @param data {@code product(shape)} float32 values: f2/F16 and BF16 widened exactly, f8/F64 rounded to the
 *     nearest float32 (finite doubles beyond the float32 range become +-Infinity)
 */
public record NamedTensor(String name, int[] shape, String dtype, float[] data) {

  /** Number of elements, {@code product(shape)} (1 for a scalar). */
  public int size() {
    return data.length;
  }

  /** Columns of the 2-D view a codec sees: the last dimension (1 for a scalar). */
  public int cols() {
    return shape.length == 0 ? 1 : shape[shape.length - 1];
  }

  /** Rows of the 2-D view: the product of all but the last dimension (1 for 1-D and scalars; 0 if empty). */
  public int rows() {
    return cols() == 0 ? 0 : size() / cols();
  }

  /** The shape as {@code 64x256} ({@code scalar} for rank 0). */
  public String shapeString() {
    return shapeString(shape);
  }

  /** A shape as {@code 64x256} ({@code scalar} for rank 0). */
  public static String shapeString(int[] shape) {
    return shape.length == 0 ? "scalar" : Arrays.stream(shape).mapToObj(Integer::toString)
        .collect(Collectors.joining("x"));
  }

  @Override
  public String toString() {
    return "NamedTensor[" + name + ", " + shapeString() + ", " + dtype + "]";
  }
}
