package dev.taco.runtime.train;

import dev.taco.collective.Plan;
import dev.taco.collective.Site;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceTensor;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.collective.CollectiveSites;
import dev.taco.runtime.model.ParameterTensors;
import java.util.Map;

/**
 * The data-parallel gradient all-reduce of one rank (Megatron-LM's DP group: the ranks that hold the same TP shard in
 * every replica): after the micro-batches of a step, every parameter tensor's gradient summed over the DP group, one
 * collective per tensor at its own site {@code dp.<tensor name>} with the tensor's (rows, cols) shape, exact unless
 * {@code --dp-compression} names a codec. The sum; the caller divides by the DP size (through AdamW's gradient scale).
 */
abstract class DataParallel {
  protected final ParameterTensors layout;

  private DataParallel(ParameterTensors layout) {
    this.layout = layout;
  }

  /** Sums this rank's gradients over its DP group, in place. */
  abstract void allReduce();

  /** The gradient sites' state for a checkpoint (their calibrated plans); empty where every site has one fixed plan. */
  Map<String, CollectiveSites.SiteState> sitesState() {
    return Map.of();
  }

  /** Restores {@link #sitesState} from a checkpoint ({@link CollectiveSites#restore}); nothing where plans are fixed. */
  void restoreSites(Map<String, CollectiveSites.SiteState> saved) {}

  /** This rank's (rows, cols) block of tensor {@code t}. */
  protected int[] shape(ParameterTensors.Tensor t, int tp) {
    return switch (t.split()) {
      case REPLICATED -> new int[] {t.fullRows(), t.fullCols()};
      case ROWS -> new int[] {t.fullRows() / tp, t.fullCols()};
      case COLUMNS -> new int[] {t.fullRows(), t.fullCols() / tp};
    };
  }

  /** On the CPU: through {@link CollectiveSites} over the DP communicator (calibrated plans when compressed). */
  static DataParallel cpu(CollectiveSites dp, ParameterTensors layout, int tp, float[] grads) {
    return new DataParallel(layout) {
      private float[] buf = new float[0];

      @Override
      void allReduce() {
        for (ParameterTensors.Tensor t : layout.tensors()) {
          int[] s = shape(t, tp);
          int n = s[0] * s[1];
          if (buf.length < n) buf = new float[n];
          System.arraycopy(grads, t.offset(), buf, 0, n);
          dp.allReduce(new Site.Gradient(t.name()), buf, s[0], s[1]);
          System.arraycopy(buf, 0, grads, t.offset(), n);
        }
      }

      @Override
      Map<String, CollectiveSites.SiteState> sitesState() {
        return dp.state();
      }

      @Override
      void restoreSites(Map<String, CollectiveSites.SiteState> saved) {
        dp.restore(saved);
      }
    };
  }

  /** On a GPU: through {@link DeviceCollectives} over the DP group's transport, every tensor with {@code plan}. */
  static DataParallel gpu(DeviceCollectives dp, Plan plan, ParameterTensors layout, int tp,
      DeviceBuffer grads) {
    return new DataParallel(layout) {
      @Override
      void allReduce() {
        for (ParameterTensors.Tensor t : layout.tensors()) {
          int[] s = shape(t, tp);
          dp.allReduce(plan, new DeviceTensor(grads.slice(4L * t.offset(), 4L * s[0] * s[1]), false), s[0], s[1]);
        }
      }
    };
  }
}
