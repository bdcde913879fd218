package dev.taco.runtime.cli;

import dev.taco.codec.Codecs;
import dev.taco.collective.nccl.Nccl;
import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.runtime.AtomicFile;
import dev.taco.runtime.data.Corpus;
import dev.taco.runtime.model.CudaOps;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.train.Checkpoint;
import dev.taco.runtime.train.Report;
import dev.taco.runtime.train.RunFailed;
import dev.taco.runtime.train.RunResult;
import dev.taco.runtime.train.SiteDump;
import dev.taco.runtime.train.StepMetrics;
import dev.taco.runtime.train.StopSignal;
import dev.taco.runtime.train.Trainer;
import dev.taco.collective.CollectiveSites;
import dev.taco.collective.FidelityGate;
import dev.taco.collective.link.LinkProfile;
import dev.taco.collective.link.LinkProfiles;
import dev.taco.runtime.train.TrainingDiverged;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.channels.FileChannel;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The {@code taco} command line. {@code taco train} trains a byte-level GPT with Megatron-style tensor parallelism
 * on CPU threads-as-ranks, once per compression setting, from the same seed, and reports losses, bytes on the wire
 * and codec error side by side. Flags are named as in Megatron-LM. {@code taco analyze} measures every codec on
 * users' own {@code .npy} and {@code .safetensors} tensors ({@link AnalyzeCommand}).
 */
@Command(name = "taco", mixinStandardHelpOptions = true, version = TacoCli.VERSION,
    description = "TACO for Java: FP8 compression of tensor-parallel collectives (arXiv 2604.24088).",
    subcommands = {TacoCli.Train.class, AnalyzeCommand.class, TacoCli.TestCommand.class,
        TacoCli.BuildCommand.class, CommandLine.HelpCommand.class})
public final class TacoCli {
  /** What {@code -V} prints, for {@code taco} and every subcommand. */
  static final String VERSION = "taco 0.1.0";

  /**
   * A command the {@code ./taco} launcher script runs itself ({@code test}: {@code mvn verify}, what CI runs;
   * {@code build}: builds what is missing and prints the JDK's path): listed here for {@code taco --help}, so reaching
   * {@link #call} means the command line was started some other way; it says how to run the command and exits 2.
   */
  abstract static class LauncherCommand implements Callable<Integer> {
    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
      System.err.println("taco: '" + spec.name() + "' runs from the checkout's launcher script: ./taco " + spec.name());
      return 2;
    }
  }

  /** {@code ./taco test}: the test suite, run by the launcher ({@link LauncherCommand}). */
  @Command(name = "test", mixinStandardHelpOptions = true, version = VERSION,
      description = "Run the test suite: ./taco test (mvn verify in the checkout, what CI runs).")
  static final class TestCommand extends LauncherCommand {}

  /** {@code ./taco build}: the launcher's build step on its own, for scripts ({@link LauncherCommand}). */
  @Command(name = "build", mixinStandardHelpOptions = true, version = VERSION,
      description = "Build what is missing or out of date, then print the JDK's path on stdout: ./taco build (for"
          + " scripts; bench/jmh-env.sh uses it).")
  static final class BuildCommand extends LauncherCommand {}

  private static final Logger log = LoggerFactory.getLogger(TacoCli.class);

  /**
   * The defaults of {@code taco train}'s training options ({@code ${DEFAULT-VALUE}} in its help, and the value of one
   * not given), from the one place they are declared: {@link Trainer.Options#defaults()}.
   */
  static final class OptionDefaults implements CommandLine.IDefaultValueProvider {
    private static final Map<String, Object> DEFAULTS = Trainer.Options.defaults();

    @Override
    public String defaultValue(CommandLine.Model.ArgSpec arg) {
      if (arg instanceof CommandLine.Model.OptionSpec option) {
        for (String name : option.names()) {
          if (DEFAULTS.containsKey(name)) return String.valueOf(DEFAULTS.get(name));
        }
      }
      return null;
    }
  }

  /** {@code taco train}: the main job. */
  @Command(name = "train", mixinStandardHelpOptions = true, version = VERSION,
      defaultValueProvider = OptionDefaults.class,
      description = "Train a byte-level GPT with tensor parallelism on the CPU (or a GPU: --device); by default twice"
          + " from the same seed, uncompressed (bf16 on the wire) and with TACO, and compare.")
  static final class Train implements Callable<Integer> {
    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec; // which options the user gave (the default provider fills the others)

    @Option(names = {"--compression", "--compare", "--codec"}, paramLabel = "CODEC[,CODEC...]",
        description = "One run per codec, from the same seed, compared side by side: none (bf16 on the wire), taco,"
            + " int8-group, fp8-tensor, nccl-fp8 (NCCL's own FP8 all-reduce, one scale for the group; nccl-fp8:e5m2),"
            + " fp32 (exact), or any codec of `taco analyze`, with parameters after a colon"
            + " (taco:e5m2,g=128,hadamard=off); --codec as in analyze. Default: ${DEFAULT-VALUE}.")
    String compression = "none,taco";

    /** The training options as given, by name; the defaults are the builder's ({@link OptionDefaults}). */
    private final Trainer.Options.Builder options = Trainer.Options.builder();

    @Option(names = {"--tensor-model-parallel-size", "--tp"},
        description = "Tensor-parallel size R (ranks). Default: ${DEFAULT-VALUE}.")
    void tensorModelParallelSize(int v) {
      options.tensorModelParallelSize(v);
    }

    @Option(names = "--sequence-parallel", description = "Megatron's sequence parallelism: the LayerNorm, residual and"
        + " embedding regions hold 1/tp of the tokens, an all-gather before each column-parallel linear and a"
        + " reduce-scatter after each row-parallel one (the conjugates backward), each through the codec at its own"
        + " site. Needs --seq-length divisible by --tp.")
    void sequenceParallel(boolean v) {
      options.sequenceParallel(v);
    }

    @Option(names = "--data-parallel-size", description = "Data-parallel replicas of the TP group (ranks = tp x this,"
        + " TP ranks adjacent as in Megatron), each on its share of every global batch, gradients all-reduced over"
        + " the replicas. Default: ${DEFAULT-VALUE}.")
    void dataParallelSize(int v) {
      options.dataParallelSize(v);
    }

    @Option(names = "--global-batch-size", description = "Sequences per optimizer step over all replicas: a multiple"
        + " of --micro-batch-size x --data-parallel-size; the rest is gradient accumulation. Default: micro-batch x"
        + " data-parallel size.")
    void globalBatchSize(int v) {
      options.globalBatchSize(v);
    }

    @Option(names = "--dp-compression", paramLabel = "CODEC", description = "Codec of the data-parallel gradient"
        + " all-reduce (fp32: exact). Default: ${DEFAULT-VALUE}.")
    void dpCompression(String v) {
      options.dpCompression(v);
    }

    @Option(names = {"--steps", "--train-iters"}, description = "Optimizer steps per run. Default: ${DEFAULT-VALUE}.")
    void steps(int v) {
      options.steps(v);
    }

    @Option(names = "--data", paramLabel = "FILE", description = "UTF-8 text to train on, or a gzip file of it (.gz,"
        + " dictd's .dict.dz; read directly), e.g. GCIDE from bash bench/fetch-corpus.sh gcide; the last 10 %% of its"
        + " bytes is held out for validation. Default: the bundled Jargon File.")
    Path data;

    @Option(names = "--seed", description = "Seed for weights and batches. Default: ${DEFAULT-VALUE}.")
    void seed(long v) {
      options.seed(v);
    }

    @Option(names = "--num-layers", description = "Transformer blocks. Default: ${DEFAULT-VALUE}.")
    void numLayers(int v) {
      options.numLayers(v);
    }

    @Option(names = "--hidden-size", description = "Model width C. Default: ${DEFAULT-VALUE}.")
    void hiddenSize(int v) {
      options.hiddenSize(v);
    }

    @Option(names = "--num-attention-heads", description = "Attention heads. Default: ${DEFAULT-VALUE}.")
    void numAttentionHeads(int v) {
      options.numAttentionHeads(v);
    }

    @Option(names = "--seq-length", description = "Context length T in bytes. Default: ${DEFAULT-VALUE}.")
    void seqLength(int v) {
      options.seqLength(v);
    }

    @Option(names = "--micro-batch-size",
        description = "Sequences per micro-batch of each data-parallel replica (a step"
            + " takes --global-batch-size / (this x --data-parallel-size) of them). Default: ${DEFAULT-VALUE}.")
    void microBatchSize(int v) {
      options.microBatchSize(v);
    }

    @Option(names = "--lr",
        description = "Peak learning rate (AdamW; warmup then cosine decay). Default: ${DEFAULT-VALUE}.")
    void lr(float v) {
      options.lr(v);
    }

    @Option(names = "--min-lr", description = "Learning rate at the end of the cosine decay. Default: a tenth of --lr.")
    void minLr(float v) {
      options.minLr(v);
    }

    @Option(names = "--lr-warmup-iters", description = "Steps of linear learning-rate warmup (capped at --steps)."
        + " Default: ${DEFAULT-VALUE}.")
    void lrWarmupIters(int v) {
      options.lrWarmupIters(v);
    }

    @Option(names = "--weight-decay", description = "AdamW weight decay on the weight matrices (not on biases,"
        + " LayerNorms). Default: ${DEFAULT-VALUE}.")
    void weightDecay(float v) {
      options.weightDecay(v);
    }

    @Option(names = "--clip-grad", description = "Global gradient-norm clipping threshold; 0 turns clipping off."
        + " Default: ${DEFAULT-VALUE}.")
    void clipGrad(float v) {
      options.clipGrad(v);
    }

    @Option(names = "--log-interval", description = "Steps between rows of the printed loss table (evaluation steps"
        + " are always printed; metrics.jsonl has every step). Default: ${DEFAULT-VALUE}.")
    void logInterval(int v) {
      options.logInterval(v);
    }

    @Option(names = "--eval-interval", description = "Steps between validation evaluations. Default: ${DEFAULT-VALUE}.")
    void evalInterval(int v) {
      options.evalInterval(v);
    }

    @Option(names = "--eval-iters", description = "Validation micro-batches per evaluation. Default: ${DEFAULT-VALUE}.")
    void evalIters(int v) {
      options.evalIters(v);
    }

    @Option(names = "--calibration-steps",
        description = "Tensors per collective site that calibrate its plan (group size,"
            + " Hadamard on/off, channel permutation); 0 = the codec's defaults. Default: ${DEFAULT-VALUE}.")
    void calibrationSteps(int v) {
      options.calibrationSteps(v);
    }

    @Option(names = "--recalibrate-interval",
        description = "Re-calibrate a site every N uses (0 = once). Default: ${DEFAULT-VALUE}.")
    void recalibrateInterval(int v) {
      options.recalibrateInterval(v);
    }

    @Option(names = "--codec-error-interval", description = "Rank 0 measures the codec's error on the TP tensors of"
        + " steps 0, N, 2N, ... (the report's codec table); 0 = never. Each measurement encodes and decodes every"
        + " site's tensor on the CPU, which slows a long GPU run. Default: ${DEFAULT-VALUE}.")
    void codecErrorInterval(int v) {
      options.codecErrorInterval(v);
    }

    @Option(names = "--dump-sites", paramLabel = "DIR", description = "Write the tensors the last training step hands"
        + " its TP collectives (each site's partial sum or shard, at most " + SiteDump.MAX_ROWS + " token rows) into"
        + " DIR/<codec>-rank<q>.safetensors, one per TP rank, for `taco analyze` or bench's CodecTable.")
    void dumpSites(String dir) {
      options.dumpSites(dir);
    }

    @Option(names = "--distributed-timeout-minutes", description = "How long a rank waits in one collective for the"
        + " others before the run fails with the reason. Default: ${DEFAULT-VALUE}.")
    void distributedTimeoutMinutes(int v) {
      options.distributedTimeoutMinutes(v);
    }

    @Option(names = "--device", paramLabel = "cpu|cuda|auto", description = "Where the ranks run: cpu (threads), cuda"
        + " (GPU 0, or a GPU per rank: --tp-transport; with --tp > 1 only the codecs with GPU kernels: fp32, none,"
        + " int8-group, fp8-tensor, mxfp4, nvfp4, nccl-fp8 and the dual-scale taco codecs), auto (cuda if a GPU is usable,"
        + " else cpu)."
        + " Default: ${DEFAULT-VALUE}.")
    String device = "cpu";

    @Option(names = "--precision", paramLabel = "fp32|bf16", description = "On a GPU, what the matrix products multiply"
        + " in: bf16 (inputs rounded to bf16 on tensor cores, fp32 accumulation, as PyTorch's bf16 autocast; the"
        + " default) or fp32 (exact; for testing). Weights, gradients, optimizer state and the residual stream are fp32"
        + " either way; bf16 stores the activations that only matrix products read in bf16, as autocast does. The"
        + " CPU trains in fp32 (with --device auto and no GPU, GPU-only options are ignored with"
        + " a warning).")
    String precision;

    @Option(names = "--tp-transport", paramLabel = "auto|device-local|nccl|emulated", description = "On GPUs, how the"
        + " TP ranks talk: nccl (a GPU per rank, GPUs 0..tp-1, NCCL), device-local (every rank on GPU 0, device copies;"
        + " for tests, no real link), emulated (rank 0 of the TP group alone on GPU 0, every exchange held for the"
        + " --link model's time: the step time of a rank on that link; the losses mean nothing), auto (nccl when there"
        + " are tp GPUs and NCCL loads, else device-local). Default: ${DEFAULT-VALUE}.")
    String tpTransport = "auto";

    @Option(names = "--link", paramLabel = "PROFILE", description = "The link model: what an emulated rank's exchanges"
        + " take, and what --compression auto prices the wire at: h200-nvlink-2, h200-nopeer-2, h100-nvlink-8,"
        + " pcie5-8, ib-ndr, inf, or GBPS[,LATENCY_US] (bus bandwidth in GB/s); docs/links.md gives their sources.")
    String link;

    @Option(names = "--link-table", paramLabel = "FILE", description = "The link model from nccl-tests'"
        + " all_reduce_perf output on your GPUs, instead of --link.")
    Path linkTable;

    /** Read by {@link FidelityGate#parse} in {@link #call}, so that a bad gate is one line naming the option. */
    @Option(names = "--auto-max-error", paramLabel = "A|activations=A,gradients=B", description = "--compression"
        + " auto's fidelity gate: the largest mean relative L2 error a site's plan may have on the site's calibration"
        + " tensors, one bound A for every site, or one for the forward activations and one for the backward gradients"
        + " (a key left out: " + FidelityGate.DEFAULT + "), each in (0, 1]. Default: ${DEFAULT-VALUE}.")
    String autoMaxError;

    @Option(names = "--no-tp-comm", description = "On a GPU, replace the TP all-reduces by no-ops: the step time"
        + " without communication, for the ceiling of what compression can gain. The losses are then WRONG (each rank"
        + " keeps its partial sums), and the report says so. Needs --tp > 1.")
    boolean noTpComm;

    @Option(names = "--save", paramLabel = "DIR", description = "Save checkpoints into DIR (Megatron's layout:"
        + " DIR/iter_0000010/, DIR/latest_checkpointed_iteration.txt; with several --compression codecs, DIR/<codec>/"
        + " each): every --save-interval steps, at --exit-interval and at the end. The two newest are kept.")
    Path save;

    @Option(names = "--save-interval", description = "Steps between checkpoints (0: only at the exit and the end)."
        + " Default: ${DEFAULT-VALUE}.")
    int saveInterval = 0;

    @Option(names = "--load", paramLabel = "DIR", description = "Resume from the newest checkpoint in DIR (weights,"
        + " optimizer state, data position, codec plans); a checkpoint of another TP size is resharded. A DIR without"
        + " checkpoints starts from scratch with a warning.")
    Path load;

    @Option(names = "--exit-interval", description = "Stop after this step, saving first when --save is given (0:"
        + " run all --steps). Default: ${DEFAULT-VALUE}.")
    int exitInterval = 0;

    @Option(names = "--exit-duration-in-mins", paramLabel = "MINUTES", description = "Stop in time to end within"
        + " this many minutes of the command's start (fractions allowed): after the step past which one more step, as"
        + " long as the longest but the first, would end later, saving first when --save is given; the codecs after it"
        + " do not run, and the same command with --load goes on (exit status 0). 0: no limit. Default:"
        + " ${DEFAULT-VALUE}.")
    double exitDurationInMins = 0;

    @Option(names = "--overwrite", description = "Write into an --out folder that already holds a report.json"
        + " (refused otherwise, but for a run resumed with --load, which writes its report there and appends to its"
        + " metrics.jsonl).")
    boolean overwrite;

    @Option(names = "--out", paramLabel = "DIR",
        description = "Output folder for report.json, loss.png and (with several codecs) loss-diff.png. Default:"
            + " runs/<timestamp>.")
    Path out;

    /** {@link #link} or {@link #linkTable} read, or null. */
    private LinkProfile linkModel;

    @Override
    public Integer call() throws Exception {
      long started = System.nanoTime(); // --exit-duration-in-mins counts from here
      Trainer.Options opt = options.autoMaxError(FidelityGate.parse(autoMaxError)).build();
      Trainer.Checkpointing asked = new Trainer.Checkpointing(save, saveInterval, load, exitInterval,
          exitDurationInMins, started);
      GptConfig cfg = opt.model();
      int tp = cfg.tp(), dataParallel = opt.dataParallelSize(), microBatch = opt.microBatchSize();
      List<String> codecs = codecList(compression);
      checkGpuOptionValues(precision, tpTransport); // a typo is named before any device problem
      if (link != null && linkTable != null)
        throw new IllegalArgumentException("give --link or --link-table, not both");
      if ((link != null || linkTable != null) && !codecs.contains(CollectiveSites.AUTO)
          && !tpTransport.equals("emulated")) {
        log.warn("--link / --link-table have no effect here: they price --compression auto's choices and time"
            + " --tp-transport emulated's exchanges");
      }
      if (spec.commandLine().getParseResult().hasMatchedOption("--auto-max-error")
          && !codecs.contains(CollectiveSites.AUTO)) {
        log.warn("--auto-max-error has no effect here: it gates --compression auto's choices");
      }
      linkModel = link != null ? LinkProfiles.byName(link) : linkTable != null ? LinkProfiles.fromNcclTests(linkTable)
          : null;
      try (CudaContext gpu = openDevice(device)) {
        Trainer.Gpu run = gpuOptions(gpu, device, precision, noTpComm, tpTransport, tp, dataParallel);
        if (run != null && run.emulated()) Trainer.requireEmulatable(tp, dataParallel, linkModel);
        if (gpu == null) {
          requireMemory(cfg, microBatch, dataParallel);
        } else {
          requireDeviceMemory(cfg, microBatch, gpu, run.precision(), run.emulated() ? 1 : tp);
          if (tp > 1 || run.nccl()) codecs.forEach(Trainer::gpuPlan); // a codec without GPU kernels fails up front
        }
        Corpus corpus = data == null ? Corpus.bundled(0.1) : Corpus.fromFile(data, 0.1);
        corpus.requireWindow(cfg.seqLength());
        long valBatches = Math.max(1, corpus.valBytes() / ((long) microBatch * cfg.seqLength()));
        int evalIters = opt.evalIters();
        if (evalIters > 10 * valBatches) { // an evaluation cannot be stopped midway: say how long it is up front
          log.warn("--eval-iters {}: every evaluation runs {} forward passes, {} times over the validation set ({}"
              + " micro-batches of its bytes), and a stop signal waits for it to end", evalIters, evalIters,
              evalIters / valBatches, valBatches);
        }
        int cores = Runtime.getRuntime().availableProcessors();
        if (gpu == null && (long) tp * dataParallel > 2L * cores) {
          log.warn("{} ranks (--tp {} x --data-parallel-size {}) on {} cores: the ranks take turns on the cores, and a"
              + " step is that much slower", tp * dataParallel, tp, dataParallel, cores);
        }
        if (save != null && save.toString().isBlank()) throw new IllegalArgumentException("--save is empty");
        if (load != null && load.toString().isBlank()) throw new IllegalArgumentException("--load is empty");
        if (save != null && Files.exists(save) && !Files.isDirectory(save)) {
          throw new IllegalArgumentException("--save " + save.toAbsolutePath() + " exists and is not a folder");
        }
        if (opt.sequenceParallel() && tp == 1)
          log.info("--sequence-parallel has no effect at --tp 1 (one rank holds every token)");
        if (dataParallel == 1 && !opt.dpCompression().equals("fp32"))
          log.warn("--dp-compression {} has no effect at --data-parallel-size 1 (no gradient all-reduce)",
              opt.dpCompression());
        if (exitDurationInMins > 0 && save == null)
          log.warn("--exit-duration-in-mins without --save: a run stopped in time leaves no checkpoint to go on from");
        if (exitInterval > 0 && exitInterval >= opt.steps())
          log.warn("--exit-interval {} is not before --steps {}: the run ends at --steps", exitInterval, opt.steps());
        List<String> toRun = unfinished(codecs, cfg, opt.steps()); // a --load that cannot serve is named here
        if (toRun.isEmpty()) { // a job resubmitted after it finished: nothing written, nothing locked
          System.err.println("taco: nothing to do: --load " + load + " holds the checkpoint of step " + opt.steps()
              + " (--steps) of " + (codecs.size() == 1 ? "the run" : "every codec's run (" + String.join(", ", codecs)
                  + ")")
              + "; raise --steps to train further");
          return 0;
        }
        Path given = out;
        boolean fresh = out == null || !Files.exists(out), freshRuns = out == null && !Files.exists(Path.of("runs"));
        boolean freshSave = save != null && !Files.exists(save);
        Path dump = opt.dumpSites() == null ? null : Path.of(opt.dumpSites());
        boolean freshDump = dump != null && !Files.exists(dump);
        FileChannel saveLock = null, outLock = null;
        try {
          if (save != null) { // found now, not at the first save after minutes of training
            makeWritableFolder("--save", save);
            List<Path> nested = new ArrayList<>(); // a run saving into a folder above or below this one's
            if (save.toAbsolutePath().getParent() != null) nested.add(save.toAbsolutePath().getParent());
            for (String c : codecs) nested.add(perCodec(save, codecs, c));
            saveLock = lockFolder("--save", save, SAVE_LOCK, nested);
            if (load == null) warnIfSavedBefore(save, codecs);
            // each codec's run saves its own: the weights and AdamW's two moments in float32, headers and meta.json
            requireSpace(save, toRun.size() * (12 * cfg.parameterCount() * 11 / 10 + (64 << 10)));
          }
          // found now, not when the last training step writes it, which would lose the run's report
          if (dump != null) makeWritableFolder("--dump-sites", dump);
          out = outputFolder(out);
          if (given != null) { // a runs/<timestamp> folder is this run's alone
            outLock = lockFolder("--out", out, OUT_LOCK, List.of());
            // a resumed job writes where its earlier calls wrote: the same command serves every call, as a requeue
            if (!overwrite && load == null && Files.exists(out.resolve("report.json"))) {
              throw new IllegalArgumentException("--out " + out.toAbsolutePath() + " already holds a report.json:"
                  + " choose another folder, --overwrite to replace it, or --load to resume into it");
            }
          }
        } catch (IOException | RuntimeException e) {
          unlockFolder(out, OUT_LOCK, outLock, fresh);
          if (fresh && given != null) deleteIfEmpty(out);
          unlockFolder(save, SAVE_LOCK, saveLock, freshSave);
          if (freshSave) deleteIfEmpty(save);
          if (freshDump) deleteIfEmpty(dump);
          throw e;
        }
        try {
          return train(opt, gpu, run, corpus, asked, codecs, toRun);
        } catch (Exception | OutOfMemoryError e) { // the heap too can run out before anything is written
          unlockFolder(out, OUT_LOCK, outLock, fresh);
          if (fresh) deleteIfEmpty(out); // a run that failed before writing anything leaves no empty folder behind
          if (freshRuns) deleteIfEmpty(Path.of("runs")); // nor the runs/ folder it made for the default --out
          unlockFolder(save, SAVE_LOCK, saveLock, freshSave);
          if (freshSave) deleteIfEmpty(save); // nor the --save folder
          if (freshDump) deleteIfEmpty(dump); // nor the --dump-sites folder
          throw e;
        } finally {
          unlockFolder(out, OUT_LOCK, outLock, false);
          unlockFolder(save, SAVE_LOCK, saveLock, false);
        }
      }
    }

    /**
     * The codecs whose run is still to do: all but those whose --load checkpoint is at --steps, runs that finished (a
     * job resubmitted after a signal stopped it in a later codec's run resumes that one, as Megatron's requeue
     * expects), each named in the log. A finished checkpoint's description is checked first, so that one of another
     * model or codec is refused as a resume would refuse it, not taken for this run's.
     */
    private List<String> unfinished(List<String> codecs, GptConfig cfg, int steps) {
      List<String> left = new ArrayList<>();
      for (String c : codecs) {
        Path dir = loadFolder(codecs, c, false);
        if (dir != null && Checkpoint.latestStep(dir) == steps && Checkpoint.checkedStep(dir, cfg, c) == steps) {
          log.info("run '{}' has finished: {} holds its checkpoint of step {} (--steps); skipped", c, dir, steps);
        } else {
          left.add(c);
        }
      }
      return left;
    }

    /**
     * Warns when a --save folder that this run, starting from scratch, writes into already holds an earlier run's
     * checkpoints (a latest-file or {@code iter_*} folders of a codec's run).
     */
    private static void warnIfSavedBefore(Path save, List<String> codecs) throws IOException {
      for (String c : codecs) {
        Path dir = perCodec(save, codecs, c);
        if (!Files.isDirectory(dir)) continue;
        List<Integer> steps = Checkpoint.savedSteps(dir);
        Path latest = dir.resolve(Checkpoint.LATEST);
        Path earlier = !steps.isEmpty() ? dir.resolve(Checkpoint.folderName(steps.getFirst()))
            : Files.exists(latest) ? latest : null;
        if (earlier != null) {
          log.warn("--save {} already holds checkpoints of an earlier run ({}); this run, which starts from"
              + " scratch (no --load), writes over them", save, earlier);
          return;
        }
      }
    }

    /** The file in a --save folder whose lock a run holds while it may save there ({@link #lockFolder}). */
    static final String SAVE_LOCK = ".taco-save.lock";
    /** The file in an --out folder whose lock a run holds while it may write its report there. */
    static final String OUT_LOCK = ".taco-out.lock";

    /**
     * Takes the folder {@code dir} of option {@code flag} for this run: an exclusive lock on the file {@code lock} in
     * it, held while the returned channel is open, so that two runs (processes, or runs in one JVM) cannot write their
     * checkpoints or reports over each other's; and refuses when a run holds the lock of a folder in {@code nested}
     * (for --save: the folder above, where a run's {@code <codec>/} may be this folder, and this run's own
     * {@code <codec>/} folders, another run's --save).
     *
     * @throws IllegalArgumentException if another run holds one of them, naming the folder
     * @throws IOException if the lock file cannot be made
     */
    static FileChannel lockFolder(String flag, Path dir, String lock, List<Path> nested) throws IOException {
      var ch = FileChannel.open(dir.resolve(lock), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
      Path busy = tryLock(ch, false) ? null : dir;
      for (Path other : nested) {
        if (busy != null || other.equals(dir) || !Files.exists(other.resolve(lock))) continue;
        try (var probe = FileChannel.open(other.resolve(lock))) {
          if (!tryLock(probe, true)) busy = other; // free: the probe's shared lock goes with its channel
        } catch (IOException e) { // removed just now, or unreadable: no run of ours can hold it then
          log.debug("cannot probe {}", other.resolve(lock), e);
        }
      }
      if (busy == null) return ch;
      ch.close();
      throw new IllegalArgumentException(flag + " " + dir.toAbsolutePath() + " is in use by another run (it holds the"
          + " lock on " + busy.toAbsolutePath().resolve(lock) + "): give each run its own " + flag + " folder");
    }

    /** Whether the lock of {@code ch}'s file was free and is now held (exclusive, or {@code shared}) through it. */
    private static boolean tryLock(FileChannel ch, boolean shared) throws IOException {
      try {
        return ch.tryLock(0, Long.MAX_VALUE, shared) != null;
      } catch (OverlappingFileLockException e) {
        return false; // a run in this JVM holds it
      }
    }

    /**
     * Releases the lock of {@link #lockFolder} (no-op for null or released). The lock file stays (deleting it would let
     * a run that opened it just before lock a file that no longer has a name), unless {@code remove}: a folder this run
     * made is removed again when the run fails before writing anything.
     */
    private static void unlockFolder(Path dir, String name, FileChannel lock, boolean remove) {
      if (lock == null || !lock.isOpen()) return;
      try (lock) {
        if (remove) Files.deleteIfExists(dir.resolve(name));
      } catch (IOException e) {
        log.debug("could not remove {}", dir.resolve(name), e);
      }
    }

    /**
     * The runs of the codecs {@code toRun} (those of {@code codecs} that have not finished) and their report into
     * {@link #out}, each step's metrics into its {@code metrics.jsonl}; the exit status.
     */
    private int train(Trainer.Options opt, CudaContext gpu, Trainer.Gpu run, Corpus corpus, Trainer.Checkpointing asked,
        List<String> codecs, List<String> toRun) throws IOException {
      GptConfig cfg = opt.model();
      int tp = cfg.tp();
      log.info("data: {} ({} train bytes, {} validation bytes)", corpus.name(), corpus.trainBytes(), corpus.valBytes());
      log.info("model: {} layers, hidden {}, {} heads, seq {}, micro-batch {}, {} parameters; TP={} on {}",
          cfg.numLayers(), cfg.hiddenSize(), cfg.numHeads(), cfg.seqLength(), opt.microBatchSize(),
          cfg.parameterCount(), tp, gpu == null
              ? Runtime.getRuntime().availableProcessors() + " cores"
              : run.nccl() ? "GPUs 0.." + (tp - 1) + " through NCCL"
                  : gpu.name() + (tp > 1 ? " (device-local: the ranks share one GPU, no real link)" : ""));
      List<RunResult> runs = new ArrayList<>();
      if (run != null && !run.tpComm()) { // (without a GPU, --device auto has ignored it)
        log.warn("--no-tp-comm: the TP all-reduces are skipped; the losses of this run are wrong");
      }
      if (gpu != null && tp > 1 && opt.codecErrorInterval() > 0) {
        log.info("codec-error samples every {} steps encode and decode every site's tensor on the CPU, which sets the"
            + " pace of a long GPU run; --codec-error-interval 0 turns them off", opt.codecErrorInterval());
      }
      StopSignal.install();
      Path metricsFile = out.resolve(METRICS);
      log.info("metrics of every step: {}", metricsFile);
      try (StepMetrics metrics = new StepMetrics(metricsFile, load != null && !overwrite)) { // a resume goes on
        for (String c : toRun) {
          try {
            runs.add(Trainer.run(corpus, c, opt, run, linkModel, asked.withFolders(perCodec(save, codecs, c),
                loadFolder(codecs, c, true)), metrics));
          } catch (RuntimeException | OutOfMemoryError e) {
            // a run that diverged or could not save its checkpoint: its steps up to there go into the report too
            RunFailed failed = e instanceof RunFailed f && f.partial() != null ? f : null;
            if (failed != null) runs.add(failed.partial());
            if (runs.isEmpty()) throw e;
            // the runs that finished before this one are not lost: their report, then this run's error
            try {
              report(runs, corpus, run, opt);
              String before = runs.size() == 1 ? "" : " and the " + (runs.size() - 1) + " run(s) before it";
              if (failed instanceof TrainingDiverged) {
                log.warn("run '{}' diverged; the report holds its steps before that{}", c, before);
              } else if (failed != null) {
                log.warn("run '{}' stopped after step {}; the report holds its steps up to there{}", c,
                    failed.partial().first_step() + failed.partial().steps(), before);
              } else {
                log.warn("run '{}' failed; the report holds the {} run(s) before it", c, runs.size());
              }
            } catch (IOException | RuntimeException r) {
              e.addSuppressed(r);
            }
            throw e;
          }
          if (StopSignal.requested() != null || outOfTime(runs.getLast())) break; // the later codecs do not run
        }
      }
      report(runs, corpus, run, opt);
      if (StopSignal.requested() == null && outOfTime(runs.getLast())) {
        RunResult last = runs.getLast();
        System.err.println("taco: stopped after step " + (last.first_step() + last.steps()) + " of "
            + last.compression() + "'s run to end within --exit-duration-in-mins "
            + java.math.BigDecimal.valueOf(exitDurationInMins).stripTrailingZeros().toPlainString() + (save != null
                ? "; its checkpoint is in " + perCodec(save, codecs, last.compression()) + ": the same command with"
                    + " --load " + save + " goes on"
                : " (no --save: nothing to go on from)"));
      }
      if (StopSignal.requested() != null) {
        System.err.println("taco: stopped by " + StopSignal.requested() + " after step " + (runs.getLast()
            .first_step() + runs.getLast().steps()) + " of " + runs.getLast().compression() + "'s run; the report is"
            + " partial" + (save != null ? ", the checkpoint is in " + perCodec(save, codecs, runs.getLast()
                .compression()) : ""));
        return StopSignal.exitCode();
      }
      return 0;
    }

    /** Whether {@code run} stopped at --exit-duration-in-mins. */
    private static boolean outOfTime(RunResult run) {
      return "exit-duration".equals(run.stopped());
    }

    /** The per-step metrics file in the output folder ({@link StepMetrics}). */
    static final String METRICS = "metrics.jsonl";

    private static void deleteIfEmpty(Path folder) {
      try (var entries = Files.list(folder)) {
        if (entries.findAny().isEmpty()) Files.delete(folder);
      } catch (IOException e) {
        log.debug("could not remove the empty output folder {}", folder, e);
      }
    }

    /**
     * The folder codec {@code c}'s run resumes from: --load itself with one codec, else its {@code <codec>/} child;
     * a codec's child that is missing (a run stopped before it started) starts that codec fresh with a warning, as an
     * empty --load folder does, and so does a --load that does not exist yet but is the --save folder (a job that
     * resumes itself); one codec's run finds its child of a several-codec --load folder too.
     *
     * @throws IllegalArgumentException for a --load that is a file, one checkpoint's own folder, or a one-codec
     *     checkpoint given to a several-codec run
     */
    private Path loadFolder(List<String> codecs, String c, boolean say) {
      if (load == null) return null;
      if (!Files.exists(load)) {
        // a job that resumes itself (--save and --load the same folder, as Megatron's requeue runs it), first run:
        // --save makes the folder before training, and its run starts from scratch with the warning of an empty one
        if (save != null && load.toAbsolutePath().normalize().equals(save.toAbsolutePath().normalize())) return null;
        throw new IllegalArgumentException("--load " + load + ": no such folder");
      }
      if (Files.exists(load) && !Files.isDirectory(load)) {
        throw new IllegalArgumentException("--load " + load + " is not a folder (give the --save folder)");
      }
      if (Files.exists(load.resolve("meta.json"))) {
        throw new IllegalArgumentException("--load " + load + " is one checkpoint's folder: give the folder above it"
            + " (the --save folder, which holds " + Checkpoint.LATEST + ")");
      }
      Path child = load.resolve(Checkpoint.codecName(c));
      boolean single = Files.exists(load.resolve(Checkpoint.LATEST));
      if (codecs.size() == 1) {
        if (!single && Files.exists(child.resolve(Checkpoint.LATEST))) {
          if (say) log.info("--load {}: resuming {} from {}", load, c, child);
          return child;
        }
        List<String> others = new ArrayList<>();
        try (var sub = Files.list(load)) {
          sub.filter(d -> Files.exists(d.resolve(Checkpoint.LATEST)))
              .forEach(d -> others.add(d.getFileName().toString()));
        } catch (IOException e) {
          throw new IllegalArgumentException("--load " + load + " cannot be read: " + reason(e));
        }
        if (!single && !others.isEmpty()) { // a several-codec folder without this codec's run
          if (say)
            log.warn("--load {} holds checkpoints of other codecs' runs ({}), not of {}: starting {} from scratch",
                load,
                String.join(", ", others.stream().sorted().toList()), c, c);
          return null;
        }
        return load;
      }
      if (single) {
        throw new IllegalArgumentException("--load " + load + " holds one run's checkpoint; with several --compression"
            + " codecs each resumes from --load DIR/<codec>/ (run one codec, or --save into a folder per codec)");
      }
      if (Files.isDirectory(load) && !Files.isDirectory(child)) {
        if (say) log.warn("--load {}: no checkpoint of {} ({} is missing), starting it from scratch", load, c, child);
        return null;
      }
      return child;
    }

    private void report(List<RunResult> runs, Corpus corpus, Trainer.Gpu run, Trainer.Options opt) throws IOException {
      CudaContext gpu = run == null ? null : run.context();
      PrintWriter w = new PrintWriter(System.out, true);
      printTable(w, runs, opt.logInterval());
      Map<String, Object> config = new LinkedHashMap<>(opt.asMap());
      config.put("device", gpu == null ? "cpu" : "cuda");
      if (gpu != null) {
        config.put("gpu", gpu.name());
        config.put("gpu_memory_gib", gpu.totalMemoryBytes() / (double) (1L << 30));
        config.put("precision", run.precision() == CudaOps.Precision.BF16 ? "bf16 GEMM inputs, fp32 accumulation and"
            + " storage" : "fp32");
        config.put("tp_comm", run.tpComm());
        config.put("tp_transport", run.emulated() ? "emulated" : run.nccl() ? "nccl"
            : opt.tensorModelParallelSize() > 1 ? "device-local" : "none");
        if (!run.tpComm()) config.put("warning", "--no-tp-comm: TP all-reduces skipped, losses are wrong");
        if (run.emulated()) {
          config.put("warning", runs.get(0).link() + ": rank 0 of TP=" + opt.tensorModelParallelSize() + " alone on one"
              + " GPU, the peers' payloads its own; its step time is a rank's on that link, its losses mean nothing");
        }
      }
      config.put("parameters", opt.model().parameterCount());
      Path json = Report.writeJson(out, config, corpus.name(), runs);
      if (!Report.canPlot()) { // e.g. the GPU machine's jlink'd runtime
        w.printf("%nwrote %s (no loss.png: this Java runtime has no java.desktop module)%n", json);
        return;
      }
      Path png = Report.writeLossPlot(out, runs);
      Path diff = Report.writeLossDifferencePlot(out, runs);
      if (diff == null) Files.deleteIfExists(out.resolve("loss-diff.png")); // left by an earlier run (--overwrite)
      w.printf("%nwrote %s, %s%s%n", json, png, diff == null ? "" : " and " + diff);
    }
  }

  /**
   * The GPU run's options, or null on the CPU.
   *
   * @throws IllegalArgumentException for a precision other than fp32/bf16, or a GPU-only option on the CPU
   */
  static void checkGpuOptionValues(String precision, String transport) {
    if (precision != null && !precision.equals("fp32") && !precision.equals("bf16")) {
      throw new IllegalArgumentException("--precision must be fp32 or bf16, got '" + precision + "'");
    }
    if (!List.of("auto", "device-local", "nccl", "emulated").contains(transport)) {
      throw new IllegalArgumentException("--tp-transport must be auto, device-local, nccl or emulated, got '"
          + transport + "'");
    }
  }

  /**
   * The GPU run's options, or null on the CPU. GPU-only options (bf16, an explicit transport, {@code --no-tp-comm})
   * are refused with {@code --device cpu}, and ignored with a warning when {@code --device auto} found no GPU, so that
   * one command line runs on either machine.
   *
   * @throws IllegalArgumentException for a GPU-only option on the CPU, NCCL with fewer GPUs than ranks, or
   *     {@code --no-tp-comm} at TP = 1 (nothing to skip)
   */
  static Trainer.Gpu gpuOptions(CudaContext gpu, String device, String precision, boolean noTpComm, String transport,
      int tp, int dataParallel) {
    checkGpuOptionValues(precision, transport);
    if (gpu == null) {
      List<String> gpuOnly = new ArrayList<>();
      if ("bf16".equals(precision)) gpuOnly.add("--precision bf16");
      if (noTpComm) gpuOnly.add("--no-tp-comm");
      if (!transport.equals("auto")) gpuOnly.add("--tp-transport " + transport);
      if (gpuOnly.isEmpty()) return null;
      if (device.equals("auto")) {
        log.warn("{} ignored: no GPU, and the CPU trains in fp32 with its own collectives", String.join(", ", gpuOnly));
        return null;
      }
      throw new IllegalArgumentException(gpuOnly.get(0) + " needs a GPU (--device cuda, or auto on a machine with"
          + " one): the CPU trains in fp32 with its own collectives");
    }
    if (noTpComm && tp == 1) {
      throw new IllegalArgumentException("--no-tp-comm with --tp 1: there are no TP collectives to skip");
    }
    if (transport.equals("emulated")) {
      return new Trainer.Gpu(gpu, "fp32".equals(precision) ? CudaOps.Precision.FP32 : CudaOps.Precision.BF16,
          !noTpComm, Trainer.Transport.EMULATED);
    }
    int gpus = Cuda.deviceCount(), ranks = tp * dataParallel;
    boolean nccl = switch (transport) {
      case "nccl" -> {
        if (!Nccl.available()) throw new IllegalArgumentException("--tp-transport nccl: " + Nccl.unavailableReason());
        if (gpus < ranks) {
          throw new IllegalArgumentException("--tp-transport nccl needs a GPU per rank: " + ranks + " ranks (--tp x"
              + " --data-parallel-size) but this machine has " + gpus + " GPU" + (gpus == 1 ? "" : "s")
              + " (--tp-transport device-local shares one)");
        }
        yield true;
      }
      case "auto" -> ranks > 1 && gpus >= ranks && Nccl.available();
      default -> false;
    };
    return new Trainer.Gpu(gpu, "fp32".equals(precision) ? CudaOps.Precision.FP32 : CudaOps.Precision.BF16, !noTpComm,
        nccl ? Trainer.Transport.NCCL : Trainer.Transport.DEVICE_LOCAL);
  }

  /**
   * The GPU a {@code --device} value asks for, opened, or null for the CPU.
   *
   * @throws IllegalArgumentException for an unknown value, or {@code cuda} without a CUDA driver or a GPU
   */
  static CudaContext openDevice(String device) {
    switch (device) {
      case "cpu" :
        return null;
      case "cuda" :
        if (!Cuda.available()) {
          throw new IllegalArgumentException(
              "--device cuda: no NVIDIA driver on this machine (" + Cuda.unavailableReason()
                  + "); --device cpu or auto trains on the CPU");
        }
        if (Cuda.deviceCount() == 0) throw new IllegalArgumentException("--device cuda: the CUDA driver sees no GPU");
        if (!Cublas.available()) throw new IllegalArgumentException("--device cuda: " + Cublas.unavailableReason());
        return CudaContext.open(0);
      case "auto" :
        if (Cuda.available() && Cuda.deviceCount() > 0 && Cublas.available()) return CudaContext.open(0);
        log.info("--device auto: no usable GPU ({}); training on the CPU", Cuda.available()
            ? Cublas.unavailableReason() : Cuda.unavailableReason());
        return null;
      default :
        throw new IllegalArgumentException("--device must be cpu, cuda or auto, got '" + device + "'");
    }
  }

  /**
   * Refuses a model that cannot fit the GPU's memory, before allocating it ({@link Gpt#estimateBytes}, fp32, with the
   * attention state of flash attention where the backend uses it, plus in bf16 mode the backend's bf16 copies of the
   * forward's GEMM inputs, {@link CudaOps#forwardCopyBytes}).
   */
  static void requireDeviceMemory(GptConfig cfg, int microBatch, CudaContext gpu, CudaOps.Precision precision,
      int ranksHere) {
    boolean flash = CudaOps.flashAttention(precision, cfg.headSize(), gpu.computeCapabilityMajor());
    double state = (double) microBatch * cfg.localHeads() * cfg.seqLength() * (flash ? 1 : cfg.seqLength());
    double need = (Gpt.estimateBytes(cfg, microBatch, state)
        + (precision == CudaOps.Precision.BF16 ? CudaOps.forwardCopyBytes(cfg, microBatch) : 0)) * ranksHere / cfg.tp();
    if (need > 0.9 * gpu.totalMemoryBytes()) {
      throw new IllegalArgumentException(String.format(Locale.ROOT, "this model and micro-batch need about %.1f GiB of"
          + " GPU memory but %s has %.1f GiB: lower --micro-batch-size, --seq-length, --hidden-size or --num-layers",
          need / (1L << 30), gpu.name(), gpu.totalMemoryBytes() / (double) (1L << 30)));
    }
  }

  /**
   * {@code dir} for a run of one codec, else {@code dir/<codec>} (the codec spec with every character other than
   * letters, digits, {@code . _ = -} replaced by {@code _}: {@code taco:e5m2,g=128} is {@code taco_e5m2_g=128}); a run of
   * one codec into a folder laid out per codec (a {@code <codec>/} in it holds checkpoints, the folder itself none)
   * keeps to that layout, as its {@code --load} does, also for a codec with no folder there yet.
   */
  static Path perCodec(Path dir, List<String> codecs, String codec) {
    if (dir == null) return null;
    Path child = dir.resolve(Checkpoint.codecName(codec));
    if (codecs.size() > 1) return child;
    String latest = Checkpoint.LATEST;
    if (Files.exists(dir.resolve(latest))) return dir;
    try (var sub = Files.list(dir)) { // laid out per codec: some <codec>/ holds checkpoints
      return sub.anyMatch(d -> Files.exists(d.resolve(latest))) ? child : dir;
    } catch (IOException e) { // not there yet, or unreadable (refused where it is made)
      return dir;
    }
  }

  /** The codec names of a {@code --compression} value, {@code auto} among them (see {@link Codecs#parseList}). */
  static List<String> codecList(String value) {
    return codecListFor("--compression", value, java.util.Set.of(CollectiveSites.AUTO));
  }

  /**
   * The codec names of the list {@code value} given to {@code flag}, where the names {@code choosers} also stand (see
   * {@link Codecs#parseList}); errors name the flag.
   */
  static List<String> codecListFor(String flag, String value, java.util.Set<String> choosers) {
    try {
      return Codecs.parseList(value, choosers);
    } catch (IllegalArgumentException e) {
      boolean auto = choosers.contains(CollectiveSites.AUTO) && e.getMessage().contains("unknown codec");
      throw new IllegalArgumentException(flag + ": " + e.getMessage()
          + (auto ? " (or auto: per site, the fastest that passes --auto-max-error)" : ""));
    }
  }

  /**
   * Refuses a model that cannot fit the heap, before allocating it (the estimate of {@link Gpt#estimateBytes}, times
   * the data-parallel replicas).
   */
  static void requireMemory(GptConfig cfg, int microBatch, int replicas) {
    double need = Gpt.estimateBytes(cfg, microBatch) * replicas;
    long max = Runtime.getRuntime().maxMemory();
    if (need > 0.9 * max) {
      throw new IllegalArgumentException(String.format(Locale.ROOT,
          "this model and micro-batch need about %.2f GiB, more than 90 %% of the %.2f GiB heap (the rest is for"
              + " the JVM and the run): lower --micro-batch-size, --seq-length, --hidden-size or --num-layers (or raise"
              + " -Xmx through TACO_JAVA_OPTS)",
          need / (1L << 30), max / (double) (1L << 30)));
    }
  }

  /**
   * Creates the folder {@code dir} that option {@code flag} names, if missing, and checks that it can be written.
   *
   * @throws IllegalArgumentException naming the option, the folder and the reason
   */
  private static void makeWritableFolder(String flag, Path dir) {
    if (Files.exists(dir) && !Files.isDirectory(dir))
      throw new IllegalArgumentException(flag + " " + dir.toAbsolutePath() + " exists and is not a folder");
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "cannot create " + flag + " folder " + dir.toAbsolutePath() + ": " + reason(e));
    }
    if (!Files.isWritable(dir))
      throw new IllegalArgumentException(flag + " folder " + dir.toAbsolutePath() + " is not writable");
  }

  /**
   * Refuses a {@code --save} folder whose file system has less than {@code bytes} (a checkpoint per codec) free.
   *
   * @throws IllegalArgumentException naming the folder, what is free and what is needed
   * @throws IOException if the file system cannot be asked
   */
  static void requireSpace(Path save, long bytes) throws IOException {
    long free = Files.getFileStore(save).getUsableSpace();
    if (free < bytes) {
      throw new IllegalArgumentException(String.format(Locale.ROOT, "--save folder %s has %.1f MB free, a checkpoint of"
          + " each codec's run takes %.1f MB", save.toAbsolutePath(), free / 1e6, bytes / 1e6));
    }
  }

  /**
   * The output folder, created: {@code out} if given (it must be a writable folder or not exist yet), else a new
   * {@code runs/<timestamp>} (with a suffix if a run started in the same second).
   */
  static Path outputFolder(Path out) throws IOException {
    if (out != null) {
      if (out.toString().isBlank()) throw new IllegalArgumentException("--out is empty");
      if (Files.exists(out) && !Files.isDirectory(out)) {
        throw new IllegalArgumentException("--out " + out.toAbsolutePath() + " exists and is not a folder");
      }
      makeWritableFolder("--out", out);
      return out;
    }
    String stamp = LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss"));
    try {
      Files.createDirectories(Path.of("runs"));
      for (int i = 1;; i++) {
        Path p = Path.of("runs", i == 1 ? stamp : stamp + "-" + i);
        try {
          return Files.createDirectory(p);
        } catch (java.nio.file.FileAlreadyExistsException e) {
          // a run started in the same second: try the next suffix
        }
      }
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot create the default output folder " + Path.of("runs", stamp)
          .toAbsolutePath() + ": " + reason(e) + " (--out DIR writes elsewhere)");
    }
  }

  /** What went wrong with a file, in words (the file system's reason, or the exception's kind) and the file. */
  static String reason(IOException e) {
    return e instanceof java.nio.file.FileSystemException fs ? AtomicFile.why(e) + " (" + fs.getFile() + ")"
        : e.getMessage();
  }

  /** {@code v} to the unit, or "-" for NaN (a diverged run's bytes and tokens/s). */
  private static String dashIfNaN(double v) {
    return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.0f", v);
  }

  /** Prints the side-by-side per-step table, the wire bytes and the codec error, as the run's report. */
  static void printTable(PrintWriter w, List<RunResult> runs, int logInterval) {
    // the first column as wide as the longest codec name (taco-no-hadamard, taco:e5m2 ...), at least 12
    String name = "%-" + Math.max(12, runs.stream().mapToInt(r -> r.compression().length()).max().orElse(0)) + "s";
    StringBuilder head = new StringBuilder(String.format("%6s", "step"));
    for (RunResult r : runs) head.append(String.format(" | " + name + " %8s %8s", r.compression(), "train", "val"));
    w.println();
    w.println(head);
    // rows by step, not by position: a resumed run's history starts at its checkpoint's step and a run stopped by a
    // signal ends early, so a run's cells stay empty where it has no such step
    java.util.SortedSet<Integer> steps = new java.util.TreeSet<>();
    List<Map<Integer, RunResult.StepRow>> byStep = new ArrayList<>();
    for (RunResult r : runs) {
      Map<Integer, RunResult.StepRow> rows = new java.util.HashMap<>();
      for (RunResult.StepRow row : r.history()) rows.put(row.step(), row);
      steps.addAll(rows.keySet());
      byStep.add(rows);
    }
    for (int step : steps) {
      boolean evalRow = byStep.stream().anyMatch(rows -> rows.containsKey(step) && rows.get(step).val_loss() != null);
      if (!evalRow && step % logInterval != 0) continue;
      StringBuilder line = new StringBuilder(String.format("%6d", step));
      for (Map<Integer, RunResult.StepRow> rows : byStep) {
        RunResult.StepRow row = rows.get(step);
        line.append(String.format(Locale.ROOT, " | " + name + " %8s %8s", "", row == null ? "" : fmt(row.train_loss()),
            row == null ? "" : fmt(row.val_loss())));
      }
      w.println(line);
    }
    w.println();
    double base = runs.get(0).tp_bytes_per_step();
    w.printf(name + " %4s %10s %10s %9s %16s %9s %9s %10s%n", "compression", "tp", "val@0", "val@end", "drop",
        "TP bytes/step", "vs first", "wall s", "tokens/s");
    for (RunResult r : runs) {
      // with one rank nothing goes on the wire: there is no ratio to print
      String ratio = base > 0 && !Double.isNaN(r.tp_bytes_per_step())
          ? String.format(Locale.ROOT, "%9.3f", r.tp_bytes_per_step() / base)
          : String.format("%9s", "-");
      // a resumed run has no evaluation before its first step: "-" for val@0 and the drop
      boolean start = !Double.isNaN(r.initial_val_loss());
      // a diverged run has no bytes or tokens/s (NaN): "-"
      w.printf(Locale.ROOT, name + " %4d %10s %10.4f %9s %16s %s %9.1f %10s%n", r.compression(), r.tp(),
          start ? String.format(Locale.ROOT, "%.4f", r.initial_val_loss()) : "-", r.final_val_loss(),
          start ? String.format(Locale.ROOT, "%.1f%%", 100 * (1 - r.final_val_loss() / r.initial_val_loss())) : "-",
          dashIfNaN(r.tp_bytes_per_step()), ratio, r.wall_seconds(), dashIfNaN(r.tokens_per_second()));
    }
    for (RunResult r : runs) {
      if (r.link() != null && r.link().startsWith("emulated")) {
        w.printf(name + " EMULATED: %s; rank 0 of TP=%d alone on this GPU, the losses mean nothing%n",
            r.compression(), r.link(), r.tp());
      }
      if (r.link() != null && !r.link().startsWith("emulated")) w.printf(name + " %s%n", r.compression(), r.link());
      if (r.calibration_seconds() > 0) {
        w.printf(Locale.ROOT, name + " plan calibration and codec-error samples: %.2f s of host time on rank 0 (part of"
            + " wall s)%n", r.compression(), r.calibration_seconds());
      }
      if (r.calibration_steps() >= r.steps() && r.calibration_steps() > 0) {
        w.printf(
            name + " note: sites calibrated in every step (--calibration-steps covers the run): the bytes are those"
                + " of calibration steps, which send with the codec's default plan until a site's own is frozen%n",
            r.compression());
      } else if (r.calibration_steps() > 0) {
        int after = r.steps() - r.calibration_steps();
        w.printf(name + " TP bytes/step over the %s after calibration (%d calibrating step%s left out)%n",
            r.compression(), after == 1 ? "1 step" : after + " steps", r.calibration_steps(),
            r.calibration_steps() == 1 ? "" : "s");
      }
      if ("save-failed".equals(r.stopped())) {
        w.printf(name + " stopped after step %d, whose checkpoint could not be saved (the rows above are its steps);"
            + " the error follows%n", r.compression(), r.first_step() + r.steps());
      }
      if ("diverged".equals(r.stopped())) {
        w.printf(name + " diverged in step %d (the rows above are the steps before it): no bytes or tokens/s; the"
            + " error follows%n", r.compression(), r.first_step() + r.steps());
      }
      if (r.final_val_loss() > 1.1 * r.initial_val_loss()) { // finite, else the run stopped as diverged
        w.printf(Locale.ROOT, name + " warning: the validation loss rose from %.4f to %.4g: the run is diverging"
            + " (lower --lr)%n", r.compression(), r.initial_val_loss(), r.final_val_loss());
      }
      if (r.sites_calibrating() > 0) {
        w.printf(
            name + " note: %d site(s) had not finished calibrating when the run ended; no plan is listed for them%n",
            r.compression(), r.sites_calibrating());
      }
    }
    for (RunResult r : runs) {
      if (r.bytes_per_step_by_kind() == null || r.bytes_per_step_by_kind().isEmpty()) continue;
      StringBuilder kinds = new StringBuilder();
      r.bytes_per_step_by_kind().forEach((k, v) -> kinds.append(String.format(Locale.ROOT, "%s%s %.0f",
          kinds.isEmpty() ? "" : ", ", k, v)));
      w.printf(name + " bytes/step by kind, over all %d steps: %s%n", r.compression(), r.steps(), kinds);
    }
    if (runs.stream().anyMatch(r -> !r.codec_error().isEmpty())) {
      w.println();
      w.printf(name + " %-5s %10s %9s %14s %10s %8s %8s%n", "codec", "site", "rel L2", "SNR dB", "zero collapse",
          "saturated", "B/elem", "tensors");
    }
    for (RunResult r : runs) {
      r.codec_error().forEach((site, e) -> w.printf(Locale.ROOT, name + " %-5s %10.3e %9.2f %14.2e %10d %8.4f %8d%n",
          r.compression(), site, e.rel_l2(), e.snr_db(), e.zero_collapse_rate(), e.saturated(), e.bytes_per_element(),
          e.samples()));
    }
    for (RunResult r : runs) {
      if (r.plans().isEmpty()) continue;
      w.printf("%n%s: plans chosen per collective site by calibration%n", r.compression());
      if (r.plans().values().stream().anyMatch(p -> p.choice() != null)) { // auto: each site's codec and why
        r.plans().forEach((site, p) -> w.printf(Locale.ROOT, "  %-22s %s %s, rel L2 %.4f; %s%n", site, p.codec(),
            p.layout(), p.relL2(), p.choice()));
        continue;
      }
      java.util.Map<String, java.util.List<String>> bySite = new java.util.LinkedHashMap<>();
      r.plans()
          .forEach((site, p) -> bySite.computeIfAbsent(String.format(Locale.ROOT, "G=%-3d %-11s %-8s", p.groupSize(),
              p.hadamard() ? "hadamard" : "no-hadamard", p.layout()), k -> new ArrayList<>()).add(site));
      bySite.forEach((plan, sites) -> w.printf("  %s  %d site(s): %s%n", plan, sites.size(), String.join(" ", sites)));
    }
    for (RunResult r : runs) {
      if (r.gpu_step_ms() == null || r.gpu_step_ms().isEmpty()) continue;
      StringBuilder parts = new StringBuilder();
      r.gpu_step_ms().forEach((k, v) -> parts.append(String.format(Locale.ROOT, " %s %.3f", k, v)));
      w.printf("%s: GPU time per step, rank 0, ms (CUDA events):%s%n", r.compression(), parts);
    }
    if (runs.size() > 1) {
      for (int i = 1; i < runs.size(); i++) {
        RunResult r = runs.get(i);
        int end = r.first_step() + r.steps(), baseEnd = runs.get(0).first_step() + runs.get(0).steps();
        w.printf(Locale.ROOT, "%s vs %s: final validation loss %+.2f%%%s, %s%n", r.compression(),
            runs.get(0).compression(), 100 * (r.final_val_loss() / runs.get(0).final_val_loss() - 1),
            end == baseEnd ? "" : String.format(Locale.ROOT, " (at step %d against step %d: not comparable)", end,
                baseEnd),
            base > 0 ? String.format(Locale.ROOT, "TP bytes per step x%.3f", r.tp_bytes_per_step() / base)
                : "no TP bytes on the wire (one rank)");
      }
    }
  }

  private static String fmt(Double v) {
    return v == null || v.isNaN() ? "" : String.format(Locale.ROOT, "%.4f", v);
  }

  /**
   * {@code message} with every option's long name (picocli's, and ours, name an option by its longest name) replaced
   * by the alias the user typed last in {@code args}: {@code --tp 0} is answered about {@code --tp}, not
   * {@code --tensor-model-parallel-size}.
   */
  static String asTyped(CommandLine cl, String[] args, String message) {
    if (cl == null || message == null) return message;
    for (CommandLine.Model.OptionSpec o : cl.getCommandSpec().options()) {
      String longest = o.longestName(), typed = null;
      for (String a : args) { // the last alias typed: its value is the one that counts
        String name = a.contains("=") ? a.substring(0, a.indexOf('=')) : a;
        if (java.util.Arrays.asList(o.names()).contains(name)) typed = name;
      }
      if (typed != null && !typed.equals(longest)) {
        message = message.replaceAll(java.util.regex.Pattern.quote(longest) + "(?![\\w-])",
            java.util.regex.Matcher.quoteReplacement(typed));
      }
    }
    return message;
  }

  /** The values of the {@code TACO_LOG} environment variable: SLF4J's simple logger's levels. */
  static final List<String> LOG_LEVELS = List.of("trace", "debug", "info", "warn", "error", "off");

  /** Entry point: runs the command; bad input gives one line on stderr and a non-zero exit, no stack trace. */
  public static void main(String[] args) {
    System.exit(execute(args));
  }

  /**
   * Runs the command line and returns its exit status (0 ok, 1 failure, 2 bad input), printing errors as one line
   * on stderr.
   */
  public static int execute(String... args) {
    String level = System.getenv("TACO_LOG"); // the launcher's; SLF4J's simple logger takes a word it lacks for info
    if (level != null && !level.isEmpty() && !LOG_LEVELS.contains(level.toLowerCase(Locale.ROOT))) {
      System.err.println("taco: error: TACO_LOG=" + level + " is not a log level: use one of " + String.join(", ",
          LOG_LEVELS));
      return 2;
    }
    CommandLine cl = new CommandLine(new TacoCli()).setOverwrittenOptionsAllowed(true);
    cl.setParameterExceptionHandler((ex, a) -> {
      CommandLine at = ex.getCommandLine(); // the subcommand whose arguments failed, or taco itself (an unknown one)
      String what = at.getParent() == null && ex instanceof CommandLine.UnmatchedArgumentException u
          && !u.getUnmatched().isEmpty() && !u.getUnmatched().get(0).startsWith("-")
              ? "unknown command '" + u.getUnmatched().get(0) + "': the commands are " + String.join(", ",
                  at.getSubcommands().keySet())
              : asTyped(at, a, ex.getMessage());
      System.err.println("taco: error: " + what + " (see: ./taco " + (at.getParent() != null ? at.getCommandName() + " "
          : "") + "--help)");
      return 2;
    });
    cl.setExecutionExceptionHandler((ex, c, parsed) -> {
      log.debug("failed", ex);
      Throwable root = ex;
      while (root.getCause() != null && root.getMessage() == null) root = root.getCause();
      String msg = root instanceof IOException io ? reason(io)
          : root instanceof OutOfMemoryError ? outOfMemory(args)
              : root.getMessage() != null ? root.getMessage() : root.toString();
      System.err.println("taco: error: " + asTyped(c, args, msg));
      return ex instanceof IllegalArgumentException ? 2 : 1;
    });
    try {
      return cl.execute(args);
    } catch (OutOfMemoryError e) {
      System.err.println("taco: error: " + outOfMemory(args));
      return 1;
    }
  }

  /** What to say when the heap ran out, wherever it did (a training rank, reading tensors for analyze). */
  static String outOfMemory(String[] args) {
    boolean analyze = args.length > 0 && args[0].equals("analyze");
    return "out of memory (heap " + (Runtime.getRuntime().maxMemory() >> 20) + " MiB): " + (analyze
        ? "analyze fewer or smaller tensors" : "lower --micro-batch-size, --seq-length, --hidden-size or --num-layers")
        + ", or raise -Xmx through TACO_JAVA_OPTS";
  }
}
