package dev.taco.kernels.cuda;

import dev.taco.kernels.Constant;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.compiler.KernelRequest;
import java.io.Serializable;
import java.lang.invoke.MethodHandleInfo;
import java.lang.invoke.MethodType;
import java.lang.invoke.SerializedLambda;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Parameter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The static kernel method a {@link TaskFunctions} method reference names, and the split of a task's values into
 * its specialisation and its launch arguments (one concept: what {@link TaskGraph#task} needs to know of a kernel).
 *
 * <p>A method reference to a static method compiles to a lambda whose {@link SerializedLambda} (from the
 * {@code writeReplace} method every serializable lambda has) names the implementation class and method; the method
 * is found by name and descriptor. Lambdas, bound references ({@code obj::m}) and instance methods are refused.
 */
final class KernelMethod {
  private final Method method;

  private KernelMethod(Method method) {
    this.method = method;
  }

  /** A kernel's specialisation and launch arguments. */
  record Binding(KernelRequest request, List<Object> launchArgs) {}

  /**
   * @param task the task's name, for messages
   * @param ref  a {@code Class::method} reference to a static kernel
   * @return the kernel method
   * @throws IllegalArgumentException if {@code ref} is no such reference, or names an overloaded or non-void method
   */
  static KernelMethod of(String task, Serializable ref) {
    SerializedLambda l;
    try {
      Method w = ref.getClass().getDeclaredMethod("writeReplace");
      w.setAccessible(true);
      l = (SerializedLambda) w.invoke(ref);
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new IllegalArgumentException("task '" + task + "': the kernel must be a method reference Class::method, "
          + "got " + ref.getClass().getName(), e);
    }
    String name = l.getImplMethodName();
    if (l.getImplMethodKind() != MethodHandleInfo.REF_invokeStatic || l.getCapturedArgCount() != 0
        || name.startsWith("lambda$")) {
      throw new IllegalArgumentException("task '" + task + "': the kernel must be a reference Class::method to a "
          + "static method, not a lambda or a bound or instance method reference (" + l.getImplClass() + "." + name
          + ")");
    }
    Class<?> owner;
    try {
      owner = Class.forName(l.getImplClass().replace('/', '.'), false, ref.getClass().getClassLoader());
    } catch (ClassNotFoundException e) {
      throw new IllegalArgumentException("task '" + task + "': kernel class " + l.getImplClass() + " not found", e);
    }
    List<Method> named = Arrays.stream(owner.getDeclaredMethods()).filter(m -> m.getName().equals(name)).toList();
    if (named.size() != 1) {
      throw new IllegalArgumentException("task '" + task + "': kernel " + owner.getSimpleName() + "." + name
          + " is overloaded; kernels need a unique name (KernelTranslator)");
    }
    Method m = named.get(0);
    String descriptor = MethodType.methodType(m.getReturnType(), m.getParameterTypes()).toMethodDescriptorString();
    if (!descriptor.equals(l.getImplMethodSignature()) || m.getReturnType() != void.class
        || !Modifier.isStatic(m.getModifiers())) {
      throw new IllegalArgumentException("task '" + task + "': " + owner.getSimpleName() + "." + name
          + " is not a static void kernel");
    }
    return new KernelMethod(m);
  }

  /** @return the kernel's method */
  Method method() {
    return method;
  }

  /**
   * Splits one value per Java parameter: a {@link KernelContext} parameter takes {@link TaskGraph#KERNEL_CONTEXT}
   * (any {@code KernelContext}; the GPU supplies the real one) and is dropped; {@link Constant} parameters take a boxed
   * value of their type ({@code Integer}, {@code Long} or {@code Boolean}) that specialises the kernel; array
   * parameters take a {@link DeviceBuffer}; other primitive parameters the boxed value of exactly their type (no
   * widening: the launch packs the value's own width).
   *
   * @param task   the task's name, for messages
   * @param values one per Java parameter
   * @return the request and the launch arguments, in parameter order
   * @throws IllegalArgumentException naming the task, the parameter's index, name and type, for a missing, extra or
   *                                  mistyped value
   * @throws IllegalStateException    if the class was compiled without {@code javac -parameters}
   */
  Binding bind(String task, Object[] values) {
    Parameter[] ps = method.getParameters();
    String kernel = method.getDeclaringClass().getSimpleName() + "." + method.getName();
    if (values.length != ps.length) {
      throw new IllegalArgumentException("task '" + task + "': " + kernel + " has " + ps.length + " parameters, got "
          + values.length + " values (one per Java parameter; TaskGraph.KERNEL_CONTEXT for a KernelContext)");
    }
    Map<String, Object> constants = new HashMap<>();
    List<Object> args = new ArrayList<>();
    for (int i = 0; i < ps.length; i++) {
      Parameter p = ps[i];
      if (!p.isNamePresent()) {
        throw new IllegalStateException(kernel + " was compiled without javac -parameters: its @Constant values "
            + "cannot be matched to parameter names");
      }
      Class<?> t = p.getType();
      Object v = values[i];
      String where = "task '" + task + "': argument " + i + " (" + p.getName() + ": " + t.getSimpleName() + ") of "
          + kernel;
      if (v == null) {
        throw new IllegalArgumentException(where + " is null");
      }
      if (KernelContext.class.isAssignableFrom(t)) {
        if (!(v instanceof KernelContext)) {
          throw new IllegalArgumentException(where + " must be TaskGraph.KERNEL_CONTEXT, got " + typeName(v));
        }
      } else if (p.isAnnotationPresent(Constant.class)) {
        if (t != int.class && t != long.class && t != boolean.class) {
          throw new IllegalArgumentException(where + ": only int, long and boolean parameters can be @Constant");
        }
        constants.put(p.getName(), check(where, box(t), v));
      } else if (t.isArray() && t.getComponentType().isPrimitive()) {
        args.add(check(where, DeviceBuffer.class, v));
      } else if (t.isPrimitive()) {
        args.add(check(where, box(t), v));
      } else {
        throw new IllegalArgumentException(where + ": unsupported kernel parameter type (primitives, primitive arrays, "
            + "KernelContext)");
      }
    }
    return new Binding(new KernelRequest(method.getDeclaringClass().getName(), method.getName(), constants),
        List.copyOf(args));
  }

  private static Object check(String where, Class<?> want, Object v) {
    if (!want.isInstance(v)) {
      throw new IllegalArgumentException(where + " must be a" + (want == Integer.class ? "n " : " ")
          + want.getSimpleName() + ", got " + typeName(v));
    }
    return v;
  }

  private static String typeName(Object v) {
    return v.getClass().getSimpleName();
  }

  private static Class<?> box(Class<?> primitive) {
    return MethodType.methodType(primitive).wrap().returnType();
  }
}
