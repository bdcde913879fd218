package dev.taco.runtime.layers;

import dev.taco.kernels.compiler.KernelRequest;
import java.util.List;

/**
 * The catalog of the training kernels (docs/design.md §5), for pre-translation: the GPU machine's Java runtime has no
 * {@code jdk.compiler}, so {@code dev.taco.kernels.cuda.KernelSources} translates this list beforehand on a CPU
 * machine ({@code KernelSources runtime/src/main/java:tornado-kernels/src/main/java <dir>
 * dev.taco.runtime.layers.LayerKernels}).
 *
 * <p>Sizes are launch arguments, and the block sizes of the column sums (16 channels) are {@code static final}
 * constants the translator inlines, so each kernel is one request with an empty specialisation; except the
 * {@link FlashAttention} kernels, whose register arrays are sized by the head size ({@link #flashKernels}).
 */
public final class LayerKernels {
  private LayerKernels() {}

  /**
   * Every specialisation of every {@link dev.taco.kernels.Kernel} method of the layer classes and of {@link AdamW}:
   * {@link #unspecialised()}, then {@link #flashKernels()}.
   *
   * @return the requests, unmodifiable
   */
  public static List<KernelRequest> kernels() {
    List<KernelRequest> all = new java.util.ArrayList<>(unspecialised());
    all.addAll(flashKernels());
    return List.copyOf(all);
  }

  /** The head sizes the {@link FlashAttention} kernels are compiled for ({@link FlashAttention#supports}). */
  public static final List<Integer> FLASH_HEAD_SIZES = List.of(16, 32, 48, 64);

  /** {@link FlashAttention}'s tensor-core kernel {@code method} for head size HS (its {@code @Constant}). */
  public static KernelRequest flash(String method, int HS) {
    return KernelRequest.of(FlashAttention.class, method, java.util.Map.of("HS", HS));
  }

  /**
   * The {@link FlashAttention} kernels: the three tiled ones once per {@link #FLASH_HEAD_SIZES head size}, and the
   * row-dot kernel (no constant).
   */
  public static List<KernelRequest> flashKernels() {
    List<KernelRequest> all = new java.util.ArrayList<>();
    for (int hs : FLASH_HEAD_SIZES) {
      for (String m : List.of("flashForward", "flashBackwardKeyValue", "flashBackwardQuery")) {
        all.add(flash(m, hs));
      }
    }
    all.add(KernelRequest.of(FlashAttention.class, "flashBackwardDot"));
    return List.copyOf(all);
  }

  /**
   * The kernels with an empty specialisation, once each (one CUDA C unit can hold them all): the CPU's in the order of
   * a training step (embedding, block, head, loss; then backward; then the update), then the GPU's own forms (the
   * SIMT {@code ...Warp} kernels and the per-element dwte gather).
   */
  public static List<KernelRequest> unspecialised() {
    return List.of(
        KernelRequest.of(Encoder.class, "encoderForward"),
        KernelRequest.of(LayerNorm.class, "layernormForward"),
        KernelRequest.of(Matmul.class, "matmulForwardBias"),
        KernelRequest.of(Attention.class, "attentionScores"),
        KernelRequest.of(Attention.class, "softmaxForward"),
        KernelRequest.of(Attention.class, "attentionValues"),
        KernelRequest.of(Residual.class, "residualForward"),
        KernelRequest.of(Residual.class, "residualBiasForward"),
        KernelRequest.of(Residual.class, "residualBiasForward4"),
        KernelRequest.of(Gelu.class, "geluForward"),
        KernelRequest.of(CrossEntropy.class, "crossentropyForward"),
        KernelRequest.of(CrossEntropy.class, "crossentropyBackward"),
        KernelRequest.of(Matmul.class, "matmulBackwardBias"),
        KernelRequest.of(Gelu.class, "geluBackward"),
        KernelRequest.of(Gelu.class, "geluBackwardInto"),
        KernelRequest.of(Gelu.class, "geluForwardBf16"),
        KernelRequest.of(Gelu.class, "geluBackwardBf16"),
        KernelRequest.of(Residual.class, "residualBackward"),
        KernelRequest.of(LayerNorm.class, "layernormBackwardRows"),
        KernelRequest.of(LayerNorm.class, "layernormBackwardParams"),
        KernelRequest.of(LayerNorm.class, "layernormParamPartials"),
        KernelRequest.of(Attention.class, "attentionBackwardProbs"),
        KernelRequest.of(Attention.class, "softmaxBackward"),
        KernelRequest.of(Attention.class, "attentionBackwardQuery"),
        KernelRequest.of(Attention.class, "attentionBackwardKeyValue"),
        KernelRequest.of(Encoder.class, "encoderBackwardWte"),
        KernelRequest.of(Encoder.class, "encoderBackwardWpe"),
        KernelRequest.of(Encoder.class, "encoderBackwardWteColumns"),
        KernelRequest.of(LayerNorm.class, "layernormForwardWarp"),
        KernelRequest.of(LayerNorm.class, "layernormBackwardRowsWarp"),
        KernelRequest.of(Attention.class, "softmaxForwardWarp"),
        KernelRequest.of(Attention.class, "softmaxBackwardWarp"),
        KernelRequest.of(Attention.class, "softmaxForwardWarpBf16"),
        KernelRequest.of(Attention.class, "softmaxBackwardWarpBf16"),
        KernelRequest.of(CrossEntropy.class, "crossentropyForwardWarp"),
        KernelRequest.of(Matmul.class, "roundToBf16"),
        KernelRequest.of(Matmul.class, "roundToBf16x8"),
        KernelRequest.of(GradNorm.class, "gradNormPartials"),
        KernelRequest.of(GradNorm.class, "foldPartials"),
        KernelRequest.of(Encoder.class, "oneHotRows"),
        KernelRequest.of(AdamW.class, "adamwUpdate"));
  }
}
