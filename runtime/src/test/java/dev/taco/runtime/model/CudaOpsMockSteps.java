package dev.taco.runtime.model;

import com.sun.jna.NativeLibrary;
import dev.taco.collective.CollectiveSites;
import dev.taco.collective.LocalGroup;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceLocalTransport;
import dev.taco.collective.device.DeviceSiteCollectives;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.util.List;

/**
 * Training steps of the GPU backend against the mock CUDA driver and cuBLAS of {@code tornado-kernels}' tests (host
 * memory for device memory, GEMMs computed, Java kernels logged but not run), in the child JVM that
 * {@link CudaOpsMockTest} starts: it prints the mock's call log of each step, {@code === <mode> step <n>} before each.
 * Modes: {@code fp32} and {@code bf16} (one rank, three steps: eager, captured, replayed), {@code tp2} (two
 * device-local ranks with calibrated taco sites, two steps).
 */
final class CudaOpsMockSteps {
  private CudaOpsMockSteps() {}

  static final GptConfig CFG = new GptConfig(256, 64, 2, 4, 64, 1);
  static final int B = 2;

  private static void call(String lib, String fn) {
    NativeLibrary.getInstance(System.getProperty(lib)).getFunction(fn).invokeVoid(new Object[0]);
  }

  private static synchronized void print(String what) {
    System.out.println("=== " + what);
    System.out.print(NativeLibrary.getInstance(System.getProperty("taco.libcuda")).getFunction("mock_log")
        .invokeString(new Object[0], false));
    System.out.print(NativeLibrary.getInstance(System.getProperty("taco.libcublas")).getFunction("mock_cublas_log")
        .invokeString(new Object[0], false));
    call("taco.libcuda", "mock_log_clear");
    call("taco.libcublas", "mock_cublas_log_clear");
  }

  static int[][] batch() {
    int[] in = new int[B * CFG.seqLength()], tgt = new int[in.length];
    for (int i = 0; i < in.length; i++) {
      in[i] = (i * 7) % CFG.vocabSize();
      tgt[i] = (i * 13) % CFG.vocabSize();
    }
    return new int[][] {in, tgt};
  }

  static <A> void step(Gpt<A> model, int[][] data, int s) {
    model.trainStep(data[0], data[1]);
    model.gradSquaredNorm(true);
    model.update(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1f, s);
  }

  public static void main(String[] args) {
    String mode = args[0];
    int[][] data = batch();
    try (CudaContext ctx = CudaContext.open(0)) {
      if (mode.equals("tp2")) {
        GptConfig cfg = CFG.withTp(2);
        List<Object> done = LocalGroup.run(2, comm -> {
          ctx.makeCurrent();
          try (DeviceLocalTransport link = new DeviceLocalTransport(ctx, comm);
              DeviceCollectives dc = new DeviceCollectives(link);
              CudaOps ops = new CudaOps(ctx, dc.stream(), CudaOps.Precision.FP32)) {
            CollectiveSites sites = new CollectiveSites(comm, "taco", 1, 0);
            CudaTensorParallel tp = CudaTensorParallel.of(ops, new DeviceSiteCollectives(dc, sites), true);
            Gpt<DeviceBuffer> model = new Gpt<>(cfg, ops, tp, comm.rank(), B, 1);
            for (int s = 1; s <= 2; s++) step(model, data, s);
            return sites.plans().size();
          }
        });
        System.out.println("tp2 ranks done, sites with plans: " + done);
        return;
      }
      CudaOps.Precision p = mode.equals("bf16") ? CudaOps.Precision.BF16 : CudaOps.Precision.FP32;
      try (CudaOps ops = new CudaOps(ctx, p)) {
        Gpt<DeviceBuffer> model = Gpt.gpu(CFG, ops, B, 1);
        print(mode + " setup");
        for (int s = 1; s <= 3; s++) {
          step(model, data, s);
          print(mode + " step " + s);
        }
        System.out.println("graph launches " + ops.graphLaunches());
      }
    }
  }
}
