package dev.taco.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

/**
 * numpy's own OpenBLAS ({@code numpy.libs/libscipy_openblas64_*.so}, 64-bit integers, symbols with the
 * {@code scipy_} prefix and {@code 64_} suffix) called in this JVM through the foreign function API, so that a
 * benchmark can alternate it with {@link dev.taco.kernels.Gemm} on the same threads and see the same machine.
 * {@code cblas_sgemm} takes the Java arrays themselves ({@link Linker.Option#critical critical} downcalls with heap
 * access: no copy). {@code bench/gemm_openblas.py lib} prints the library's path.
 */
final class OpenBlas {
  private static final int ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112;
  private final MethodHandle sgemm, setThreads;

  /**
   * Loads the library.
   *
   * @throws IllegalArgumentException if the file cannot be loaded or lacks the two symbols
   */
  OpenBlas(Path library) {
    SymbolLookup lookup;
    try {
      lookup = SymbolLookup.libraryLookup(library, Arena.global());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("cannot load OpenBLAS from " + library + ": " + e.getMessage(), e);
    }
    Linker linker = Linker.nativeLinker();
    ValueLayout.OfInt i = ValueLayout.JAVA_INT;
    ValueLayout.OfLong l = ValueLayout.JAVA_LONG;
    ValueLayout.OfFloat f = ValueLayout.JAVA_FLOAT;
    ValueLayout p = ValueLayout.ADDRESS;
    sgemm = linker.downcallHandle(find(lookup, library, "scipy_cblas_sgemm64_"),
        FunctionDescriptor.ofVoid(i, i, i, l, l, l, f, p, l, p, l, f, p, l), Linker.Option.critical(true));
    setThreads = linker.downcallHandle(find(lookup, library, "scipy_openblas_set_num_threads64_"),
        FunctionDescriptor.ofVoid(i));
  }

  private static MemorySegment find(SymbolLookup lookup, Path library, String name) {
    return lookup.find(name)
        .orElseThrow(
            () -> new IllegalArgumentException(library + " has no symbol " + name + " (not numpy's OpenBLAS)"));
  }

  /** {@code openblas_set_num_threads}: the threads of each following call. */
  void threads(int n) {
    try {
      setThreads.invokeExact(n);
    } catch (Throwable e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * {@code C[m,n] (+)= op(A) · op(B)}, row-major and dense, with {@link dev.taco.kernels.Gemm#gemm}'s layout: A is
   * [m, k] or, with {@code transA}, [k, m]; B is [k, n] or, with {@code transB}, [n, k]; C is [m, n]. No argument
   * checks: the caller's arrays must hold the matrices.
   */
  void sgemm(boolean transA, boolean transB, int m, int n, int k, float[] a, float[] b, float[] c,
      boolean accumulate) {
    try {
      sgemm.invokeExact(ROW_MAJOR, transA ? TRANS : NO_TRANS, transB ? TRANS : NO_TRANS, (long) m, (long) n, (long) k,
          1f, MemorySegment.ofArray(a), (long) (transA ? m : k), MemorySegment.ofArray(b), (long) (transB ? k : n),
          accumulate ? 1f : 0f, MemorySegment.ofArray(c), (long) n);
    } catch (Throwable e) {
      throw new IllegalStateException(e);
    }
  }
}
