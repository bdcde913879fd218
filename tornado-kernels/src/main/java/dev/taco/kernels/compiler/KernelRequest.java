package dev.taco.kernels.compiler;

import java.util.Map;

/**
 * One kernel to translate: the binary name of its class, the method name (must be unique in the class: kernels are
 * not overloaded) and its specialisation, parameter name to compile-time value ({@code Integer}, {@code Long} or
 * {@code Boolean}; required for every {@link dev.taco.kernels.Constant} parameter, allowed for any primitive
 * parameter). Specialised parameters are removed from the entry point's signature.
 */
public record KernelRequest(String className, String methodName, Map<String, Object> constants) {
  /** Validates and copies the map. */
  public KernelRequest {
    constants = Map.copyOf(constants);
  }

  /** A request without specialisation. */
  public static KernelRequest of(Class<?> type, String methodName) {
    return new KernelRequest(type.getName(), methodName, Map.of());
  }

  /** A request with specialisation. */
  public static KernelRequest of(Class<?> type, String methodName, Map<String, Object> constants) {
    return new KernelRequest(type.getName(), methodName, constants);
  }
}
