package dev.taco.kernels.cuda;

import dev.taco.kernels.cuda.TaskFunctions.*;
import java.io.Serializable;

/**
 * What takes Java kernels as tasks by method reference, TornadoVM's {@code task("t0", Kernels::fn, values...)}: a
 * {@link TaskGraph} records each task as a node of a graph that an {@link ExecutionPlan} runs later, a
 * {@link Launcher} launches it at once on its stream. The one way the project names a kernel to run: one overload per
 * arity ({@link TaskFunctions}), all going to {@link #kernelTask}, which reads the static method the reference names
 * and splits {@code values} into the kernel's specialisation ({@code @Constant} parameters) and its launch arguments.
 *
 * @param <R> what a task returns (the graph, for chaining; nothing for an immediate launch)
 */
public interface KernelTasks<R> {
  /**
   * Takes the kernel task that every {@code task} overload names.
   *
   * @param taskName the task's name, for messages (unique in a graph)
   * @param kernel a {@link TaskFunctions} method reference {@code Class::method} to a static Java kernel
   * @param values one per Java parameter (see {@link #task(String, Task1, Object...)})
   * @return what the taker returns for a task
   * @throws IllegalArgumentException for a lambda or an overloaded kernel, a wrong number of values, or a mistyped value
   *     (naming the task, the parameter's index and name)
   */
  R kernelTask(String taskName, Serializable kernel, Object[] values);

  /**
   * Takes a kernel task: {@code kernel} is a reference {@code Class::method} to a static
   * Java kernel, {@code values} one per Java parameter.
   *
   * @param taskName the task's name (unique in a graph), for messages
   * @param kernel   the kernel, a method reference (the overloads for 2 to 20 parameters read alike)
   * @param values   one per Java parameter: {@link TaskGraph#KERNEL_CONTEXT}, {@code @Constant} values, {@link DeviceBuffer}s
   *                 for arrays, boxed primitives of the parameters' types
   * @param <T1>     the kernel's parameter type
   * @return what the taker returns for a task
   * @throws IllegalArgumentException for a lambda or an overloaded kernel, a wrong number of values, a mistyped value
   *                                  (naming the task, the parameter's index and name), or (in a graph) a duplicate name
   * @throws IllegalStateException    if the kernel's class was compiled without {@code javac -parameters}
   */
  default <T1> R task(String taskName, Task1<T1> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 2-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2> R task(String taskName, Task2<T1, T2> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 3-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3> R task(String taskName, Task3<T1, T2, T3> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 4-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4> R task(String taskName, Task4<T1, T2, T3, T4> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 5-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5> R task(String taskName, Task5<T1, T2, T3, T4, T5> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 6-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6> R task(String taskName,
      Task6<T1, T2, T3, T4, T5, T6> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 7-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7> R task(String taskName,
      Task7<T1, T2, T3, T4, T5, T6, T7> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 8-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8> R task(String taskName,
      Task8<T1, T2, T3, T4, T5, T6, T7, T8> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 9-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9> R task(String taskName,
      Task9<T1, T2, T3, T4, T5, T6, T7, T8, T9> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 10-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10> R task(String taskName,
      Task10<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 11-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11> R task(String taskName,
      Task11<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 12-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12> R task(String taskName,
      Task12<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 13-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13> R task(String taskName,
      Task13<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 14-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14> R task(String taskName,
      Task14<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 15-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15> R task(String taskName,
      Task15<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 16-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16> R task(String taskName,
      Task16<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16> kernel, Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 17-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17> R task(
      String taskName, Task17<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17> kernel,
      Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 18-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18> R task(
      String taskName, Task18<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18> kernel,
      Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 19-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18, T19> R task(
      String taskName,
      Task19<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18, T19> kernel,
      Object... values) {
    return kernelTask(taskName, kernel, values);
  }

  /**
   * Takes a kernel task of a 20-parameter kernel; see {@link #task(String, Task1, Object...)}.
   *
   * @return what the taker returns for a task
   */
  default <T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18, T19, T20> R task(
      String taskName,
      Task20<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18, T19, T20> kernel,
      Object... values) {
    return kernelTask(taskName, kernel, values);
  }
}
