package dev.taco.bench;

import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.runtime.model.CudaOps;
import dev.taco.runtime.model.View;
import java.util.Arrays;
import java.util.Locale;

/**
 * Where the GPU step's GEMM time goes (docs/design.md §7, a diagnostic): for one model shape, every linear layer's
 * products timed three ways by CUDA events, medians of 20: the bare cuBLAS bf16 GEMMs (bf16 operands already there),
 * the backend's {@code CudaOps.matmulForward} / {@code matmulBackward} in bf16 mode (operand rounding, bias add and
 * bias column sums included) and the same in fp32 mode; TFLOP/s from 2·m·n·k per product.
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.GpuGemmShapes D T B} (default 768 1024 8).
 */
public final class GpuGemmShapes {
  private GpuGemmShapes() {}

  static final int RUNS = 20;

  /** Entry point; see the class doc. */
  public static void main(String[] args) {
    int d = args.length > 0 ? Integer.parseInt(args[0]) : 768;
    int t = args.length > 1 ? Integer.parseInt(args[1]) : 1024;
    int b = args.length > 2 ? Integer.parseInt(args[2]) : 8;
    int n = b * t;
    int[][] layers = {{d, 3 * d}, {d, d}, {d, 4 * d}, {4 * d, d}}; // (C, OC): qkv, attn proj, fc, fc proj
    try (CudaContext ctx = CudaContext.open(0)) {
      long maxA = (long) n * 4 * d, maxW = 4L * d * d;
      try (DeviceBuffer ws = ctx.alloc(Cublas.WORKSPACE_BYTES); Cublas blas = Cublas.create(ctx, ws);
          DeviceBuffer a = ctx.alloc(2 * maxA); DeviceBuffer w = ctx.alloc(2 * maxW);
          DeviceBuffer g = ctx.alloc(2 * maxA); DeviceBuffer c = ctx.alloc(4 * maxA);
          DeviceBuffer dw = ctx.alloc(4 * maxW);
          CudaOps bf16 = new CudaOps(ctx, CudaOps.Precision.BF16); CudaOps fp32 = new CudaOps(ctx);
          CudaEvent e0 = ctx.createEvent(); CudaEvent e1 = ctx.createEvent()) {
        var s = bf16.stream();
        for (DeviceBuffer x : new DeviceBuffer[] {a, w, g, c, dw}) x.memsetAsync((byte) 0, s);
        System.out.printf(Locale.ROOT, "D=%d T=%d B=%d: rows %d%n", d, t, b, n);
        for (int[] l : layers) {
          int ci = l[0], oc = l[1];
          double flop = 2.0 * n * ci * oc;
          double fwd = median(e0, e1, s, () -> blas.matmul(s, DataType.BF16, DataType.F32, a, 0, w, 0, c, 0, n, oc, ci,
              false));
          double bwd = median(e0, e1, s, () -> {
            blas.matmulTransB(s, DataType.BF16, DataType.F32, g, 0, w, 0, c, 0, n, ci, oc, true);
            blas.matmulTransA(s, DataType.BF16, DataType.F32, a, 0, g, 0, dw, 0, ci, oc, n, true);
          });
          double[] ops = new double[4];
          int k = 0;
          for (CudaOps o : new CudaOps[] {bf16, fp32}) {
            var st = o.stream();
            DeviceBuffer x = o.alloc((long) n * ci), wt = o.alloc((long) ci * oc), bias = o.alloc(oc);
            DeviceBuffer y = o.alloc((long) n * oc), dx = o.alloc((long) n * ci), dwt = o.alloc((long) ci * oc);
            DeviceBuffer db = o.alloc(oc);
            ops[k++] = median(e0, e1, st, () -> o.matmulForward(new View<>(y, 0), new View<>(x, 0), new View<>(wt, 0),
                new View<>(bias, 0), b, t, ci, oc));
            ops[k++] = median(e0, e1, st, () -> o.matmulBackward(new View<>(dx, 0), new View<>(dwt, 0),
                new View<>(db, 0), new View<>(y, 0), new View<>(x, 0), new View<>(wt, 0), b, t, ci, oc));
          }
          System.out.printf(Locale.ROOT, "C=%5d OC=%5d  bare bf16 cuBLAS fwd %.3f ms (%.0f TFLOP/s) bwd %.3f ms (%.0f)"
              + " | CudaOps bf16 fwd %.3f bwd %.3f | CudaOps fp32 fwd %.3f bwd %.3f%n", ci, oc, fwd, flop / fwd / 1e9,
              bwd, 2 * flop / bwd / 1e9, ops[0], ops[1], ops[2], ops[3]);
        }
      }
    }
  }

  private static double median(CudaEvent e0, CudaEvent e1, dev.taco.kernels.cuda.CudaStream s, Runnable work) {
    work.run(); // warm-up: kernel compilation, work-space growth, cuBLAS heuristics
    work.run();
    double[] ms = new double[RUNS];
    for (int i = 0; i < RUNS; i++) {
      e0.record(s);
      work.run();
      e1.record(s);
      e1.synchronize();
      ms[i] = e0.elapsedMillisTo(e1);
    }
    Arrays.sort(ms);
    return ms[RUNS / 2];
  }
}
