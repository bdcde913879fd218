package dev.taco.kernels.compiler;

import java.util.Map;

/**
 * One kernel to translate: the binary name of its class, the method name (must be unique in the class: kernels are
 * not overloaded) and its specialisation, parameter name to compile-time value (a {@code Boolean} for a boolean
 * parameter, else a {@code Number}: for an integer parameter one whose value is a whole number in the parameter's
 * range, {@code 4L} or {@code 4.0} for an int; taken as the parameter's type); required for every
 * {@link dev.taco.kernels.Constant} parameter, allowed for any primitive parameter. Specialised parameters are removed
 * from the entry point's signature. The translator refuses a name that is not a parameter of the kernel and a value
 * that does not fit, naming both ({@link KernelCompileException}).
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
