package dev.taco.runtime.train;

import dev.taco.collective.CollectiveSites;
import java.util.List;
import java.util.Map;

/**
 * What one training run measured; serialised as one element of {@code report.json}'s {@code runs}.
 *
 * @param compression the codec on the TP collectives ({@code none} = bf16 on the wire, {@code taco}, ...)
 * @param tp tensor-parallel size R
 * @param steps optimizer steps taken by this invocation
 * @param first_step the first step it took: 0, or the step of the checkpoint it resumed from ({@code --load})
 * @param stopped why it stopped before {@code --steps}: {@code exit-interval}, {@code exit-duration}
 *     ({@code --exit-duration-in-mins}), {@code signal}, {@code diverged} (its
 *     last rows are the steps before the non-finite one; no bytes or tokens/s), {@code save-failed} (its checkpoint
 *     after its last step could not be saved); null when it ran to the end
 * @param initial_val_loss validation loss (nats per byte) before the first step
 * @param final_val_loss validation loss after the last step
 * @param tp_bytes_per_step bytes all ranks together put on the wire in the TP collectives of one training step
 *     (forward and backward), averaged over the steps in which no collective site calibrated (a calibrating site
 *     sends with the codec's default plan); over every step when all of them calibrated
 * @param calibration_steps the steps in which some site calibrated (left out of {@code tp_bytes_per_step})
 * @param sites_calibrating sites whose calibration had not finished when the run ended (no plan listed for them)
 * @param bytes_per_step_by_kind bytes all ranks sent per training step by collective kind and direction: the TP ones
 *     ({@code all-reduce fwd}, {@code all-reduce bwd}, {@code all-gather fwd}, {@code all-gather bwd}, {@code
 *     reduce-scatter fwd}, {@code reduce-scatter bwd}, those that ran, and {@code all-reduce (exact, gradients)}) and
 *     the data-parallel gradient all-reduce, averaged over every training step (calibration included); on the CPU as
 *     the host collectives counted them, on a GPU as the device collectives did (an emulated rank's alone)
 * @param wall_seconds wall-clock time of the run, evaluation included
 * @param history one row per step: train loss, validation loss where it was evaluated (else null), learning rate and
 *     gradient norm
 * @param codec_error error statistics of the codec on the TP tensors of this run, per collective site
 * @param plans the calibrated plan of each collective site; with {@code auto} the codec it chose there and why
 * @param gpu_step_ms on a GPU: rank 0's device time per training step in ms by category (CUDA events, {@code
 *     model.OpTimes}: gemm, attention, tp_collectives with their compression, optimizer, other_kernels, and their
 *     total), the mean over steps 1, 11, 21, ... (run eagerly to be timed, the others as one CUDA graph at TP = 1);
 *     null on the CPU
 * @param calibration_seconds host seconds the reporting rank spent choosing its sites' plans (copying sampled rows,
 *     encoding and decoding every candidate, agreeing with the other ranks; codec-error samples too): part of
 *     {@code wall_seconds}
 * @param link the link model: {@code "emulated link <profile> (<its source>)"} for an emulated rank, whose losses mean
 *     nothing; the model {@code auto} priced with; null where none was given
 */
public record RunResult(String compression, int tp, int steps, int first_step, String stopped, double initial_val_loss,
    double final_val_loss,
    double tp_bytes_per_step, int calibration_steps, int sites_calibrating, Map<String, Double> bytes_per_step_by_kind,
    double wall_seconds, double tokens_per_second, List<StepRow> history,
    Map<String, CollectiveSites.SampledError> codec_error, Map<String, CollectiveSites.CalibratedPlan> plans,
    Map<String, Double> gpu_step_ms, double calibration_seconds, String link) {

  /**
   * One step's losses, its learning rate and the global gradient norm before clipping; {@code val_loss} is null where
   * validation was not run; a row of an evaluation alone (the end, where a run stopped) has no {@code train_loss} and
   * {@code grad_norm} (null) and {@code lr} 0.
   */
  public record StepRow(int step, Double train_loss, Double val_loss, double lr, Double grad_norm) {}

}
