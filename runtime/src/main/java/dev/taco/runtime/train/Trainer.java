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
import dev.taco.collective.device.DeviceSiteCollectives;
import dev.taco.runtime.model.CudaOps;
import dev.taco.runtime.model.CudaTensorParallel;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.model.OpTimes;
import dev.taco.runtime.model.ParameterTensors;
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
  /** Every this many steps rank 0 measures the codec's error on each TP all-reduce input. */
  /** The default {@link Options#codecErrorInterval}: every 10th step. */
  public static final int CODEC_ERROR_INTERVAL = 10;

  private Trainer() {}

  /**
   * Training hyper-parameters, named after Megatron-LM's flags.
   *
   * @param steps optimizer steps ({@code --train-iters} / {@code --steps})
   * @param microBatch sequences per step, B
   * @param lr peak learning rate
   * @param minLr the learning rate the cosine decay ends at ({@code --min-lr})
   * @param warmupIters steps of linear warmup from lr/warmupIters to lr ({@code --lr-warmup-iters}; 0: none)
   * @param weightDecay AdamW's decoupled weight decay on the weight matrices ({@code --weight-decay})
   * @param clipGrad global gradient-norm clipping threshold ({@code --clip-grad}; 0: no clipping)
   * @param seed seed of weights and batches
   * @param evalInterval steps between validation evaluations
   * @param evalIters validation micro-batches per evaluation
   * @param calibrationSteps tensors per collective site that calibrate its plan (0: the codec's defaults everywhere)
   * @param recalibrateInterval uses of a site between re-calibrations (0: calibrate once)
   * @param distributedTimeoutMinutes how long a rank waits in one collective for the others before the run fails with
   *     the reason (Megatron-LM's {@code --distributed-timeout-minutes}; the NCCL watchdog's timeout on GPUs)
   * @param dataParallel DP size ({@code --data-parallel-size}): replicas of the TP group, each on its share of the
   *     global batch, gradients all-reduced over the replicas
   * @param globalBatch sequences per optimizer step over all replicas ({@code --global-batch-size}): micro-batch × DP
   *     × the gradient-accumulation steps
   * @param dpCompression the codec of the DP gradient all-reduce ({@code --dp-compression}; {@code fp32}: exact)
   * @param codecErrorInterval steps between the steps whose TP tensors the reporting rank measures the codec's error on
   *     ({@code --codec-error-interval}; 0: never). Each measurement encodes and decodes every site's tensor on the
   *     host, which on a GPU run costs a copy to the host and the CPU codec's time.
   */
  public record Options(int steps, int microBatch, float lr, float minLr, int warmupIters, float weightDecay,
      float clipGrad, long seed, int evalInterval, int evalIters, int calibrationSteps, int recalibrateInterval,
      int distributedTimeoutMinutes, int dataParallel, int globalBatch, String dpCompression, int codecErrorInterval) {
    /** @throws IllegalArgumentException naming the flag of a value out of its range */
    public Options {
      if (codecErrorInterval < 0) {
        throw new IllegalArgumentException("--codec-error-interval must be >= 0 (0: never), got " + codecErrorInterval);
      }
      if (distributedTimeoutMinutes <= 0 || distributedTimeoutMinutes > 10_080) {
        throw new IllegalArgumentException("--distributed-timeout-minutes must be in 1..10080 (a week), got "
            + distributedTimeoutMinutes);
      }
      if (calibrationSteps < 0)
        throw new IllegalArgumentException("--calibration-steps must be >= 0, got " + calibrationSteps);
      if (recalibrateInterval < 0)
        throw new IllegalArgumentException("--recalibrate-interval must be >= 0, got " + recalibrateInterval);
      if (steps <= 0) throw new IllegalArgumentException("--steps must be positive, got " + steps);
      if (microBatch <= 0) throw new IllegalArgumentException("--micro-batch-size must be positive, got " + microBatch);
      if (!(lr > 0) || Float.isInfinite(lr))
        throw new IllegalArgumentException("--lr must be a positive number, got " + lr);
      if (!(minLr >= 0) || minLr > lr) {
        throw new IllegalArgumentException("--min-lr must be in [0, --lr] = [0, " + lr + "], got " + minLr);
      }
      if (warmupIters < 0) throw new IllegalArgumentException("--lr-warmup-iters must be >= 0, got " + warmupIters);
      if (!(weightDecay >= 0) || Float.isInfinite(weightDecay)) {
        throw new IllegalArgumentException("--weight-decay must be a number >= 0, got " + weightDecay);
      }
      if (!(clipGrad >= 0) || Float.isInfinite(clipGrad)) {
        throw new IllegalArgumentException("--clip-grad must be a number >= 0 (0: off), got " + clipGrad);
      }
      if (evalInterval <= 0)
        throw new IllegalArgumentException("--eval-interval must be positive, got " + evalInterval);
      if (evalIters <= 0) throw new IllegalArgumentException("--eval-iters must be positive, got " + evalIters);
      if (dataParallel <= 0)
        throw new IllegalArgumentException("--data-parallel-size must be positive, got " + dataParallel);
      if (globalBatch <= 0 || globalBatch % ((long) microBatch * dataParallel) != 0) {
        throw new IllegalArgumentException("--global-batch-size " + globalBatch + " must be a positive multiple of"
            + " --micro-batch-size x --data-parallel-size = " + (long) microBatch * dataParallel);
      }
      try {
        requireKnownCompression(dpCompression);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--dp-compression: " + e.getMessage());
      }
    }

    /** The options of one replica stepping alone: no data parallelism, no accumulation. */
    public Options(int steps, int microBatch, float lr, float minLr, int warmupIters, float weightDecay,
        float clipGrad, long seed, int evalInterval, int evalIters, int calibrationSteps, int recalibrateInterval,
        int distributedTimeoutMinutes) {
      this(steps, microBatch, lr, minLr, warmupIters, weightDecay, clipGrad, seed, evalInterval, evalIters,
          calibrationSteps, recalibrateInterval, distributedTimeoutMinutes, 1, microBatch, "fp32",
          CODEC_ERROR_INTERVAL);
    }

    /**
     * The options by their report and checkpoint names ({@code steps, micro_batch_size, lr, min_lr, lr_warmup_iters,
     * weight_decay, clip_grad, seed, data_parallel_size, global_batch_size, dp_compression, codec_error_interval}).
     */
    public Map<String, Object> asMap() {
      Map<String, Object> o = new LinkedHashMap<>();
      o.put("steps", steps);
      o.put("micro_batch_size", microBatch);
      o.put("lr", lr);
      o.put("min_lr", minLr);
      o.put("lr_warmup_iters", warmupIters);
      o.put("weight_decay", weightDecay);
      o.put("clip_grad", clipGrad);
      o.put("seed", seed);
      o.put("data_parallel_size", dataParallel);
      o.put("global_batch_size", globalBatch);
      o.put("dp_compression", dpCompression);
      o.put("codec_error_interval", codecErrorInterval);
      return o;
    }

    /** Micro-batches each replica runs per optimizer step (gradient accumulation). */
    public int accumulation() {
      return globalBatch / (microBatch * dataParallel);
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
   */
  public record Checkpointing(java.nio.file.Path save, int saveInterval, java.nio.file.Path load, int exitInterval) {
    /** No checkpoints. */
    public static final Checkpointing NONE = new Checkpointing(null, 0, null, 0);

    /** @throws IllegalArgumentException naming the flag of a negative interval or an interval without --save */
    public Checkpointing {
      if (saveInterval < 0) throw new IllegalArgumentException("--save-interval must be >= 0, got " + saveInterval);
      if (exitInterval < 0) throw new IllegalArgumentException("--exit-interval must be >= 0, got " + exitInterval);
      if (saveInterval > 0 && save == null) throw new IllegalArgumentException("--save-interval needs --save DIR");
    }

    /** Whether the run saves after {@code done} steps of {@code steps}: every interval, at an exit, at the end. */
    boolean savesAfter(int done, int steps) {
      return save != null && ((saveInterval > 0 && done % saveInterval == 0) || done == exitInterval || done == steps);
    }
  }

  /**
   * Where a GPU run runs and how.
   *
   * @param context the GPU (owned by the caller)
   * @param precision what the GEMMs multiply in
   * @param tpComm false replaces the TP all-reduces by no-ops ({@code --no-tp-comm}: timing only, wrong numbers)
   * @param nccl the TP ranks on GPUs 0..R-1, one each, their collectives through NCCL ({@code NcclTransport}); false:
   *     every rank on {@code context}'s GPU, through {@code device-local}
   */
  public record Gpu(CudaContext context, CudaOps.Precision precision, boolean tpComm, boolean nccl) {
    /** @throws NullPointerException for a null context or precision */
    public Gpu {
      java.util.Objects.requireNonNull(context, "context");
      java.util.Objects.requireNonNull(precision, "precision");
    }
  }

  /** @throws IllegalArgumentException if {@code compression} names no codec ({@code fp32} = exact, no codec) */
  public static void requireKnownCompression(String compression) {
    if (!compression.equals("fp32")) Codecs.byName(compression);
  }

  /**
   * Learning rate at {@code step} (0-based), as Megatron-LM's cosine schedule: linear warmup over the first
   * {@code warmupIters} steps (step i at lr·(i+1)/warmupIters), then cosine decay from lr to minLr at the last step.
   * The warmup is a number of steps, not a fraction of the run, so a short run does not reach the peak in a few
   * steps (with a tenth of --steps, 50 steps warmed up in 5 and the loss spiked from 3.2 to 6-7 at step 13).
   */
  static float learningRate(Options o, int step) {
    int warmup = Math.min(o.warmupIters(), o.steps());
    if (step < warmup) return o.lr() * (step + 1) / warmup;
    double progress = (double) (step - warmup) / Math.max(1, o.steps() - warmup);
    return (float) (o.minLr() + (o.lr() - o.minLr()) * 0.5 * (1 + Math.cos(Math.PI * progress)));
  }

  /** Trains one model at TP size {@code cfg.tp()} on the CPU with the given compression (see the next overload). */
  public static RunResult run(GptConfig cfg, Corpus corpus, String compression, Options opt) {
    return run(cfg, corpus, compression, opt, null, Checkpointing.NONE);
  }

  /**
   * Trains one model at TP size {@code cfg.tp()} with the given compression and returns what it measured: on the CPU
   * when {@code gpu} is null (every rank's collective sites calibrate and sample codec error on the host), else on that
   * GPU, every rank a thread driving its own {@link CudaOps}, TP collectives through {@code device-local} or NCCL
   * {@link DeviceCollectives}, each site with its own plan as on the CPU ({@link CollectiveSites#planAt}: calibration
   * and error sampling on host copies of the tensors they need).
   *
   * <p>With {@code ck.load()} it resumes from that folder's newest checkpoint (weights, AdamW moments, the data
   * position, every site's codec plan): its steps give the same losses, bit for bit on the CPU, as the run that
   * saved it would have. With {@code ck.save()} it saves every {@code ck.saveInterval()} steps and before it exits.
   *
   * @throws IllegalArgumentException for an unknown codec, one without GPU kernels on a GPU, a corpus shorter than
   *     a window, or a checkpoint that cannot be loaded for this run (naming the file)
   */
  public static RunResult run(GptConfig cfg, Corpus corpus, String compression, Options opt, Gpu gpu,
      Checkpointing ck) {
    requireKnownCompression(compression);
    corpus.requireWindow(cfg.seqLength());
    int r = cfg.tp();
    Checkpoint.State resume = ck.load() == null ? null : Checkpoint.load(ck.load(), cfg, compression);
    if (resume != null && resume.step() >= opt.steps()) {
      throw new IllegalArgumentException("checkpoint " + resume.dir() + " is at step " + resume.step() + ", not before"
          + " --steps " + opt.steps() + ": nothing left to train (raise --steps)");
    }
    Map<String, Object> recorded = recordedOptions(cfg, compression, opt, corpus);
    List<String> changed = resume == null ? List.of() : resume.changedOptions(recorded);
    if (!changed.isEmpty()) {
      log.warn("resuming {} with settings that differ from the checkpoint's: {}; the steps from here are not those the"
          + " checkpointed run would have taken", resume.dir(), String.join(", ", changed));
    }
    int first = resume == null ? 0 : resume.step();
    int last = ck.exitInterval() > first && ck.exitInterval() < opt.steps() ? ck.exitInterval() : opt.steps();
    if (gpu != null && gpu.nccl() && opt.dataParallel() > 1) gpuPlan(opt.dpCompression());
    Saving saving = new Saving(ck, cfg, compression, opt, recorded, new float[r][][]);
    Map<String, Long> byKind = new java.util.concurrent.ConcurrentSkipListMap<>(); // CPU: training bytes, all ranks
    int[] stillCalibrating = new int[1];
    long t0 = System.nanoTime();
    List<RunResult.StepRow> history = new ArrayList<>();
    Map<String, CollectiveSites.SampledError> errors = new LinkedHashMap<>();
    Map<String, CollectiveSites.CalibratedPlan> plans = new LinkedHashMap<>();
    log.info("run '{}': TP={}, DP={}, {} steps on {}", compression, r, opt.dataParallel(), opt.steps(), gpu == null
        ? "the CPU"
        : gpu.context().name() + " (" + gpu.precision() + (gpu.tpComm() ? "" : ", TP collectives off") + ")");
    Map<String, Double> gpuTimes = gpu == null ? null : new LinkedHashMap<>();
    if (gpu != null && (r > 1 || gpu.nccl())) gpuPlan(compression); // a codec without GPU kernels fails up front
    List<WireBytes> wireBytes;
    java.time.Duration timeout = java.time.Duration.ofMinutes(opt.distributedTimeoutMinutes());
    int dpSize = opt.dataParallel(), world = r * dpSize;
    List<CudaContext> devices = new ArrayList<>();
    List<NcclCommunicator> nccl = new ArrayList<>(), ncclDp = new ArrayList<>();
    // the grid's groups: replica d's TP group, TP rank q's DP group (Megatron's order: TP ranks adjacent)
    List<List<LocalCommunicator>> tpGroups = new ArrayList<>(), dpGroups = new ArrayList<>();
    for (int d = 0; d < dpSize; d++) tpGroups.add(LocalGroup.create(r, timeout));
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
        Place place = new Place(tpGroups.get(d).get(q), dpGroups.get(q).get(d), comm);
        try {
          CollectiveSites sites = new CollectiveSites(place.tp(), compression, opt.calibrationSteps(),
              opt.recalibrateInterval(), gpu == null ? Integer.MAX_VALUE : TwoShotGpuKernels.MAX_COLS); // GPU: 16384
          WireBytes wire = gpu != null
              ? trainGpuRank(cfg, corpus, opt, place, sites, gpu, nccl.isEmpty() ? null : nccl.get(g),
                  ncclDp.isEmpty() ? null : ncclDp.get(q * dpSize + d), history, gpuTimes, bar, resume, last, saving)
              : trainCpuRank(cfg, corpus, opt, place, sites, history, bar, resume, last, saving, byKind);
          if (gpu == null) sites.trainingBytesByKind().forEach((k, v) -> byKind.merge(k, v, Long::sum));
          if (place.reports()) {
            plans.putAll(sites.plans());
            errors.putAll(sites.sampledErrors());
            stillCalibrating[0] = sites.sitesCalibrating();
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
          List.copyOf(history), errors, plans, gpuTimes));
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
    int end = signalled ? saving.stoppedAt().get() : last;
    int ran = Math.max(1, end - first);
    double tokensPerSecond = (double) ran * opt.globalBatch() * cfg.seqLength() / seconds;
    log.info("run '{}' done in {} s: validation loss {} -> {}", compression, String.format("%.1f", seconds),
        Double.isNaN(initialVal) ? "- (resumed)" : String.format("%.4f", initialVal), String.format("%.4f", finalVal));
    Map<String, Double> perKind = null;
    if (gpu == null) {
      perKind = new LinkedHashMap<>();
      for (Map.Entry<String, Long> e : byKind.entrySet()) perKind.put(e.getKey(), (double) e.getValue() / ran);
    }
    return new RunResult(compression, r, ran, first, signalled ? "signal" : end < opt.steps() ? "exit-interval" : null,
        initialVal, finalVal,
        steadySteps > 0 ? (double) steady / steadySteps : (double) total / ran, (int) (ran - steadySteps),
        stillCalibrating[0], perKind, seconds, tokensPerSecond, history, errors, plans, gpuTimes);
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
    Plan asked = compression.equals("fp32") ? Plan.EXACT : Plan.of(Codecs.byName(compression));
    String why = DeviceCollectives.unsupported(asked);
    if (why != null) {
      throw new IllegalArgumentException("--compression " + compression + " cannot run on the GPU (" + why + "): use "
          + "fp32, none, int8-group, fp8-tensor or a dual-scale taco codec there, or --device cpu");
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
    Gpt<float[]> model = Gpt.cpu(cfg, sites, opt.microBatch(), opt.seed());
    CollectiveSites dpSites = opt.dataParallel() == 1 ? null : new CollectiveSites(place.dp(), opt.dpCompression(),
        opt.calibrationSteps(), opt.recalibrateInterval());
    DataParallel dp = dpSites == null ? null : DataParallel.cpu(dpSites, model.layout(), cfg.tp(), model.grads());
    WireBytes wire = trainRank(model, corpus, opt, place, sites, dp, history, null, bar, resume, last, saving);
    if (dpSites != null) {
      byKind.merge("data-parallel all-reduce (gradients, " + opt.dpCompression() + ")", dpSites.bytesSent(), Long::sum);
    }
    return wire;
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
   * One GPU rank: its backend (and with R > 1 its device-local or NCCL collectives, whose sites take their plans from
   * {@code sites}; with DP its DP group's, every gradient with the {@code --dp-compression} plan), then the common
   * loop; the reporting rank's operations are timed by CUDA events into {@code times}.
   */
  private static WireBytes trainGpuRank(GptConfig cfg, Corpus corpus, Options opt, Place place, CollectiveSites sites,
      Gpu gpu, NcclCommunicator nccl, NcclCommunicator ncclDp, List<RunResult.StepRow> history,
      Map<String, Double> times, ProgressBar bar, Checkpoint.State resume, int last, Saving saving) {
    CudaContext ctx = nccl == null ? gpu.context() : nccl.context();
    ctx.makeCurrent();
    boolean alone = place.tp().worldSize() == 1 && nccl == null, dpOn = opt.dataParallel() > 1;
    try (DeviceTransport link = alone ? null : nccl != null ? new NcclTransport(nccl)
        : new DeviceLocalTransport(ctx, place.tp());
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
        Gpt<DeviceBuffer> model = new Gpt<>(cfg, timer == null ? ops : timer.ops(), timer == null ? tp : timer.tp(),
            place.tp().rank(), opt.microBatch(), opt.seed());
        DataParallel dp = dpOn ? DataParallel.gpu(dpc, gpuPlan(opt.dpCompression()), model.layout(), cfg.tp(),
            model.grads()) : null;
        WireBytes wire = trainRank(model, corpus, opt, place, alone ? null : sites, dp, history, timer, bar, resume,
            last, saving);
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
   * {@link Options#codecErrorInterval} steps; null for a GPU rank alone.
   */
  private static <A> WireBytes trainRank(Gpt<A> model, Corpus corpus, Options opt, Place place, CollectiveSites sites,
      DataParallel dp, List<RunResult.StepRow> history, OpTimes timer, ProgressBar bar, Checkpoint.State resume,
      int last, Saving saving) {
    Communicator exact = place.tp();
    int rank = exact.rank();
    boolean reports = place.reports(), replica0 = place.replica() == 0;
    int b = opt.microBatch(), t = model.config().seqLength(), acc = opt.accumulation(), gb = opt.globalBatch();
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
    float[] normBuf = new float[1];
    for (int step = first; step <= last; step++) {
      Double val = null;
      if (replica0 && (step % opt.evalInterval() == 0 || step == last)) { // the last: the end, or an --exit-interval
        if (timer != null) timer.setEnabled(false); // evaluation is not a training step
        val = evaluate(model, exact, sites, corpus, opt, b, t, step);
      }
      // every TIMED_INTERVAL-th step is timed operation by operation (not as one graph); step 0 compiles the kernels
      if (timer != null) timer.setEnabled(step % TIMED_INTERVAL == 1);
      long calibrated = sites == null ? 0 : sites.calibrationMeasurements();
      if (step == last) {
        if (reports && (val != null || last == opt.steps())) history.add(new RunResult.StepRow(step, null, val, 0));
        break;
      }
      corpus.batch(false, trainRng, gb, t, gin, gtgt);
      drawn++;
      if (sites != null) {
        sites.setSampling(reports && opt.codecErrorInterval() > 0 && step % opt.codecErrorInterval() == 0);
      }
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
      wire += model.bytesSent() - before;
      if (sites == null || sites.calibrationMeasurements() == calibrated) {
        steadyWire += model.bytesSent() - before;
        steadySteps++;
      }
      if (sites != null) sites.setCountingTraining(false);
      // global gradient norm: shards summed over ranks, replicated tensors counted once (rank 0's); with DP the
      // gradients are the replicas' sum, so the mean's norm is 1/DP of theirs, and AdamW scales by 1/DP
      normBuf[0] = (float) model.gradSquaredNorm(rank == 0);
      exact.allReduce(normBuf, 0, 1);
      float norm = (float) Math.sqrt(normBuf[0]) / opt.dataParallel();
      if (!Float.isFinite(norm)) { // the GPU collectives pass NaN on (they cannot refuse it without a host wait)
        throw new TrainingDiverged(
            "training diverged: gradient norm " + norm + " at step " + step + "; lower --lr", null);
      }
      float scale = (opt.clipGrad() > 0 && norm > opt.clipGrad() ? opt.clipGrad() / norm : 1f) / opt.dataParallel();
      float lr = learningRate(opt, step);
      model.update(lr, BETA1, BETA2, EPS, opt.weightDecay(), scale, step + 1);
      if (timer != null) { // a step in which a site calibrated on the host is not a step's time
        if (sites != null && sites.calibrationMeasurements() != calibrated) timer.discard();
        else timer.collect();
      }
      if (reports) {
        history.add(new RunResult.StepRow(step, (double) loss, val, lr));
        bar.step();
        bar.setExtraMessage(String.format(" loss %.3f", loss));
        if (val != null) log.debug("step {} train {} val {}", step, loss, val);
      }
      boolean stop = stopAgreed(place.world());
      if (saving.ck.savesAfter(step + 1, opt.steps()) || (stop && saving.ck.save() != null)) {
        saving.save(model, place, sites, dp, step + 1, drawn);
      }
      if (stop) {
        saving.stoppedAt().accumulateAndGet(step + 1, Math::max);
        if (replica0) { // the loss where it stopped
          if (timer != null) timer.setEnabled(false);
          Double end = evaluate(model, exact, sites, corpus, opt, b, t, step + 1);
          if (reports) history.add(new RunResult.StepRow(step + 1, null, end, 0));
        }
        break;
      }
    }
    return new WireBytes(wire, steadyWire, steadySteps);
  }

  /**
   * A run's checkpoint saves: replica 0's ranks hand their weights and moments to the shared slots and every
   * replica's TP rank 0 its sites' state (replicas calibrate on different data, so their plans may differ), replica
   * 0's rank q its DP group's gradient sites' state (the group agrees on them), then the
   * reporting rank writes the checkpoint ({@link Checkpoint#save}) while the others wait, and every rank learns whether
   * it succeeded.
   */
  private record Saving(Checkpointing ck, GptConfig cfg, String compression, Options opt, Map<String, Object> options,
      float[][][] slots, List<Map<String, CollectiveSites.SiteState>> siteSlots,
      List<Map<String, CollectiveSites.SiteState>> dpSlots,
      java.util.concurrent.atomic.AtomicReference<Throwable> failure,
      java.util.concurrent.atomic.AtomicInteger stoppedAt) {
    Saving(Checkpointing ck, GptConfig cfg, String compression, Options opt, Map<String, Object> options,
        float[][][] slots) {
      this(ck, cfg, compression, opt, options, slots, noSites(opt.dataParallel()), noSites(cfg.tp()),
          new java.util.concurrent.atomic.AtomicReference<>(), new java.util.concurrent.atomic.AtomicInteger(-1));
    }

    /** {@code n} slots, each an empty sites' state until a rank fills its own. */
    private static List<Map<String, CollectiveSites.SiteState>> noSites(int n) {
      return new ArrayList<>(java.util.Collections.nCopies(n, Map.<String, CollectiveSites.SiteState>of()));
    }

    void save(Gpt<?> model, Place place, CollectiveSites sites, DataParallel dp, int done, long drawn) {
      Communicator exact = place.tp();
      if (place.replica() == 0) slots[exact.rank()] = model.stateToHost();
      if (exact.rank() == 0) siteSlots.set(place.replica(), sites == null ? Map.of() : sites.state());
      if (place.replica() == 0 && dp != null) dpSlots.set(exact.rank(), dp.sitesState()); // its DP group's
      place.world().barrier();
      if (place.reports()) {
        try {
          boolean dpOn = opt.dataParallel() > 1;
          Checkpoint.save(ck.save(), done, cfg, slots, compression, List.copyOf(siteSlots),
              dpOn ? opt.dpCompression() : null, dpOn ? List.copyOf(dpSlots) : List.of(), drawn, options);
          failure.set(null);
        } catch (java.io.IOException | RuntimeException e) {
          failure.set(e);
        }
        java.util.Arrays.fill(slots, null);
      }
      place.world().barrier();
      Throwable f = failure.get();
      if (f != null) {
        String why = f instanceof java.nio.file.FileSystemException fs ? (fs.getReason() != null ? fs.getReason()
            : f.getClass().getSimpleName().replace("Exception", "")) + " (" + fs.getFile() + ")"
            : f.getMessage() != null ? f.getMessage() : f.toString();
        throw new IllegalStateException("saving the checkpoint of step " + done + " into " + ck.save() + " failed: "
            + why, f);
      }
    }
  }

  /**
   * Whether any rank has seen a stop signal ({@link StopSignal}): an exact all-reduce over every rank, so all of them
   * stop after the same step.
   */
  private static boolean stopAgreed(Communicator world) {
    float[] f = {StopSignal.requested() != null ? 1 : 0};
    world.allReduce(f, 0, 1);
    return f[0] > 0;
  }

  /**
   * What a checkpoint records of the run's settings: the options, the calibration's where a codec of the run
   * calibrates, sequence parallelism, and the text it trains on ({@code data}); a resume with others is told which.
   */
  private static Map<String, Object> recordedOptions(GptConfig cfg, String compression, Options opt, Corpus corpus) {
    Map<String, Object> o = new LinkedHashMap<>(opt.asMap());
    if (CollectiveSites.calibrates(compression)
        || (opt.dataParallel() > 1 && CollectiveSites.calibrates(opt.dpCompression()))) {
      o.put("calibration_steps", opt.calibrationSteps());
      o.put("recalibrate_interval", opt.recalibrateInterval());
    }
    o.put("sequence_parallel", cfg.sequenceParallel());
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
