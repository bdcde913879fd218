package dev.taco.runtime.train;

import dev.taco.codec.Codecs;
import dev.taco.codec.NonFiniteInputException;
import dev.taco.collective.Communicator;
import dev.taco.collective.LocalCommunicator;
import dev.taco.collective.LocalGroup;
import dev.taco.runtime.data.Corpus;
import dev.taco.collective.Plan;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceLocalTransport;
import dev.taco.collective.device.DeviceTransport;
import dev.taco.collective.device.NcclTransport;
import dev.taco.collective.nccl.Nccl;
import dev.taco.collective.nccl.NcclCommunicator;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.gpu.TwoShotGpuKernels;
import dev.taco.collective.CollectiveSites;
import dev.taco.collective.FidelityGate;
import dev.taco.collective.device.DeviceSiteCollectives;
import dev.taco.collective.link.LinkProfile;
import dev.taco.collective.link.LinkProfiles;
import dev.taco.collective.device.DevicePricing;
import dev.taco.collective.device.EmulatedTransport;
import dev.taco.collective.HostPricing;
import dev.taco.collective.MirroredCommunicator;
import dev.taco.runtime.model.CpuOps;
import dev.taco.runtime.model.CpuTensorParallel;
import dev.taco.runtime.model.CudaOps;
import dev.taco.runtime.model.CudaTensorParallel;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.model.OpTimes;
import dev.taco.runtime.model.Ops;
import dev.taco.runtime.model.ParameterTensors;
import dev.taco.runtime.model.TensorParallel;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import me.tongfei.progressbar.DelegatingProgressBarConsumer;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The training loop: R tensor-parallel ranks as threads of this JVM ({@link LocalGroup}), each holding its
 * {@link Gpt} shard, all fed the same micro-batches, every TP collective through one communicator that compresses
 * with the chosen codec. AdamW with linear warmup, cosine decay to --min-lr, global gradient-norm clipping
 * ({@link Options}).
 */
public final class Trainer {
  private static final Logger log = LoggerFactory.getLogger(Trainer.class);

  /** AdamW's β1, β2 and ε, as GPT-2 / llm.c use ({@code gpt2_update(..., 0.9f, 0.95f, 1e-8f, ...)}). */
  static final float BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f;
  /** The default {@link Options#codecErrorInterval}: every 10th step. */
  public static final int CODEC_ERROR_INTERVAL = 10;

  private Trainer() {}

  /**
   * Marks an option that changes the steps a run takes: a checkpoint records it, and a run that resumes with another
   * value is warned ({@link Options#recorded}).
   */
  @Retention(RetentionPolicy.RUNTIME)
  @Target(ElementType.RECORD_COMPONENT)
  @interface Recorded {
    /** Recorded only where a codec of the run calibrates its plans (elsewhere the option does nothing). */
    boolean calibration() default false;
  }

  /**
   * A training run's options, each named after its Megatron-LM flag: the component {@code microBatchSize} is the flag
   * {@code --micro-batch-size} and the key {@code micro_batch_size} of report.json's config ({@link #asMap}) and of a
   * checkpoint's options ({@link #recorded}), so that an option is declared once, here. Built by name through
   * {@link #builder()}, which holds the defaults; the constructor checks every value, once.
   *
   * @param numLayers transformer blocks ({@code --num-layers})
   * @param hiddenSize model width C ({@code --hidden-size})
   * @param numAttentionHeads attention heads ({@code --num-attention-heads})
   * @param seqLength context length T in bytes ({@code --seq-length})
   * @param tensorModelParallelSize TP size R ({@code --tensor-model-parallel-size}, {@code --tp})
   * @param sequenceParallel Megatron's sequence parallelism ({@code --sequence-parallel}; {@link GptConfig})
   * @param steps optimizer steps ({@code --steps}, {@code --train-iters})
   * @param microBatchSize sequences per micro-batch of each replica, B ({@code --micro-batch-size})
   * @param globalBatchSize sequences per optimizer step over all replicas ({@code --global-batch-size}): micro-batch ×
   *     DP × the gradient-accumulation steps
   * @param dataParallelSize DP size ({@code --data-parallel-size}): replicas of the TP group, each on its share of the
   *     global batch, gradients all-reduced over the replicas
   * @param lr peak learning rate ({@code --lr})
   * @param minLr the learning rate the cosine decay ends at ({@code --min-lr})
   * @param lrWarmupIters steps of linear warmup from lr/lrWarmupIters to lr ({@code --lr-warmup-iters}; 0: none)
   * @param weightDecay AdamW's decoupled weight decay on the weight matrices ({@code --weight-decay})
   * @param clipGrad global gradient-norm clipping threshold ({@code --clip-grad}; 0: no clipping)
   * @param seed seed of weights and batches ({@code --seed})
   * @param dpCompression the codec of the DP gradient all-reduce ({@code --dp-compression}; {@code fp32}: exact)
   * @param calibrationSteps tensors per collective site that calibrate its plan (0: the codec's defaults everywhere)
   * @param autoMaxError {@code --compression auto}'s fidelity gate: the largest mean relative L2 error a site's plan may
   *     have on its calibration tensors, one bound for the forward activations and one for the backward gradients
   *     ({@code --auto-max-error A} or {@code activations=A,gradients=B})
   * @param recalibrateInterval uses of a site between re-calibrations (0: calibrate once)
   * @param codecErrorInterval steps between the steps whose TP tensors the reporting rank measures the codec's error on
   *     ({@code --codec-error-interval}; 0: never). Each measurement encodes and decodes every site's tensor on the
   *     host, which on a GPU run costs a copy to the host and the CPU codec's time.
   * @param evalInterval steps between validation evaluations ({@code --eval-interval})
   * @param evalIters validation micro-batches per evaluation ({@code --eval-iters})
   * @param logInterval steps between the rows of the printed loss table ({@code --log-interval})
   * @param distributedTimeoutMinutes how long a rank waits in one collective for the others before the run fails with
   *     the reason ({@code --distributed-timeout-minutes}; the NCCL watchdog's timeout on GPUs)
   * @param dumpSites folder into which the TP ranks of replica 0 write the tensors their last training step hands its TP
   *     collectives ({@code --dump-sites}; {@link SiteDump}); null: none
   */
  public record Options(int numLayers, int hiddenSize, int numAttentionHeads, int seqLength,
      int tensorModelParallelSize, @Recorded boolean sequenceParallel, @Recorded int steps,
      @Recorded int microBatchSize, @Recorded int globalBatchSize, @Recorded int dataParallelSize, @Recorded float lr,
      @Recorded float minLr, @Recorded int lrWarmupIters, @Recorded float weightDecay, @Recorded float clipGrad,
      @Recorded long seed, @Recorded String dpCompression, @Recorded(calibration = true) int calibrationSteps,
      @Recorded(calibration = true) int recalibrateInterval, @Recorded(calibration = true) FidelityGate autoMaxError,
      int codecErrorInterval, int evalInterval, int evalIters, int logInterval, int distributedTimeoutMinutes,
      String dumpSites) {
    /** @throws IllegalArgumentException naming the flag of a value out of its range (the model's: {@link GptConfig}) */
    public Options {
      new GptConfig(Corpus.VOCAB, seqLength, numLayers, numAttentionHeads, hiddenSize, tensorModelParallelSize,
          sequenceParallel);
      if (steps <= 0) throw new IllegalArgumentException("--steps must be positive, got " + steps);
      if (microBatchSize <= 0)
        throw new IllegalArgumentException("--micro-batch-size must be positive, got " + microBatchSize);
      if (dataParallelSize <= 0)
        throw new IllegalArgumentException("--data-parallel-size must be positive, got " + dataParallelSize);
      if (globalBatchSize <= 0 || globalBatchSize % ((long) microBatchSize * dataParallelSize) != 0) {
        throw new IllegalArgumentException("--global-batch-size " + globalBatchSize + " must be a positive multiple of"
            + " --micro-batch-size x --data-parallel-size = " + (long) microBatchSize * dataParallelSize);
      }
      if (!(lr > 0) || Float.isInfinite(lr))
        throw new IllegalArgumentException("--lr must be a positive number, got " + lr);
      if (!(minLr >= 0) || minLr > lr) {
        throw new IllegalArgumentException("--min-lr must be in [0, --lr] = [0, " + lr + "], got " + minLr);
      }
      if (lrWarmupIters < 0)
        throw new IllegalArgumentException("--lr-warmup-iters must be >= 0, got " + lrWarmupIters);
      if (!(weightDecay >= 0) || Float.isInfinite(weightDecay)) {
        throw new IllegalArgumentException("--weight-decay must be a number >= 0, got " + weightDecay);
      }
      if (!(clipGrad >= 0) || Float.isInfinite(clipGrad)) {
        throw new IllegalArgumentException("--clip-grad must be a number >= 0 (0: off), got " + clipGrad);
      }
      if (dpCompression.equals(CollectiveSites.AUTO)) {
        throw new IllegalArgumentException(
            "--dp-compression auto: auto chooses the TP collectives' codecs; name a codec"
                + " for the data-parallel gradients (fp32 by default)");
      }
      try {
        requireKnownCompression(dpCompression);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--dp-compression: " + e.getMessage());
      }
      if (calibrationSteps < 0)
        throw new IllegalArgumentException("--calibration-steps must be >= 0, got " + calibrationSteps);
      if (recalibrateInterval < 0)
        throw new IllegalArgumentException("--recalibrate-interval must be >= 0, got " + recalibrateInterval);
      java.util.Objects.requireNonNull(autoMaxError, "--auto-max-error");
      if (codecErrorInterval < 0) {
        throw new IllegalArgumentException("--codec-error-interval must be >= 0 (0: never), got " + codecErrorInterval);
      }
      if (evalInterval <= 0)
        throw new IllegalArgumentException("--eval-interval must be positive, got " + evalInterval);
      if (evalIters <= 0) throw new IllegalArgumentException("--eval-iters must be positive, got " + evalIters);
      if (logInterval <= 0) throw new IllegalArgumentException("--log-interval must be positive, got " + logInterval);
      if (distributedTimeoutMinutes <= 0 || distributedTimeoutMinutes > 10_080) {
        throw new IllegalArgumentException("--distributed-timeout-minutes must be in 1..10080 (a week), got "
            + distributedTimeoutMinutes);
      }
      if (dumpSites != null && dumpSites.isBlank()) throw new IllegalArgumentException("--dump-sites is empty");
      if (dumpSites != null && tensorModelParallelSize == 1) {
        throw new IllegalArgumentException("--dump-sites needs --tp of 2 or more: one rank sends no TP tensor");
      }
    }

    /** Options by name, starting from the defaults. */
    public static Builder builder() {
      return new Builder();
    }

    /** The model these options train ({@link Corpus#VOCAB} byte tokens). */
    public GptConfig model() {
      return new GptConfig(Corpus.VOCAB, seqLength, numLayers, numAttentionHeads, hiddenSize, tensorModelParallelSize,
          sequenceParallel);
    }

    /** Micro-batches each replica runs per optimizer step (gradient accumulation). */
    public int accumulation() {
      return globalBatchSize / (microBatchSize * dataParallelSize);
    }

    /** Every option by its report name ({@code micro_batch_size}, ...), in declaration order: report.json's config. */
    public Map<String, Object> asMap() {
      return byName(c -> true);
    }

    /**
     * The options a checkpoint records ({@link Recorded}): those that change the steps a run takes, the calibration's
     * only where {@code calibrates} (a codec of the run calibrates its plans).
     */
    public Map<String, Object> recorded(boolean calibrates) {
      return byName(c -> c.isAnnotationPresent(Recorded.class)
          && (calibrates || !c.getAnnotation(Recorded.class).calibration()));
    }

    private Map<String, Object> byName(java.util.function.Predicate<RecordComponent> which) {
      Map<String, Object> m = new LinkedHashMap<>();
      for (RecordComponent c : Options.class.getRecordComponents()) {
        if (!which.test(c)) continue;
        try {
          m.put(reportName(c.getName()), c.getAccessor().invoke(this));
        } catch (ReflectiveOperationException e) {
          throw new IllegalStateException("option " + c.getName() + " cannot be read", e);
        }
      }
      return m;
    }

    /** The report and checkpoint name of the option {@code component}: {@code microBatchSize} is micro_batch_size. */
    static String reportName(String component) {
      return component.replaceAll("([A-Z])", "_$1").toLowerCase(java.util.Locale.ROOT);
    }

    /** The flag of the option {@code component}: {@code microBatchSize} is {@code --micro-batch-size}. */
    public static String flag(String component) {
      return "--" + component.replaceAll("([A-Z])", "-$1").toLowerCase(java.util.Locale.ROOT);
    }

    /**
     * Every option's default by its flag ({@code --micro-batch-size} → 8), for the command line's help; those derived
     * from others ({@code --global-batch-size}, {@code --min-lr}) are absent.
     */
    public static Map<String, Object> defaults() {
      Map<String, Object> m = new LinkedHashMap<>();
      Builder fresh = new Builder();
      for (java.lang.reflect.Field f : Builder.class.getDeclaredFields()) {
        try {
          Object v = f.get(fresh);
          if (v != null) m.put(flag(f.getName()), v);
        } catch (IllegalAccessException e) {
          throw new IllegalStateException("default of " + f.getName() + " cannot be read", e);
        }
      }
      return m;
    }

    /**
     * {@link Options} by name, JMH's {@code OptionsBuilder} style: one setter per option, named as its component, and
     * the defaults (those of {@code taco train}) as the fields' initial values; {@link #build} checks them all.
     */
    public static final class Builder {
      private int numLayers = 4, hiddenSize = 128, numAttentionHeads = 4, seqLength = 128, tensorModelParallelSize = 2;
      private boolean sequenceParallel;
      private int steps = 120, microBatchSize = 8, dataParallelSize = 1;
      private Integer globalBatchSize; // null: micro-batch x data-parallel size (no accumulation)
      private float lr = 2e-3f;
      private Float minLr; // null: a tenth of lr
      private int lrWarmupIters = 12;
      private float weightDecay = 0.1f, clipGrad = 1.0f;
      private long seed = 1234;
      private String dpCompression = "fp32";
      private int calibrationSteps = 2, recalibrateInterval, codecErrorInterval = CODEC_ERROR_INTERVAL;
      private FidelityGate autoMaxError = FidelityGate.of(FidelityGate.DEFAULT);
      private int evalInterval = 20, evalIters = 4, logInterval = 10, distributedTimeoutMinutes = 2;
      private String dumpSites; // null: no dump

      private Builder() {}

      /** Sets {@code --num-layers}. */
      public Builder numLayers(int v) {
        numLayers = v;
        return this;
      }

      /** Sets {@code --hidden-size}. */
      public Builder hiddenSize(int v) {
        hiddenSize = v;
        return this;
      }

      /** Sets {@code --num-attention-heads}. */
      public Builder numAttentionHeads(int v) {
        numAttentionHeads = v;
        return this;
      }

      /** Sets {@code --seq-length}. */
      public Builder seqLength(int v) {
        seqLength = v;
        return this;
      }

      /** Sets {@code --tensor-model-parallel-size}. */
      public Builder tensorModelParallelSize(int v) {
        tensorModelParallelSize = v;
        return this;
      }

      /** Sets {@code --sequence-parallel}. */
      public Builder sequenceParallel(boolean v) {
        sequenceParallel = v;
        return this;
      }

      /** Sets {@code --steps}. */
      public Builder steps(int v) {
        steps = v;
        return this;
      }

      /** Sets {@code --micro-batch-size}. */
      public Builder microBatchSize(int v) {
        microBatchSize = v;
        return this;
      }

      /** Sets {@code --global-batch-size}. */
      public Builder globalBatchSize(int v) {
        globalBatchSize = v;
        return this;
      }

      /** Sets {@code --data-parallel-size}. */
      public Builder dataParallelSize(int v) {
        dataParallelSize = v;
        return this;
      }

      /** Sets {@code --lr}. */
      public Builder lr(float v) {
        lr = v;
        return this;
      }

      /** Sets {@code --min-lr}. */
      public Builder minLr(float v) {
        minLr = v;
        return this;
      }

      /** Sets {@code --lr-warmup-iters}. */
      public Builder lrWarmupIters(int v) {
        lrWarmupIters = v;
        return this;
      }

      /** Sets {@code --weight-decay}. */
      public Builder weightDecay(float v) {
        weightDecay = v;
        return this;
      }

      /** Sets {@code --clip-grad}. */
      public Builder clipGrad(float v) {
        clipGrad = v;
        return this;
      }

      /** Sets {@code --seed}. */
      public Builder seed(long v) {
        seed = v;
        return this;
      }

      /** Sets {@code --dp-compression}. */
      public Builder dpCompression(String v) {
        dpCompression = v;
        return this;
      }

      /** Sets {@code --calibration-steps}. */
      public Builder calibrationSteps(int v) {
        calibrationSteps = v;
        return this;
      }

      /** Sets {@code --recalibrate-interval}. */
      public Builder recalibrateInterval(int v) {
        recalibrateInterval = v;
        return this;
      }

      /** Sets {@code --auto-max-error} ({@link FidelityGate#parse} reads the command line's text). */
      public Builder autoMaxError(FidelityGate v) {
        autoMaxError = v;
        return this;
      }

      /** Sets {@code --codec-error-interval}. */
      public Builder codecErrorInterval(int v) {
        codecErrorInterval = v;
        return this;
      }

      /** Sets {@code --eval-interval}. */
      public Builder evalInterval(int v) {
        evalInterval = v;
        return this;
      }

      /** Sets {@code --eval-iters}. */
      public Builder evalIters(int v) {
        evalIters = v;
        return this;
      }

      /** Sets {@code --log-interval}. */
      public Builder logInterval(int v) {
        logInterval = v;
        return this;
      }

      /** Sets {@code --distributed-timeout-minutes}. */
      public Builder distributedTimeoutMinutes(int v) {
        distributedTimeoutMinutes = v;
        return this;
      }

      /** Sets {@code --dump-sites} (null: none). */
      public Builder dumpSites(String v) {
        dumpSites = v;
        return this;
      }

      /**
       * The options, the derived ones filled in: --global-batch-size as --micro-batch-size x --data-parallel-size,
       * --min-lr as a tenth of --lr.
       *
       * @throws IllegalArgumentException naming the flag of a value out of its range
       */
      public Options build() {
        // a product past int's range is refused as a global batch that is no multiple, not wrapped round
        int global = globalBatchSize != null ? globalBatchSize
            : (int) Math.min(Integer.MAX_VALUE, (long) microBatchSize * dataParallelSize);
        return new Options(numLayers, hiddenSize, numAttentionHeads, seqLength, tensorModelParallelSize,
            sequenceParallel, steps, microBatchSize, global, dataParallelSize, lr, minLr != null ? minLr : lr / 10,
            lrWarmupIters, weightDecay, clipGrad, seed, dpCompression, calibrationSteps, recalibrateInterval,
            autoMaxError, codecErrorInterval, evalInterval, evalIters, logInterval, distributedTimeoutMinutes,
            dumpSites);
      }
    }
  }

  /**
   * One rank's place in the TP × DP grid, in Megatron-LM's order (the TP ranks of a replica adjacent: global rank g is
   * TP rank g mod R of replica g div R).
   *
   * @param tp its TP group (the model's collectives)
   * @param dp its DP group (the same TP rank in every replica: the gradient all-reduce)
   * @param world every rank (the agreement to stop on a signal)
   */
  record Place(Communicator tp, Communicator dp, Communicator world) {
    int replica() {
      return dp.rank();
    }

    /** The rank that records the history and reports: TP rank 0 of replica 0. */
    boolean reports() {
      return tp.rank() == 0 && dp.rank() == 0;
    }
  }

  /**
   * Checkpointing, with Megatron-LM's flags ({@link Checkpoint}).
   *
   * @param save folder to save checkpoints into ({@code --save}); null: none
   * @param saveInterval save after every this many steps ({@code --save-interval}; 0: only on exit)
   * @param load folder to resume from, its newest checkpoint ({@code --load}); null: a fresh start
   * @param exitInterval stop after this step ({@code --exit-interval}; 0: run all --steps), saving first when
   *     {@code save} is given
   * @param exitDurationInMins stop, saving first when {@code save} is given, after the step past which one more step
   *     (as long as the longest so far but the first, evaluation included) would end later than this many minutes
   *     after {@code startNanos} ({@code --exit-duration-in-mins}; 0: no limit)
   * @param startNanos when the time of {@code exitDurationInMins} starts ({@link System#nanoTime}): the command's start
   */
  public record Checkpointing(java.nio.file.Path save, int saveInterval, java.nio.file.Path load, int exitInterval,
      double exitDurationInMins, long startNanos) {
    /** @throws IllegalArgumentException naming the flag of a negative interval or an interval without --save */
    public Checkpointing {
      if (saveInterval < 0) throw new IllegalArgumentException("--save-interval must be >= 0, got " + saveInterval);
      if (exitInterval < 0) throw new IllegalArgumentException("--exit-interval must be >= 0, got " + exitInterval);
      if (saveInterval > 0 && save == null) throw new IllegalArgumentException("--save-interval needs --save DIR");
      if (!(exitDurationInMins >= 0) || Double.isInfinite(exitDurationInMins)) {
        throw new IllegalArgumentException("--exit-duration-in-mins must be a number >= 0 (0: no limit), got "
            + exitDurationInMins);
      }
    }

    /** These settings with the folders of one codec's run (of several, each saves into and loads its own). */
    public Checkpointing withFolders(java.nio.file.Path save, java.nio.file.Path load) {
      return new Checkpointing(save, saveInterval, load, exitInterval, exitDurationInMins, startNanos);
    }

    /**
     * Whether, at {@code now} ({@link System#nanoTime}), one more step of {@code stepNanos} would end past
     * {@code --exit-duration-in-mins}.
     */
    boolean outOfTime(long now, long stepNanos) {
      return exitDurationInMins > 0 && now - startNanos + stepNanos > exitDurationInMins * 60e9;
    }

    /** Whether the run saves after {@code done} steps of {@code steps}: every interval, at an exit, at the end. */
    boolean savesAfter(int done, int steps) {
      return save != null && ((saveInterval > 0 && done % saveInterval == 0) || done == exitInterval || done == steps);
    }
  }

  /** How the TP ranks of a GPU run talk ({@code --tp-transport}). */
  public enum Transport {
    /** Every rank a thread on one GPU, payloads moved by device copies: for tests, no real link. */
    DEVICE_LOCAL,
    /** A GPU per rank, GPUs 0..R-1, through NCCL. */
    NCCL,
    /**
     * Rank 0 of the TP group alone on one GPU, every exchange a wire kernel held for the link model's time
     * ({@code EmulatedTransport}): the step time of a rank on that link; the losses mean nothing.
     */
    EMULATED
  }

  /**
   * Where a GPU run runs and how.
   *
   * @param context the GPU (owned by the caller)
   * @param precision what the GEMMs multiply in
   * @param tpComm false replaces the TP all-reduces by no-ops ({@code --no-tp-comm}: timing only, wrong numbers)
   * @param transport how the TP ranks talk
   */
  public record Gpu(CudaContext context, CudaOps.Precision precision, boolean tpComm, Transport transport) {
    /** @throws NullPointerException for a null context, precision or transport */
    public Gpu {
      java.util.Objects.requireNonNull(context, "context");
      java.util.Objects.requireNonNull(precision, "precision");
      java.util.Objects.requireNonNull(transport, "transport");
    }

    /** Whether the ranks talk through NCCL, a GPU each. */
    public boolean nccl() {
      return transport == Transport.NCCL;
    }

    /** Whether this is an emulated rank ({@link Transport#EMULATED}). */
    public boolean emulated() {
      return transport == Transport.EMULATED;
    }
  }

  /**
   * What a run's output says of its link: the emulated link with its source, else the model {@code auto} priced the
   * wire on ({@code priced}), else none.
   */
  private static String linkLabel(Gpu gpu, LinkProfile link, LinkProfile priced) {
    if (gpu != null && gpu.emulated()) return link.emulated();
    return priced == null ? null : "auto priced the wire on " + priced.name() + " (" + priced.source() + ")";
  }

  /**
   * Refuses what an emulated rank cannot stand for: a TP group of one, data parallelism (the one process is one rank of
   * one TP group), or no link model to time its exchanges by.
   *
   * @throws IllegalArgumentException naming the option
   */
  public static void requireEmulatable(int tp, int dataParallel, LinkProfile link) {
    if (tp < 2) throw new IllegalArgumentException("--tp-transport emulated needs --tp of 2 or more, got " + tp);
    if (dataParallel > 1) {
      throw new IllegalArgumentException("--tp-transport emulated runs one TP rank: --data-parallel-size must be 1");
    }
    if (link == null) {
      throw new IllegalArgumentException("--tp-transport emulated needs --link PROFILE or --link-table FILE");
    }
  }

  /** @throws IllegalArgumentException if {@code compression} names no codec ({@code fp32} = exact, no codec) */
  public static void requireKnownCompression(String compression) {
    if (!compression.equals("fp32") && !compression.equals(CollectiveSites.AUTO)) Codecs.byName(compression);
  }

  /**
   * Learning rate at {@code step} (0-based), as Megatron-LM's cosine schedule: linear warmup over the first
   * {@code lrWarmupIters} steps (step i at lr·(i+1)/lrWarmupIters), then cosine decay from lr to minLr at the last step.
   * The warmup is a number of steps, not a fraction of the run, so a short run does not reach the peak in a few
   * steps (with a tenth of --steps, 50 steps warmed up in 5 and the loss spiked from 3.2 to 6-7 at step 13).
   */
  static float learningRate(Options o, int step) {
    int warmup = Math.min(o.lrWarmupIters(), o.steps());
    if (step < warmup) return o.lr() * (step + 1) / warmup;
    double progress = (double) (step - warmup) / Math.max(1, o.steps() - warmup);
    return (float) (o.minLr() + (o.lr() - o.minLr()) * 0.5 * (1 + Math.cos(Math.PI * progress)));
  }

  /**
   * Trains the model of {@code opt} at its TP size with the given compression and returns what it measured: on the CPU
   * when {@code gpu} is null (every rank's collective sites calibrate and sample codec error on the host), else on that
   * GPU, every rank a thread driving its own {@link CudaOps}, TP collectives through {@code device-local} or NCCL
   * {@link DeviceCollectives}, each site with its own plan as on the CPU ({@link CollectiveSites#planAt}: calibration
   * and error sampling on host copies of the tensors they need).
   *
   * <p>With {@code ck.load()} it resumes from that folder's newest checkpoint (weights, AdamW moments, the data
   * position, every site's codec plan): its steps give the same losses, bit for bit on the CPU, as the run that
   * saved it would have. With {@code ck.save()} it saves every {@code ck.saveInterval()} steps and before it exits.
   * Each training step's line goes into {@code metrics} (null: none) as the step ends.
   *
   * @throws IllegalArgumentException for an unknown codec, one without GPU kernels on a GPU, a corpus shorter than
   *     a window, or a checkpoint that cannot be loaded for this run (naming the file)
   * @throws RunFailed with the steps before it, for a run that diverged ({@link TrainingDiverged}) or whose checkpoint
   *     could not be saved
   */
  public static RunResult run(Corpus corpus, String compression, Options opt, Gpu gpu, LinkProfile link,
      Checkpointing ck, StepMetrics metrics) {
    GptConfig cfg = opt.model();
    if (gpu != null && gpu.emulated()) requireEmulatable(cfg.tp(), opt.dataParallelSize(), link);
    boolean auto = compression.equals(CollectiveSites.AUTO);
    if (auto && opt.calibrationSteps() == 0 && cfg.tp() > 1) {
      throw new IllegalArgumentException("--compression auto needs --calibration-steps of 1 or more: it chooses each"
          + " site's codec on the site's own tensors");
    }
    // the link auto prices the wire on: the given one; on the CPU this machine's memory, on a GPU autoLink's
    LinkProfile priced = !auto || cfg.tp() == 1 ? null : gpu == null ? (link != null ? link : HostPricing.memoryLink())
        : autoLink(gpu, link);
    // one for all CPU ranks: the ranks time the same codecs on the same shapes, one at a time, not R times at once
    HostPricing hostPricing = priced != null && gpu == null ? new HostPricing(priced, cfg.tp()) : null;
    requireKnownCompression(compression);
    corpus.requireWindow(cfg.seqLength());
    int r = cfg.tp();
    Checkpoint.State resume = ck.load() == null ? null : Checkpoint.load(ck.load(), cfg, compression);
    if (resume != null && resume.step() >= opt.steps()) {
      throw new IllegalArgumentException("checkpoint " + resume.dir() + " is at step " + resume.step() + ", not before"
          + " --steps " + opt.steps() + ": nothing left to train (raise --steps)");
    }
    Map<String, Object> recorded = recordedOptions(compression, opt, corpus);
    List<String> changed = resume == null ? List.of() : resume.changedOptions(recorded);
    if (!changed.isEmpty()) {
      log.warn("resuming {} with settings that differ from the checkpoint's: {}; the steps from here are not those the"
          + " checkpointed run would have taken", resume.dir(), String.join(", ", changed));
    }
    int first = resume == null ? 0 : resume.step();
    int last = ck.exitInterval() > first && ck.exitInterval() < opt.steps() ? ck.exitInterval() : opt.steps();
    if (gpu != null && gpu.nccl() && opt.dataParallelSize() > 1) gpuPlan(opt.dpCompression());
    Saving saving = new Saving(ck, cfg, compression, opt, recorded, new float[r][][],
        new StepLog(metrics, compression, (double) opt.globalBatchSize() * cfg.seqLength()));
    Map<String, Long> byKind = new java.util.concurrent.ConcurrentSkipListMap<>(); // training bytes, all ranks
    int[] stillCalibrating = new int[1];
    double[] calibration = new double[1];
    long t0 = System.nanoTime();
    List<RunResult.StepRow> history = new ArrayList<>();
    Map<String, CollectiveSites.SampledError> errors = new LinkedHashMap<>();
    Map<String, CollectiveSites.CalibratedPlan> plans = new LinkedHashMap<>();
    log.info("run '{}': TP={}, DP={}, {} steps on {}", compression, r, opt.dataParallelSize(), opt.steps(), gpu == null
        ? "the CPU"
        : gpu.context().name() + " (" + gpu.precision() + (gpu.tpComm() ? "" : ", TP collectives off") + ")");
    Map<String, Double> gpuTimes = gpu == null ? null : new LinkedHashMap<>();
    if (gpu != null && (r > 1 || gpu.nccl())) gpuPlan(compression); // a codec without GPU kernels fails up front
    List<WireBytes> wireBytes;
    java.time.Duration timeout = java.time.Duration.ofMinutes(opt.distributedTimeoutMinutes());
    boolean emulated = gpu != null && gpu.emulated();
    int dpSize = opt.dataParallelSize(), world = emulated ? 1 : r * dpSize;
    List<CudaContext> devices = new ArrayList<>();
    List<NcclCommunicator> nccl = new ArrayList<>(), ncclDp = new ArrayList<>();
    // the grid's groups: replica d's TP group, TP rank q's DP group (Megatron's order: TP ranks adjacent)
    List<List<LocalCommunicator>> tpGroups = new ArrayList<>(), dpGroups = new ArrayList<>();
    for (int d = 0; d < dpSize && !emulated; d++) tpGroups.add(LocalGroup.create(r, timeout));
    for (int q = 0; q < r; q++) dpGroups.add(LocalGroup.create(dpSize, timeout));
    try (ProgressBar bar = progressBar(compression + " TP=" + r + (dpSize > 1 ? " DP=" + dpSize : ""), last - first)) {
      if (gpu != null && gpu.nccl()) {
        devices.add(gpu.context());
        for (int g = 1; g < world; g++) devices.add(CudaContext.open(g));
        for (int d = 0; d < dpSize; d++)
          nccl.addAll(NcclCommunicator.initAll(devices.subList(d * r, d * r + r), timeout));
        for (int q = 0; q < r && dpSize > 1; q++) {
          List<CudaContext> column = new ArrayList<>();
          for (int d = 0; d < dpSize; d++) column.add(devices.get(d * r + q));
          ncclDp.addAll(NcclCommunicator.initAll(column, timeout)); // index q * dpSize + d
        }
        log.info("TP collectives through NCCL {} on GPUs 0..{}", Nccl.get().version(), world - 1);
      }
      wireBytes = LocalGroup.run(world, timeout, comm -> {
        int g = comm.rank(), d = g / r, q = g % r;
        // an emulated rank's peers hold what it holds (MirroredCommunicator): calibration agrees with them alone
        Place place = new Place(emulated ? new MirroredCommunicator(r) : tpGroups.get(d).get(q), dpGroups.get(q).get(d),
            comm);
        try {
          CollectiveSites sites = new CollectiveSites(place.tp(), compression, opt.calibrationSteps(),
              opt.recalibrateInterval(), gpu == null ? Integer.MAX_VALUE : TwoShotGpuKernels.MAX_COLS); // GPU: 16384
          if (sites.auto()) {
            sites.gate(opt.autoMaxError());
            if (hostPricing != null) sites.pricing(hostPricing);
          }
          WireBytes wire = gpu != null
              ? trainGpuRank(cfg, corpus, opt, place, sites, gpu, link, nccl.isEmpty() ? null : nccl.get(g),
                  ncclDp.isEmpty() ? null : ncclDp.get(q * dpSize + d), history, gpuTimes, bar, resume, last, saving,
                  byKind)
              : trainCpuRank(cfg, corpus, opt, place, sites, history, bar, resume, last, saving, byKind);
          sites.trainingBytesByKind().forEach((k, v) -> byKind.merge(k, v, Long::sum));
          if (place.reports()) {
            plans.putAll(sites.plans());
            errors.putAll(sites.sampledErrors());
            stillCalibrating[0] = sites.sitesCalibrating();
            calibration[0] = sites.calibrationSeconds();
          }
          return wire;
        } catch (RuntimeException | Error e) {
          place.tp().close(); // wakes the ranks waiting for this one in its groups
          place.dp().close();
          throw e;
        }
      });
    } catch (TrainingDiverged e) { // the steps before it, for the report
      double[] val = validationLosses(history, first);
      int ran = history.isEmpty() ? 0 : history.getLast().step() + 1 - first; // its last row is a finished step
      throw new TrainingDiverged(e.getMessage(), e.getCause(), new RunResult(compression, r, ran, first, "diverged",
          val[0], val[1], Double.NaN, 0, stillCalibrating[0], null, (System.nanoTime() - t0) / 1e9, Double.NaN,
          List.copyOf(history), errors, plans, gpuTimes, calibration[0], linkLabel(gpu, link, priced)));
    } finally {
      for (NcclCommunicator c : nccl) c.close();
      for (NcclCommunicator c : ncclDp) c.close();
      for (int g = 1; g < devices.size(); g++) devices.get(g).close();
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    long total = 0, steady = 0;
    for (WireBytes w : wireBytes) {
      total += w.training();
      steady += w.steady();
    }
    long steadySteps = wireBytes.get(0).steadySteps();
    double[] val = validationLosses(history, first);
    double initialVal = val[0], finalVal = val[1];
    boolean signalled = saving.stoppedAt().get() >= 0;
    RuntimeException saveFailed = saving.failure().get();
    String stopped = saveFailed != null ? "save-failed" : signalled ? saving.stopReason().get() : null;
    int end = signalled ? saving.stoppedAt().get() : last;
    int ran = Math.max(1, end - first);
    double tokensPerSecond = (double) ran * opt.globalBatchSize() * cfg.seqLength() / seconds;
    log.info("run '{}' done in {} s: validation loss {} -> {}", compression, String.format("%.1f", seconds),
        Double.isNaN(initialVal) ? "- (resumed)" : String.format("%.4f", initialVal), String.format("%.4f", finalVal));
    Map<String, Double> perKind = new LinkedHashMap<>();
    for (Map.Entry<String, Long> e : byKind.entrySet()) perKind.put(e.getKey(), (double) e.getValue() / ran);
    RunResult result = new RunResult(compression, r, ran, first, stopped != null ? stopped
        : end < opt.steps() ? "exit-interval" : null, initialVal, finalVal,
        steadySteps > 0 ? (double) steady / steadySteps : (double) total / ran, (int) (ran - steadySteps),
        stillCalibrating[0], perKind, seconds, tokensPerSecond, history, errors, plans, gpuTimes, calibration[0],
        linkLabel(gpu, link, priced));
    if (saveFailed != null) throw new RunFailed(saveFailed.getMessage(), saveFailed.getCause(), result);
    return result;
  }

  /**
   * The validation loss at step {@code first} (NaN for a resumed run: no evaluation before its first step) and the last
   * one in {@code history} (NaN if none).
   */
  private static double[] validationLosses(List<RunResult.StepRow> history, int first) {
    double initialVal = Double.NaN, finalVal = Double.NaN;
    for (RunResult.StepRow row : history) {
      if (row.val_loss() == null) continue;
      if (row.step() == first) initialVal = row.val_loss();
      finalVal = row.val_loss();
    }
    return new double[] {initialVal, finalVal};
  }

  /**
   * A progress bar on the terminal; when stderr is not a terminal (CI, a pipe), a log line every 10 s instead of
   * carriage-return redraws that would fill the log.
   */
  private static ProgressBar progressBar(String task, int steps) {
    ProgressBarBuilder b = new ProgressBarBuilder().setTaskName(task).setInitialMax(steps)
        .setStyle(ProgressBarStyle.ASCII).setEtaFunction(new StepEta());
    java.io.Console console = System.console();
    if (console != null && console.isTerminal()) return b.setUpdateIntervalMillis(500).continuousUpdate().build();
    // the bar's last refresh and its close both report the finished bar: log a line only when its progress or loss is
    // new (the elapsed time in parentheses left out of the comparison)
    java.util.concurrent.atomic.AtomicReference<String> last = new java.util.concurrent.atomic.AtomicReference<>();
    return b.setConsumer(new DelegatingProgressBarConsumer(line -> {
      String said = line.replaceAll("\\(\\d+:\\d\\d:\\d\\d / [^)]*\\)", "");
      if (!said.equals(last.getAndSet(said))) log.info(line);
    })).setUpdateIntervalMillis(10_000).build();
  }

  /**
   * The plan every GPU collective site uses for {@code compression} ({@code fp32}: exact).
   *
   * @throws IllegalArgumentException for a codec without GPU kernels (naming the ones that have them), so that a run
   *     is never labelled with a codec it did not use
   */
  public static Plan gpuPlan(String compression) {
    if (compression.equals(CollectiveSites.AUTO)) return Plan.of(new dev.taco.codec.Bf16Codec()); // every candidate runs
    Plan asked = compression.equals("fp32") ? Plan.EXACT : Plan.of(Codecs.byName(compression));
    String why = DeviceCollectives.unsupported(asked);
    if (why != null) {
      throw new IllegalArgumentException("--compression " + compression + " cannot run on the GPU (" + why + "): use "
          + "fp32, none, int8-group, fp8-tensor, mxfp4, nvfp4, nccl-fp8 or a dual-scale taco codec there, or --device cpu");
    }
    return asked;
  }

  /**
   * Bytes one rank sent in training steps' TP collectives: in all of them, and in the steps in which no site
   * calibrated (the steady state the report's bytes per step are taken from), of which there were {@code steadySteps}.
   */
  private record WireBytes(long training, long steady, long steadySteps) {}

  /** On a GPU, rank 0 times steps 1, 1 + this, 1 + 2·this, ... by CUDA events around each operation. */
  static final int TIMED_INTERVAL = 10;

  /** One CPU rank: its model over its TP group's sites and, with DP, its DP group's gradient all-reduce. */
  private static WireBytes trainCpuRank(GptConfig cfg, Corpus corpus, Options opt, Place place, CollectiveSites sites,
      List<RunResult.StepRow> history, ProgressBar bar, Checkpoint.State resume, int last, Saving saving,
      Map<String, Long> byKind) {
    CpuOps ops = new CpuOps();
    TensorParallel<float[]> tp = new CpuTensorParallel(sites);
    SiteDump<float[]> dump = siteDump(opt, place, sites.spec(), "cpu", ops, tp);
    Gpt<float[]> model = new Gpt<>(cfg, ops, dump == null ? tp : dump, place.tp().rank(), opt.microBatchSize(),
        opt.seed());
    CollectiveSites dpSites = opt.dataParallelSize() == 1 ? null : new CollectiveSites(place.dp(), opt.dpCompression(),
        opt.calibrationSteps(), opt.recalibrateInterval());
    DataParallel dp = dpSites == null ? null : DataParallel.cpu(dpSites, model.layout(), cfg.tp(), model.grads());
    WireBytes wire = trainRank(model, corpus, opt, place, sites, dp, history, null, bar, resume, last, saving, dump);
    if (dpSites != null) byKind.merge(dataParallelKind(opt), dpSites.bytesSent(), Long::sum);
    return wire;
  }

  /** The bytes-by-kind label of the data-parallel gradient all-reduce. */
  private static String dataParallelKind(Options opt) {
    return "data-parallel all-reduce (gradients, " + opt.dpCompression() + ")";
  }

  /** This rank's {@code --dump-sites} around {@code tp}: for the TP ranks of replica 0; null without the option. */
  private static <A> SiteDump<A> siteDump(Options opt, Place place, String compression, String device, Ops<A> ops,
      TensorParallel<A> tp) {
    if (opt.dumpSites() == null || place.replica() != 0) return null;
    String run = String.format(java.util.Locale.ROOT, "%s, TP=%d, %d layers, hidden %d, %d heads, seq %d, micro-batch"
        + " %d, seed %d, %d steps", device, opt.tensorModelParallelSize(), opt.numLayers(), opt.hiddenSize(),
        opt.numAttentionHeads(), opt.seqLength(), opt.microBatchSize(), opt.seed(), opt.steps());
    return new SiteDump<>(tp, ops, java.nio.file.Path.of(opt.dumpSites()), compression, place.tp().rank(), run);
  }

  /**
   * Before the first step, the ranks of {@code link} (none: nothing to do) check that they run the same model, options
   * and codec plan: NCCL's processes each parse their own command line, and a rank started with another {@code --seed}
   * or {@code --lr} would train its own replicated weights (found only by a checkpoint's save, if at all).
   *
   * @throws dev.taco.collective.CollectiveException on every rank if any two differ, naming this rank's settings
   */
  static void agreeOnTheRun(DeviceTransport link, GptConfig cfg, Options opt, CollectiveSites sites) {
    if (link == null) {
      return;
    }
    String run = cfg + " " + opt.asMap() + " compression " + sites.spec();
    link.agree("the model, the training options and the compression (start every rank with the same arguments;"
        + " this rank has " + run + ")", DeviceTransport.fingerprint(run));
  }

  /**
   * The link {@code --compression auto} prices a GPU run's phases on: the one given ({@code --link}, an emulated rank's
   * own); for {@code device-local}, whose ranks share one GPU, an infinitely fast one (no link: bf16 wins).
   *
   * @throws IllegalArgumentException for NCCL without a link model (name the cluster's link, or give its
   *     {@code all_reduce_perf} output)
   */
  static LinkProfile autoLink(Gpu gpu, LinkProfile given) {
    if (given != null) return given;
    if (gpu.nccl()) {
      throw new IllegalArgumentException("--compression auto over NCCL needs the link's model: --link PROFILE, or"
          + " --link-table FILE with nccl-tests' all_reduce_perf output on these GPUs");
    }
    return LinkProfiles.byName("inf");
  }

  /**
   * One GPU rank: its backend (and with R > 1 its device-local or NCCL collectives, whose sites take their plans from
   * {@code sites}; with DP its DP group's, every gradient with the {@code --dp-compression} plan), then the common
   * loop; the reporting rank's operations are timed by CUDA events into {@code times}, and its DP bytes added to
   * {@code byKind} (the TP ones its sites count).
   */
  private static WireBytes trainGpuRank(GptConfig cfg, Corpus corpus, Options opt, Place place, CollectiveSites sites,
      Gpu gpu, LinkProfile linkModel, NcclCommunicator nccl, NcclCommunicator ncclDp, List<RunResult.StepRow> history,
      Map<String, Double> times, ProgressBar bar, Checkpoint.State resume, int last, Saving saving,
      Map<String, Long> byKind) {
    CudaContext ctx = nccl == null ? gpu.context() : nccl.context();
    ctx.makeCurrent();
    boolean alone = place.tp().worldSize() == 1 && nccl == null, dpOn = opt.dataParallelSize() > 1;
    if (sites.auto() && !alone) {
      sites.pricing(new DevicePricing(ctx, cfg.tp(), autoLink(gpu, linkModel))); // an emulated rank's link given
    }
    try (DeviceTransport link = alone ? null : gpu.emulated() ? new EmulatedTransport(ctx, cfg.tp(), linkModel)
        : nccl != null ? new NcclTransport(nccl) : new DeviceLocalTransport(ctx, place.tp());
        DeviceTransport dpLink = !dpOn ? null : ncclDp != null ? new NcclTransport(ncclDp)
            : new DeviceLocalTransport(ctx, place.dp());
        DeviceCollectives dc = alone ? null : new DeviceCollectives(link);
        DeviceCollectives dpc = dpOn ? new DeviceCollectives(dpLink) : null;
        CudaOps ops = new CudaOps(ctx, alone ? null : dc.stream(), gpu.precision())) {
      CudaTensorParallel tp = alone ? CudaTensorParallel.alone(ops)
          : CudaTensorParallel.of(ops, new DeviceSiteCollectives(dc, sites), gpu.tpComm());
      agreeOnTheRun(link, cfg, opt, sites);
      agreeOnTheRun(dpLink, cfg, opt, sites);
      try (OpTimes timer = place.reports() ? OpTimes.of(ops, tp) : null) {
        TensorParallel<DeviceBuffer> seam = timer == null ? tp : timer.tp();
        SiteDump<DeviceBuffer> dump = alone ? null : siteDump(opt, place, sites.spec(), ctx.name(), ops, seam);
        Gpt<DeviceBuffer> model = new Gpt<>(cfg, timer == null ? ops : timer.ops(), dump == null ? seam : dump,
            place.tp().rank(), opt.microBatchSize(), opt.seed());
        DataParallel dp = dpOn ? DataParallel.gpu(dpc, gpuPlan(opt.dpCompression()), model.layout(), cfg.tp(),
            model.grads()) : null;
        WireBytes wire = trainRank(model, corpus, opt, place, alone ? null : sites, dp, history, timer, bar, resume,
            last, saving, dump);
        if (dpc != null) byKind.merge(dataParallelKind(opt), dpc.bytesSent(), Long::sum);
        if (timer != null && timer.steps() > 0) {
          double total = 0;
          for (Map.Entry<String, Double> e : timer.totals().entrySet()) {
            times.put(e.getKey(), e.getValue() / timer.steps());
            total += e.getValue() / timer.steps();
          }
          times.put("total", total);
        }
        return wire;
      }
    }
  }

  /**
   * One rank's loop; the reporting rank (TP rank 0 of replica 0) records the history, replica 0 evaluates and saves.
   * Every step draws one global batch from the seed's generator (the same on every rank); replica d runs micro-batches
   * m = 0..A-1 on sequences [(d·A + m)·B, +B), accumulating gradients with the loss scaled by 1/A, then (with DP) sums
   * them over its DP group, so the step's gradient is the mean over the global batch whatever the DP size and A.
   * Returns the bytes this rank sent in training steps' TP collectives (the model's count: the host collectives', or
   * on a GPU the device collectives'), those of the steps in which no site calibrated, and the number of those steps. {@code sites} samples codec error on the reporting rank every
   * {@link Options#codecErrorInterval} steps; null for a GPU rank alone. {@code dump} (null: none) writes the tensors
   * of the last training step ({@code last - 1}) that the model hands its TP collectives.
   */
  private static <A> WireBytes trainRank(Gpt<A> model, Corpus corpus, Options opt, Place place, CollectiveSites sites,
      DataParallel dp, List<RunResult.StepRow> history, OpTimes timer, ProgressBar bar, Checkpoint.State resume,
      int last, Saving saving, SiteDump<A> dump) {
    Communicator exact = place.tp();
    int rank = exact.rank();
    boolean reports = place.reports(), replica0 = place.replica() == 0;
    int b = opt.microBatchSize(), t = model.config().seqLength(), acc = opt.accumulation(), gb = opt.globalBatchSize();
    int[] gin = new int[gb * t], gtgt = new int[gb * t], in = new int[b * t], tgt = new int[b * t];
    SplittableRandom trainRng = new SplittableRandom(opt.seed());
    long drawn = 0;
    int first = 0;
    if (resume != null) {
      ParameterTensors p = model.layout();
      model.restore(p.slice(resume.params()), p.slice(resume.m()), p.slice(resume.v()));
      if (sites != null) sites.restore(resume.sites().get(Math.min(place.replica(), resume.sites().size() - 1)));
      if (dp != null && !resume.dpSites().isEmpty()) {
        // a DP site's plan is for its TP rank's gradient shard of one codec: kept at the same TP size and codec
        if (resume.tp() == model.config().tp() && opt.dpCompression().equals(resume.dpCompression())) {
          dp.restoreSites(resume.dpSites().get(rank));
        } else if (place.reports()) {
          log.info("the checkpoint's data-parallel gradient plans (--dp-compression {} at TP={}) do not apply to this"
              + " run's ({} at TP={})", resume.dpCompression(), resume.tp(), opt.dpCompression(), model.config().tp());
        }
      }
      for (; drawn < resume.batchesDrawn(); drawn++) corpus.batch(false, trainRng, gb, t, gin, gtgt);
      first = resume.step();
    }
    long wire = 0, steadyWire = 0, steadySteps = 0; // steady: the steps in which no site calibrated
    long longestStep = 0; // nanoseconds, evaluation included: what --exit-duration-in-mins keeps room for
    float[] normBuf = new float[1];
    for (int step = first; step <= last; step++) {
      long iterationStart = System.nanoTime();
      Double val = null;
      if (replica0 && (step % opt.evalInterval() == 0 || step == last)) { // the last: the end, or an --exit-interval
        if (timer != null) timer.setEnabled(false); // evaluation is not a training step
        val = evaluate(model, exact, sites, corpus, opt, b, t, step);
      }
      // every TIMED_INTERVAL-th step is timed operation by operation (not as one graph); step 0 compiles the kernels
      if (timer != null) timer.setEnabled(step % TIMED_INTERVAL == 1);
      long calibrated = sites == null ? 0 : sites.calibrationMeasurements();
      if (step == last) {
        if (reports && (val != null || last == opt.steps())) {
          history.add(new RunResult.StepRow(step, null, val, 0, null));
        }
        break;
      }
      long stepStart = System.nanoTime();
      corpus.batch(false, trainRng, gb, t, gin, gtgt);
      drawn++;
      if (sites != null) {
        sites.setSampling(reports && opt.codecErrorInterval() > 0 && step % opt.codecErrorInterval() == 0);
      }
      if (dump != null) dump.take(step == last - 1);
      long before = model.bytesSent();
      if (sites != null) sites.setCountingTraining(true);
      float loss = 0;
      try {
        for (int m = 0; m < acc; m++) {
          int from = (place.replica() * acc + m) * b * t;
          System.arraycopy(gin, from, in, 0, b * t);
          System.arraycopy(gtgt, from, tgt, 0, b * t);
          // zero-grad (first micro-batch), forward, backward; one CUDA graph on a GPU at TP = 1
          float l = model.trainStep(in, tgt, 1f / acc, m == 0);
          if (model.config().sequenceSharded()) { // each rank had 1/R of the tokens
            long reported = model.bytesSent();
            l = meanOverRanks(exact, l);
            before += model.bytesSent() - reported; // the report's own reduction is not the model's TP traffic
          }
          loss += l / acc;
        }
        if (dp != null) {
          dp.allReduce();
          loss = meanOverRanks(place.dp(), loss);
        }
        if (!Float.isFinite(loss)) {
          throw new TrainingDiverged("training diverged: loss " + loss + " at step " + step + "; lower --lr", null);
        }
      } catch (NonFiniteInputException e) {
        // the codec's advice (nonfinite=propagate) is for data that is NaN on purpose, not for a diverged run
        throw new TrainingDiverged(
            "training diverged (NaN/Inf) at step " + step + ": " + e.location() + "; lower --lr", e);
      } catch (IllegalArgumentException e) {
        throw new IllegalStateException("step " + step + ", rank " + rank + ": " + e.getMessage(), e);
      }
      if (dump != null && step == last - 1) {
        dump.write(step);
        log.info("--dump-sites: the TP tensors of step {} in {}", step, dump.file());
      }
      wire += model.bytesSent() - before;
      saving.steps().addWireBytes(step, model.bytesSent() - before);
      if (sites == null || sites.calibrationMeasurements() == calibrated) {
        steadyWire += model.bytesSent() - before;
        steadySteps++;
      }
      if (sites != null) sites.setCountingTraining(false);
      // global gradient norm: shards summed over ranks, replicated tensors counted once (rank 0's); with DP the
      // gradients are the replicas' sum, so the mean's norm is 1/DP of theirs, and AdamW scales by 1/DP
      normBuf[0] = (float) model.gradSquaredNorm(rank == 0);
      exact.allReduce(normBuf, 0, 1);
      float norm = (float) Math.sqrt(normBuf[0]) / opt.dataParallelSize();
      if (!Float.isFinite(norm)) { // the GPU collectives pass NaN on (they cannot refuse it without a host wait)
        throw new TrainingDiverged(
            "training diverged: gradient norm " + norm + " at step " + step + "; lower --lr", null);
      }
      float scale = (opt.clipGrad() > 0 && norm > opt.clipGrad() ? opt.clipGrad() / norm : 1f) / opt.dataParallelSize();
      float lr = learningRate(opt, step);
      model.update(lr, BETA1, BETA2, EPS, opt.weightDecay(), scale, step + 1);
      if (timer != null) { // a step in which a site calibrated on the host is not a step's time
        if (sites != null && sites.calibrationMeasurements() != calibrated) timer.discard();
        else timer.collect();
      }
      double stepSeconds = (System.nanoTime() - stepStart) / 1e9;
      if (reports) {
        history.add(new RunResult.StepRow(step, (double) loss, val, lr, (double) norm));
        bar.step();
        bar.setExtraMessage(String.format(" loss %.3f", loss));
        if (val != null) log.debug("step {} train {} val {}", step, loss, val);
      }
      // a process's first step (the JIT's warm-up, kernel compiles) is no measure of the next: left out
      if (step > first) longestStep = Math.max(longestStep, System.nanoTime() - iterationStart);
      boolean late = step + 1 < last && saving.ck.outOfTime(System.nanoTime(), longestStep);
      String why = stopAgreed(place.world(), late); // also: every rank has added its bytes of this step
      boolean stop = why != null;
      if (stop) saving.stopReason().compareAndSet(null, why);
      if (reports) saving.steps().write(step, loss, val, lr, norm, stepSeconds);
      if (saving.ck.savesAfter(step + 1, opt.steps()) || (stop && saving.ck.save() != null)) {
        stop |= !saving.save(model, place, sites, dp, step + 1, drawn); // a failed save stops the run here
      }
      if (stop) {
        saving.stoppedAt().accumulateAndGet(step + 1, Math::max);
        if (replica0) { // the loss where it stopped
          if (timer != null) timer.setEnabled(false);
          Double end = evaluate(model, exact, sites, corpus, opt, b, t, step + 1);
          if (reports) history.add(new RunResult.StepRow(step + 1, null, end, 0, null));
        }
        break;
      }
    }
    return new WireBytes(wire, steadyWire, steadySteps);
  }

  /**
   * What the ranks of a run share besides their collectives: its checkpoint saves, the step it stopped after on a
   * signal, at --exit-duration-in-mins or on a failed save (and why: {@code signal}, {@code exit-duration}), and its
   * step log. For a save, replica 0's ranks hand their weights and moments to the
   * shared slots and every replica's TP rank 0 its sites' state (replicas calibrate on different data, so their plans
   * may differ), replica 0's rank q its DP group's gradient sites' state (the group agrees on them), then the reporting
   * rank writes the checkpoint ({@link Checkpoint#save}) while the others wait, and every rank learns whether it
   * succeeded.
   */
  private record Saving(Checkpointing ck, GptConfig cfg, String compression, Options opt, Map<String, Object> options,
      float[][][] slots, List<Map<String, CollectiveSites.SiteState>> siteSlots,
      List<Map<String, CollectiveSites.SiteState>> dpSlots,
      java.util.concurrent.atomic.AtomicReference<RuntimeException> failure,
      java.util.concurrent.atomic.AtomicInteger stoppedAt,
      java.util.concurrent.atomic.AtomicReference<String> stopReason, StepLog steps) {
    Saving(Checkpointing ck, GptConfig cfg, String compression, Options opt, Map<String, Object> options,
        float[][][] slots, StepLog steps) {
      this(ck, cfg, compression, opt, options, slots, noSites(opt.dataParallelSize()), noSites(cfg.tp()),
          new java.util.concurrent.atomic.AtomicReference<>(), new java.util.concurrent.atomic.AtomicInteger(-1),
          new java.util.concurrent.atomic.AtomicReference<>(), steps);
    }

    /** {@code n} slots, each an empty sites' state until a rank fills its own. */
    private static List<Map<String, CollectiveSites.SiteState>> noSites(int n) {
      return new ArrayList<>(java.util.Collections.nCopies(n, Map.<String, CollectiveSites.SiteState>of()));
    }

    /**
     * Saves the checkpoint after {@code done} steps (every rank calls it).
     *
     * @return whether it was saved; false (on every rank): the run stops after this step, the error in
     *     {@link #failure}, as a signal stops it, so that the steps that ran are reported
     */
    boolean save(Gpt<?> model, Place place, CollectiveSites sites, DataParallel dp, int done, long drawn) {
      Communicator exact = place.tp();
      if (place.replica() == 0) slots[exact.rank()] = model.stateToHost();
      if (exact.rank() == 0) siteSlots.set(place.replica(), sites == null ? Map.of() : sites.state());
      if (place.replica() == 0 && dp != null) dpSlots.set(exact.rank(), dp.sitesState()); // its DP group's
      place.world().barrier();
      if (place.reports()) {
        try {
          boolean dpOn = opt.dataParallelSize() > 1;
          Checkpoint.save(ck.save(), done, cfg, slots, compression, List.copyOf(siteSlots),
              dpOn ? opt.dpCompression() : null, dpOn ? List.copyOf(dpSlots) : List.of(), drawn, options);
        } catch (java.io.IOException | RuntimeException e) {
          String why = e instanceof java.nio.file.FileSystemException fs ? (fs.getReason() != null ? fs.getReason()
              : e.getClass().getSimpleName().replace("Exception", "")) + " (" + fs.getFile() + ")"
              : e.getMessage() != null ? e.getMessage() : e.toString();
          failure.set(new IllegalStateException("saving the checkpoint of step " + done + " into " + ck.save()
              + " failed: " + why, e));
        }
        java.util.Arrays.fill(slots, null);
      }
      place.world().barrier();
      return failure.get() == null;
    }
  }

  /**
   * One run's per-step log, shared by its ranks: each rank adds the bytes it sent in a step's TP collectives, and the
   * reporting rank, once every rank has (after the step's stop agreement, an all-reduce over all of them), writes the
   * step's line into the metrics file ({@link StepMetrics}; null: none, the bytes are dropped).
   *
   * @param tokensPerStep tokens of a global batch (sequences × T)
   * @param wire each step's bytes of every rank until its line is written
   */
  private record StepLog(StepMetrics metrics, String codec, double tokensPerStep,
      Map<Integer, java.util.concurrent.atomic.LongAdder> wire) {
    StepLog(StepMetrics metrics, String codec, double tokensPerStep) {
      this(metrics, codec, tokensPerStep, new java.util.concurrent.ConcurrentHashMap<>());
    }

    void addWireBytes(int step, long bytes) {
      wire.computeIfAbsent(step, k -> new java.util.concurrent.atomic.LongAdder()).add(bytes);
    }

    /** Writes step {@code step}'s line, which took {@code seconds} (evaluation left out). */
    void write(int step, float loss, Double val, float lr, float gradNorm, double seconds) {
      java.util.concurrent.atomic.LongAdder bytes = wire.remove(step);
      if (metrics != null) {
        metrics.write(codec, step, loss, val, lr, gradNorm, tokensPerStep / seconds, bytes == null ? 0 : bytes.sum());
      }
    }
  }

  /**
   * Why every rank stops after this step, or null: {@code signal} if any rank has seen a stop signal
   * ({@link StopSignal}), else {@code exit-duration} if any rank is {@code late} (--exit-duration-in-mins, by its
   * clock).
   * An exact all-reduce over every rank, so all of them stop after the same step.
   */
  private static String stopAgreed(Communicator world, boolean late) {
    float[] f = {StopSignal.requested() != null ? 1 : 0, late ? 1 : 0};
    world.allReduce(f, 0, 2);
    return f[0] > 0 ? "signal" : f[1] > 0 ? "exit-duration" : null;
  }

  /**
   * What a checkpoint records of the run's settings: the options that change its steps ({@link Options#recorded}),
   * the calibration's where a codec of the run calibrates, and the text it trains on ({@code data}); a resume with
   * others is told which.
   */
  private static Map<String, Object> recordedOptions(String compression, Options opt, Corpus corpus) {
    Map<String, Object> o = new LinkedHashMap<>(opt.recorded(CollectiveSites.calibrates(compression)
        || (opt.dataParallelSize() > 1 && CollectiveSites.calibrates(opt.dpCompression()))));
    o.put("data", corpus.fingerprint());
    return o;
  }

  /** The mean of every rank's {@code x} (exact all-reduce): a sequence-parallel loss, each rank's over 1/R of the tokens. */
  private static float meanOverRanks(Communicator exact, float x) {
    float[] buf = {x};
    exact.allReduce(buf, 0, 1);
    return buf[0] / exact.worldSize();
  }

  /** Mean validation loss over {@code evalIters} fixed micro-batches (the same batches at every evaluation). */
  private static double evaluate(Gpt<?> model, Communicator exact, CollectiveSites sites, Corpus corpus, Options opt,
      int b, int t, int step) {
    SplittableRandom rng = new SplittableRandom(opt.seed() ^ 0x5DEECE66DL);
    int[] in = new int[b * t], tgt = new int[b * t];
    double sum = 0;
    if (sites != null) sites.setEvaluating(true); // no calibration or sampling on validation batches
    try {
      for (int i = 0; i < opt.evalIters(); i++) {
        corpus.batch(true, rng, b, t, in, tgt);
        float loss = model.forward(in, tgt);
        sum += model.config().sequenceSharded() ? meanOverRanks(exact, loss) : loss;
      }
    } finally {
      if (sites != null) sites.setEvaluating(false);
    }
    if (!Double.isFinite(sum)) {
      throw new TrainingDiverged(
          "training diverged: validation loss " + sum + " at step " + step + "; lower --lr", null);
    }
    return sum / opt.evalIters();
  }
}
