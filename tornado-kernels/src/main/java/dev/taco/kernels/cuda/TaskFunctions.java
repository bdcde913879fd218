package dev.taco.kernels.cuda;

import java.io.Serializable;

/**
 * The shapes of kernel method references a {@link TaskGraph} task takes, one per arity, as TornadoVM's
 * {@code TornadoFunctions.Task1 ... Task15}: {@code .task("compress", TacoGpuKernels::compress, ...)} picks the
 * interface of the kernel's parameter count. They are {@link Serializable} so that the graph can read which static
 * method a reference names ({@link java.lang.invoke.SerializedLambda}: implementation class and method); the graph
 * never calls {@code apply}, the GPU runs the kernel's CUDA C translation.
 */
public final class TaskFunctions {
  private TaskFunctions() {}

  /**
   * A kernel of 1 parameter.
   *
   * @param <T1> parameter 1
   */
  @FunctionalInterface
  public interface Task1<T1> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1);
  }

  /**
   * A kernel of 2 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   */
  @FunctionalInterface
  public interface Task2<T1, T2> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2);
  }

  /**
   * A kernel of 3 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   */
  @FunctionalInterface
  public interface Task3<T1, T2, T3> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3);
  }

  /**
   * A kernel of 4 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   */
  @FunctionalInterface
  public interface Task4<T1, T2, T3, T4> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4);
  }

  /**
   * A kernel of 5 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   */
  @FunctionalInterface
  public interface Task5<T1, T2, T3, T4, T5> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5);
  }

  /**
   * A kernel of 6 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   */
  @FunctionalInterface
  public interface Task6<T1, T2, T3, T4, T5, T6> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6);
  }

  /**
   * A kernel of 7 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   */
  @FunctionalInterface
  public interface Task7<T1, T2, T3, T4, T5, T6, T7> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7);
  }

  /**
   * A kernel of 8 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   */
  @FunctionalInterface
  public interface Task8<T1, T2, T3, T4, T5, T6, T7, T8> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8);
  }

  /**
   * A kernel of 9 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   */
  @FunctionalInterface
  public interface Task9<T1, T2, T3, T4, T5, T6, T7, T8, T9> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9);
  }

  /**
   * A kernel of 10 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   */
  @FunctionalInterface
  public interface Task10<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10);
  }

  /**
   * A kernel of 11 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   */
  @FunctionalInterface
  public interface Task11<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11);
  }

  /**
   * A kernel of 12 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   */
  @FunctionalInterface
  public interface Task12<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12);
  }

  /**
   * A kernel of 13 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   */
  @FunctionalInterface
  public interface Task13<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13);
  }

  /**
   * A kernel of 14 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   * @param <T14> parameter 14
   */
  @FunctionalInterface
  public interface Task14<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13,
        T14 a14);
  }

  /**
   * A kernel of 15 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   * @param <T14> parameter 14
   * @param <T15> parameter 15
   */
  @FunctionalInterface
  public interface Task15<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13,
        T14 a14, T15 a15);
  }

  /**
   * A kernel of 16 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   * @param <T14> parameter 14
   * @param <T15> parameter 15
   * @param <T16> parameter 16
   */
  @FunctionalInterface
  public interface Task16<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16> extends Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13,
        T14 a14, T15 a15, T16 a16);
  }

  /**
   * A kernel of 17 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   * @param <T14> parameter 14
   * @param <T15> parameter 15
   * @param <T16> parameter 16
   * @param <T17> parameter 17
   */
  @FunctionalInterface
  public interface Task17<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17>
      extends
        Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13,
        T14 a14, T15 a15, T16 a16, T17 a17);
  }

  /**
   * A kernel of 18 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   * @param <T14> parameter 14
   * @param <T15> parameter 15
   * @param <T16> parameter 16
   * @param <T17> parameter 17
   * @param <T18> parameter 18
   */
  @FunctionalInterface
  public interface Task18<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18>
      extends
        Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13,
        T14 a14, T15 a15, T16 a16, T17 a17, T18 a18);
  }

  /**
   * A kernel of 19 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   * @param <T14> parameter 14
   * @param <T15> parameter 15
   * @param <T16> parameter 16
   * @param <T17> parameter 17
   * @param <T18> parameter 18
   * @param <T19> parameter 19
   */
  @FunctionalInterface
  public interface Task19<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18, T19>
      extends
        Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13,
        T14 a14, T15 a15, T16 a16, T17 a17, T18 a18, T19 a19);
  }

  /**
   * A kernel of 20 parameters.
   *
   * @param <T1> parameter 1
   * @param <T2> parameter 2
   * @param <T3> parameter 3
   * @param <T4> parameter 4
   * @param <T5> parameter 5
   * @param <T6> parameter 6
   * @param <T7> parameter 7
   * @param <T8> parameter 8
   * @param <T9> parameter 9
   * @param <T10> parameter 10
   * @param <T11> parameter 11
   * @param <T12> parameter 12
   * @param <T13> parameter 13
   * @param <T14> parameter 14
   * @param <T15> parameter 15
   * @param <T16> parameter 16
   * @param <T17> parameter 17
   * @param <T18> parameter 18
   * @param <T19> parameter 19
   * @param <T20> parameter 20
   */
  @FunctionalInterface
  public interface Task20<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, T17, T18, T19, T20>
      extends
        Serializable {
    /** The kernel (never called by the graph). */
    void apply(T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11, T12 a12, T13 a13,
        T14 a14, T15 a15, T16 a16, T17 a17, T18 a18, T19 a19, T20 a20);
  }
}
