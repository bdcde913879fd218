package dev.taco.collective.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.codec.Fp8Format;
import dev.taco.codec.NcclFp8Codec;
import dev.taco.collective.CollectiveKind;
import dev.taco.collective.LocalGroup;
import dev.taco.collective.Plan;
import dev.taco.collective.device.DeviceCollectivesGpuTest.Op;
import dev.taco.collective.nccl.Nccl;
import dev.taco.collective.nccl.NcclCommunicator;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.ExecutionPlan;
import dev.taco.kernels.cuda.TaskGraph;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/**
 * {@code nccl-fp8} on a GPU: the {@code device-local} emulation of NCCL's ring equals the host path bit for bit at
 * R = 2, 4 and 8 (every collective, both formats and both scale rules, pipelined pieces sharing one group scale), and
 * the real NCCL path ({@code ncclFloat8e4m3}/{@code ncclFloat8e5m2}) at world size 1. Skipped, with the reason, where
 * there is no GPU (or no NCCL). The seed is printed; {@code -Dtaco.seed=N} repeats it.
 */
@Tag("gpu")
class NcclFp8GpuTest {
  private static final long SEED = Long.getLong("taco.seed", System.nanoTime());
  private static CudaContext ctx;

  static final List<Plan> PLANS = List.of(Plan.of(new NcclFp8Codec()),
      Plan.of(new NcclFp8Codec(Fp8Format.E5M2, NcclFp8Codec.ScaleRule.SUM, NcclFp8Codec.NonFinite.REFUSE)),
      Plan.of(new NcclFp8Codec(Fp8Format.E4M3, NcclFp8Codec.ScaleRule.MAX, NcclFp8Codec.NonFinite.REFUSE)));

  @BeforeAll
  static void open() {
    System.out.println("NcclFp8GpuTest seed = " + SEED);
    if (Cuda.available()) {
      ctx = CudaContext.open(0);
      DeviceCollectivesGpuTest.ctx = ctx; // its helpers upload, download and run on this device
    }
  }

  @AfterAll
  static void close() {
    if (ctx != null) ctx.close();
  }

  @ParameterizedTest(name = "device-local R={0}")
  @ValueSource(ints = {2, 4, 8})
  void deviceLocalSumsAsTheHostPathBitForBit(int world) {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
    int checked = 0;
    for (Plan plan : PLANS) {
      for (int[] shape : DeviceCollectivesGpuTest.SHAPES) {
        for (Op op : Op.values()) {
          int rows = op == Op.REDUCE_SCATTER ? shape[0] * world : shape[0], cols = shape[1];
          String where = plan.describe() + " " + op + " R=" + world + " " + rows + "x" + cols + " seed " + SEED;
          List<float[][]> res = LocalGroup.run(world, comm -> {
            try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
                DeviceCollectives dc = new DeviceCollectives(t, 64 << 10, false, false)) { // 64 KiB: pipelined
              return DeviceCollectivesGpuTest.both(comm, dc, op, plan, rows, cols, false, SEED);
            }
          });
          for (int r = 0; r < world; r++) {
            assertThat(res.get(r)[1]).as(where + " rank " + r).isEqualTo(res.get(r)[0]);
          }
          checked++;
        }
      }
    }
    System.out.println("nccl-fp8 device-local R=" + world + ": " + checked + " collectives bit-identical to the host");
    assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
      try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
          DeviceCollectives dc = new DeviceCollectives(t)) {
        return DeviceCollectivesGpuTest.both(comm, dc, Op.ALL_REDUCE, PLANS.get(0), 8, 64, true, SEED);
      }
    })).hasMessageContaining("take fp32 tensors");
  }

  /**
   * Real NCCL at world size 1, the only real NCCL run one GPU allows: its all-reduce and reduce-scatter are then
   * copies, so what this checks is the rest of the path a NCCL user writes (the absmax and its {@code ncclMax}
   * all-reduce, the scale, the cast, the FP8 data type codes 10 and 11 accepted by {@code ncclAllReduce} and {@code
   * ncclReduceScatter}, the cast back), bit for bit against the codec's own cast and cast back of the tensor, and the
   * CUDA-graph replay. Where NCCL is older than 2.24 or the GPU older than sm90, it checks the refusal instead.
   */
  @Test
  void ncclAtWorldSizeOneCastsSendsAndCastsBackAsTheCodec() {
    assumeTrue(Cuda.available() && Nccl.available(), Cuda.unavailableReason() + "; " + Nccl.unavailableReason());
    int rows = 40, cols = 1000;
    float[] x = DeviceCollectivesGpuTest.input(SEED, 0, rows, cols);
    try (NcclCommunicator nccl = NcclCommunicator.init(ctx, 0, 1, Nccl.get().uniqueId(), Duration.ofSeconds(60));
        CudaStream compute = ctx.createStream(); CudaStream comm = ctx.createStream()) {
      NcclTransport transport = new NcclTransport(nccl);
      String problem = transport.fp8Problem();
      for (Plan plan : PLANS) {
        for (CollectiveKind kind : new CollectiveKind[] {CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER}) {
          String where = plan.describe() + " " + kind + " over NCCL " + Nccl.get().versionString() + " on "
              + ctx.computeCapabilityMajor() + "." + ctx.computeCapabilityMinor() + ", seed " + SEED;
          List<DeviceBuffer> owned = new ArrayList<>();
          TaskGraph g = new TaskGraph("nccl-fp8-r1");
          DeviceTensor dx = DeviceCollectivesGpuTest.upload(x, false, 0);
          DeviceTensor out = DeviceCollectivesGpuTest.upload(new float[x.length], false, 0);
          try {
            DeviceWire w = new DeviceWire(transport, g, false, Long.MAX_VALUE, owned);
            assertThat(w.sumsFp8()).isTrue();
            if (problem != null) {
              assertThatThrownBy(() -> w.sumFp8(kind, plan, dx, rows, cols, out)).as(where)
                  .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(problem);
              continue;
            }
            w.sumFp8(kind, plan, dx, rows, cols, out);
            try (ExecutionPlan p = new ExecutionPlan(ctx, g.snapshot(), compute, comm).withCudaGraph()) {
              for (int i = 0; i < 3; i++) p.execute(); // the first captures, the others replay
            }
            NcclFp8Codec codec = (NcclFp8Codec) plan.codec();
            byte[] payload = new byte[codec.encodedSize(rows, cols)];
            codec.encode(x, 0, rows, cols, payload, 0);
            float[] want = new float[x.length];
            codec.decode(payload, 0, payload.length, want, 0, false);
            assertThat(DeviceCollectivesGpuTest.download(out, x.length)).as(where).isEqualTo(want);
            assertThat(nccl.failure()).as(where).isNull();
          } finally {
            owned.forEach(DeviceBuffer::close);
            dx.buffer().close();
            out.buffer().close();
          }
        }
      }
    }
  }
}
