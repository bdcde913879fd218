package dev.taco.runtime.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.runtime.analyze.TestFiles;
import dev.taco.runtime.train.RunResult;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** The command line: bad input gives one line on stderr and a non-zero exit; a small run writes its report. */
public class TacoCliTest {
  @TempDir
  Path tmp;

  /** What one command line did: its exit status and what it printed. */
  public record Result(int status, String out, String err) {}

  /** Runs {@code taco} with {@code args} in this JVM, capturing stdout and stderr. */
  public static Result run(String... args) {
    PrintStream oldOut = System.out, oldErr = System.err;
    ByteArrayOutputStream out = new ByteArrayOutputStream(), err = new ByteArrayOutputStream();
    System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      int status = TacoCli.execute(args);
      return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    } finally {
      System.setOut(oldOut);
      System.setErr(oldErr);
    }
  }

  static String[] tiny(Path out, String... more) {
    String[] base = {"train", "--steps", "4", "--num-layers", "1", "--hidden-size", "16", "--num-attention-heads", "4",
        "--seq-length", "16", "--micro-batch-size", "2", "--eval-interval", "2", "--eval-iters", "1", "--out",
        out.toString()};
    String[] all = new String[base.length + more.length];
    System.arraycopy(base, 0, all, 0, base.length);
    System.arraycopy(more, 0, all, base.length, more.length);
    return all;
  }

  /** {@code file} (created if missing) opened with its exclusive lock held, as another run holds it, until closed. */
  public static java.nio.channels.FileChannel heldLock(Path file) throws java.io.IOException {
    var ch = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.CREATE,
        java.nio.file.StandardOpenOption.WRITE);
    ch.lock();
    return ch;
  }

  static void assertOneLineError(Result r, String expected) {
    assertThat(r.status()).isNotZero();
    String err = r.err().strip();
    assertThat(err).contains(expected);
    assertThat(err.lines().filter(l -> !l.startsWith("WARNING")).count()).as("stderr: %s", err).isEqualTo(1);
    assertThat(err).doesNotContain("\tat ").doesNotContain("Exception");
  }

  @Test
  void theHelpHintNamesTheCommandThatFailed() {
    // an unknown subcommand points at taco's own help (it once said "see: taco bogus --help"), a bad option at its
    // subcommand's
    Result unknown = run("bogus");
    assertOneLineError(unknown, "unknown command 'bogus': the commands are ");
    assertThat(unknown.status()).isEqualTo(2);
    assertThat(unknown.err()).contains("train").contains("analyze").contains("(see: ./taco --help)");
    Result badOption = run("train", "--no-such-option");
    assertOneLineError(badOption, "--no-such-option");
    assertThat(badOption.err()).contains("(see: ./taco train --help)");
  }

  @Test
  void aSaveIntervalWithoutSaveIsRefusedBeforeAnOutputFolderIsMade() {
    Path out = tmp.resolve("never");
    assertOneLineError(run(tiny(out, "--save-interval", "2")), "--save-interval needs --save DIR");
    assertThat(out).doesNotExist();
  }

  /** A --save folder that cannot be made is named before training, not at its first save (the run would be lost). */
  @Test
  void aSaveFolderThatCannotBeMadeIsRefusedBeforeTraining() throws Exception {
    Path file = Files.writeString(tmp.resolve("f"), "x"), out = tmp.resolve("o");
    Result r = run(tiny(out, "--save", file.resolve("ck").toString()));
    assertOneLineError(r, "cannot create --save folder " + file.resolve("ck").toAbsolutePath());
    assertThat(r.out()).as("no table: nothing trained").isEmpty();
    assertThat(out).doesNotExist();
    // a file system without room for one checkpoint is named up front too
    assertThatThrownBy(() -> TacoCli.requireSpace(tmp, Long.MAX_VALUE / 2))
        .hasMessageMatching("--save folder .* has [0-9.]+ MB free, a checkpoint of each codec's run takes [0-9.]+ MB");
    TacoCli.requireSpace(tmp, 1);
  }

  @Test
  void missingDataFile() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", tmp.resolve("nope.txt").toString())),
        "data file not found");
  }

  @Test
  void emptyDataFile() throws Exception {
    Path f = Files.writeString(tmp.resolve("empty.txt"), "");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", f.toString())), "is empty");
  }

  @Test
  void binaryDataFile() throws Exception {
    Path f = Files.write(tmp.resolve("bin.dat"), new byte[] {0x7f, 'E', 'L', 'F', 0, 1, 2, 3});
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", f.toString())), "binary");
    Path g = Files.write(tmp.resolve("latin1.txt"), new byte[] {'c', 'a', 'f', (byte) 0xE9, ' ', 'x'});
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", g.toString())), "not UTF-8");
  }

  @Test
  void tpMustDivideHeadsAndHidden() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--tp", "3")), "--tp 3 does not divide --num-attention-heads 4");
  }

  @Test
  void aDivergedRunSaysSoAtEveryTpSize() throws Exception {
    Path text = Files.writeString(tmp.resolve("d.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    for (String tp : new String[] {"1", "2"}) {
      Result r = run(tiny(tmp.resolve("o" + tp), "--data", text.toString(), "--tp", tp, "--lr", "1e30", "--compression",
          "none"));
      assertThat(r.status()).as(r.err()).isEqualTo(1);
      List<String> lines = r.err().strip().lines().toList();
      assertThat(lines.get(lines.size() - 1)).as("TP=" + tp).startsWith("taco: error: training diverged")
          .contains("lower --lr");
      assertThat(r.err()).doesNotContain("\tat ").doesNotContain("backward() before forward()");
      // its steps before the non-finite one are reported: the table, report.json (strict JSON: NaN as null)
      assertThat(r.out()).contains("none         diverged in step ");
      JsonObject run = JsonParser.parseString(Files.readString(tmp.resolve("o" + tp)
          .resolve("report.json"))).getAsJsonObject().getAsJsonArray("runs").get(0).getAsJsonObject();
      assertThat(run.get("stopped").getAsString()).isEqualTo("diverged");
      assertThat(run.getAsJsonArray("history")).as("the steps before it").isNotEmpty();
      assertThat(run.get("tokens_per_second").isJsonNull()).isTrue();
      assertThat(Files.exists(tmp.resolve("o" + tp).resolve("loss.png"))).isTrue();
    }
  }

  @Test
  void aRunWhoseLossRoseIsCalledDivergingAndOneThatLearnedIsNot() {
    Result high = run(tiny(tmp.resolve("high"), "--lr", "1e4", "--compression", "none"));
    assertThat(high.status()).as(high.err()).isZero();
    assertThat(high.out())
        .containsPattern("none +warning: the validation loss rose from 5\\.\\d{4} to [0-9.e+]+: the run"
            + " is diverging \\(lower --lr\\)");
    Result ok = run(tiny(tmp.resolve("ok"), "--compression", "none"));
    assertThat(ok.status()).as(ok.err()).isZero();
    assertThat(ok.out()).doesNotContain("warning");
  }

  @Test
  void longEvaluationsAndOversubscribedCoresAreSaidUpFront() throws Exception {
    Path text = Files.writeString(tmp.resolve("small.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(40));
    Result r = run(tiny(tmp.resolve("e"), "--data", text.toString(), "--steps", "1", "--eval-iters", "100"));
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.err()).contains("--eval-iters 100: every evaluation runs 100 forward passes");
    Result quiet = run(tiny(tmp.resolve("q"), "--data", text.toString(), "--steps", "1"));
    assertThat(quiet.err()).doesNotContain("every evaluation runs").doesNotContain("take turns on the cores");
    int cores = Runtime.getRuntime().availableProcessors();
    if (cores < 4) { // 8 ranks are more than two per core below 4 cores (CI's machines have 2)
      Result o = run(tiny(tmp.resolve("o"), "--steps", "1", "--tp", "4", "--data-parallel-size", "2"));
      assertThat(o.status()).as(o.err()).isZero();
      assertThat(o.err()).contains("8 ranks (--tp 4 x --data-parallel-size 2) on " + cores + " cores");
    }
  }

  @Test
  void outOfMemoryAdviceFitsTheCommand() {
    assertThat(TacoCli.outOfMemory(new String[] {"analyze", "x.npy"})).contains("analyze fewer or smaller tensors")
        .doesNotContain("--micro-batch-size");
    assertThat(TacoCli.outOfMemory(new String[] {"train"})).contains("lower --micro-batch-size")
        .doesNotContain("analyze");
  }

  /**
   * A run whose heap runs out once training has started (the estimate of {@code requireMemory} passed) says so in one
   * line and leaves no empty {@code --out} folder behind (one that ran out while writing its report keeps what it
   * wrote). The JVM's own share of a heap this small varies a little, so
   * three sizes are tried, each in a process of its own; those that ran out after the folder was made (their log has
   * the "data:" line that training starts with) count.
   */
  @Test
  void runningOutOfHeapInTrainingLeavesNoEmptyOutFolder() throws Exception {
    String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    int tested = 0;
    for (int mib : new int[] {8, 10, 12}) {
      Path out = tmp.resolve("oom" + mib), err = tmp.resolve("err" + mib + ".txt");
      Process p = new ProcessBuilder(javaBin, "-Xmx" + mib + "m", "--add-modules=jdk.incubator.vector",
          "-cp", System.getProperty("java.class.path"), "-Djava.awt.headless=true", "dev.taco.runtime.cli.TacoCli",
          "train", "--steps", "2", "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
          "--seq-length", "16", "--out", out.toString())
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(err.toFile()).start();
      assertThat(p.waitFor(120, java.util.concurrent.TimeUnit.SECONDS)).as("ended within 2 minutes").isTrue();
      String log = Files.readString(err);
      if (p.exitValue() == 0 || !log.contains("data: ")) continue; // it fitted, or ran out before the folder was made
      // (a thread of the JVM's own that runs out at the same moment may print its trace too: not asserted on)
      assertThat(log).contains("taco: error: out of memory (heap");
      if (Files.exists(out)) { // it ran out after writing some of its report: kept, with what it wrote
        try (var in = Files.list(out)) {
          assertThat(in.findAny()).as("--out of a run that ran out of heap; its log: %s", log).isPresent();
        }
      }
      tested++;
    }
    assertThat(tested).as("some heap size ran out in training (else this JVM's heap needs other sizes here)")
        .isPositive();
  }

  @Test
  void nonPositiveSizes() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--steps", "0")), "--steps must be positive");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--hidden-size", "-16")), "--hidden-size must be positive");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--micro-batch-size", "0")), "--micro-batch-size must be positive");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--distributed-timeout-minutes", "0")),
        "--distributed-timeout-minutes must be in 1..10080");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--distributed-timeout-minutes", "153722868")),
        "--distributed-timeout-minutes must be in 1..10080");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--tp", "0")), "must be positive");
  }

  @Test
  void unknownCompressionAndBadNumbers() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--compression", "zip")), "zip");
    // analyze's name for the option works for train too: the codec is refused, not the option
    assertOneLineError(run(tiny(tmp.resolve("o"), "--codec", "zip")), "--codec: unknown codec 'zip'");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--steps", "many")), "--steps");
    // an error names the flag as typed, not its longest alias
    assertOneLineError(run(tiny(tmp.resolve("o"), "--train-iters", "many")), "--train-iters");
    Result tp0 = run(tiny(tmp.resolve("o"), "--tp", "0"));
    assertOneLineError(tp0, "--tp ");
    assertThat(tp0.err()).doesNotContain("--tensor-model-parallel-size");
    assertThat(run(tiny(tmp.resolve("o"), "--tensor-model-parallel-size", "0")).err())
        .contains("--tensor-model-parallel-size");
  }

  @Test
  void dataTooShortForTheContext() throws Exception {
    Path f = Files.writeString(tmp.resolve("short.txt"), "hello world, a short text\n");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", f.toString())), "too short");
  }

  @Test
  void compressionListsAreValidatedBeforeAnyWork() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--compression", ",")), "--compression: empty codec name");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--compression", "none,NONE")), "'none' is listed twice");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--compression", "none,,taco")), "empty codec name");
    assertThat(TacoCli.codecList("taco:e5m2,g=32,hadamard=off,none")).containsExactly("taco:e5m2,g=32,hadamard=off",
        "none");
    assertThat(TacoCli.codecList("taco:g=64,e5m2,none")).containsExactly("taco:g=64,e5m2", "none");
    // a second format is the same codec's mistake, wherever it stands, not an unknown codec 'e5m2'
    for (String twice : new String[] {"taco:e4m3,e5m2", "taco:e4m3,E5M2,g=64", "none,taco:e4m3,e5m2"}) {
      assertOneLineError(run(tiny(tmp.resolve("o"), "--compression", twice)), "the fp8 format is given twice");
    }
    assertOneLineError(run(tiny(tmp.resolve("o"), "--compression", "taco:")), "codec 'taco:': nothing after ':'");
    assertThat(tmp.resolve("o")).doesNotExist();
  }

  @Test
  void modelsThatCannotFitTheHeapAreRefusedUpFront() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--micro-batch-size", "100000")), "more than 90 % of the");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--seq-length", "2147483647")), "more than 90 % of the");
  }

  @Test
  void deviceChoicesAreCheckedAndAutoFallsBackToTheCpu() throws Exception {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--device", "gpu")), "--device must be cpu, cuda or auto, got 'gpu'");
    assumeFalse(dev.taco.kernels.cuda.Cuda.available() && dev.taco.kernels.cuda.Cuda.deviceCount() > 0,
        "this machine has a GPU: TacoCliGpuTest covers --device cuda and auto there");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--device", "cuda")), "--device cuda: ");
    Path text = Files.writeString(tmp.resolve("t.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    Path out = tmp.resolve("auto");
    Result r = run(tiny(out, "--data", text.toString(), "--compression", "fp32", "--tp", "1", "--device", "auto"));
    assertThat(r.status()).as(r.err()).isZero();
    JsonObject report = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
    assertThat(report.getAsJsonObject("config").get("device").getAsString()).isEqualTo("cpu");
  }

  @Test
  void gpuOnlyOptionsAreRefusedOnTheCpuAndPrecisionIsChecked() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--precision", "fp16")),
        "--precision must be fp32 or bf16, got 'fp16'");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--precision", "bf16")), "--precision bf16 needs a GPU");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--no-tp-comm")), "--no-tp-comm needs a GPU");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--tp-transport", "nccl")), "--tp-transport nccl needs a GPU");
    // a bad value is named even where the device cannot open
    assertOneLineError(run(tiny(tmp.resolve("o"), "--device", "cuda", "--precision", "fp16")),
        "--precision must be fp32 or bf16, got 'fp16'");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--tp-transport", "ib")),
        "--tp-transport must be auto, device-local, nccl or emulated, got 'ib'");
  }

  @Test
  void deviceAutoWithoutAGpuIgnoresGpuOnlyOptionsAndTrainsOnTheCpu() throws Exception {
    assumeFalse(dev.taco.kernels.cuda.Cuda.available() && dev.taco.kernels.cuda.Cuda.deviceCount() > 0,
        "this machine has a GPU: there --device auto takes it");
    Path out = tmp.resolve("auto-gpu-options");
    Result r = run(tiny(out, "--device", "auto", "--precision", "bf16", "--no-tp-comm", "--tp-transport", "nccl"));
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.err()).contains("--precision bf16, --no-tp-comm, --tp-transport nccl ignored: no GPU")
        .as("the ignored --no-tp-comm does not make the run's losses wrong")
        .doesNotContain("losses of this run are wrong");
    JsonObject report = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
    assertThat(report.getAsJsonObject("config").get("device").getAsString()).isEqualTo("cpu");
  }

  @Test
  void outputFolderAndDataPathProblems() throws Exception {
    Path file = Files.writeString(tmp.resolve("afile"), "x");
    assertOneLineError(run(tiny(file)), "exists and is not a folder");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", tmp.toString())), "is a directory");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", "")), "the data file name is empty");
  }

  /**
   * Two runs into one explicit --out at once: the second is refused (it wrote its report over the first's, both exiting
   * 0), as a --save folder in use is; once the first is done, --overwrite serves.
   */
  @Test
  void anOutFolderInUseByAnotherRunIsRefused() throws Exception {
    Path out = Files.createDirectories(tmp.resolve("busy"));
    try (var held = heldLock(out.resolve(".taco-out.lock"))) {
      Result r = run(tiny(out, "--compression", "none", "--tp", "1"));
      assertOneLineError(r, "--out " + out.toAbsolutePath() + " is in use by another run");
      assertThat(r.out()).as("nothing trained").isEmpty();
    }
    assertThat(out.resolve("report.json")).doesNotExist();
    Result free = run(tiny(out, "--compression", "none", "--tp", "1", "--overwrite"));
    assertThat(free.status()).as(free.err()).isZero();
    assertThat(out.resolve("report.json")).exists();
  }

  /**
   * A --data file over 2 GiB is refused naming Java's array limit, whatever the heap (it was said to be "too large for
   * the heap"). The file is sparse: it takes no disk space.
   */
  @Test
  void aDataFileOverTwoGibNamesTheRealLimit() throws Exception {
    Path big = tmp.resolve("big.txt");
    try (var f = new java.io.RandomAccessFile(big.toFile(), "rw")) {
      f.setLength((2L << 30) + 1);
    }
    Result r = run(tiny(tmp.resolve("o"), "--data", big.toString()));
    assertOneLineError(r, "data file " + big + " holds 2147483649 bytes (2.0 GiB); a --data file holds at most"
        + " 2147483639 bytes (2 GiB, the largest Java array, whatever the heap)");
    assertThat(r.err()).doesNotContain("too large for the heap");
    assertThat(r.status()).isEqualTo(2);
  }

  /** {@code TACO_LOG} with a word that is no log level is refused (SLF4J's simple logger took it for info, silently). */
  @Test
  void aTacoLogThatIsNoLevelIsRefused() throws Exception {
    for (String level : new String[] {"bogus", "WARN"}) {
      Process p = inProcessOfItsOwn(level, "train", "-V");
      String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
      if (level.equals("bogus")) {
        assertThat(p.exitValue()).as(said).isEqualTo(2);
        assertThat(said.lines().filter(l -> !l.startsWith("WARNING"))).containsExactly("taco: error: TACO_LOG=bogus is"
            + " not a log level: use one of trace, debug, info, warn, error, off");
      } else { // a level in capitals is one
        assertThat(p.exitValue()).as(said).isZero();
        assertThat(said).contains("taco 0.1.0");
      }
    }
  }

  /** {@code --auto-max-error} given without {@code auto} among the codecs is warned about, as {@code --link} is. */
  @Test
  void anAutoMaxErrorWithoutAutoIsWarnedAbout() throws Exception {
    String[] run = {"train", "--steps", "1", "--tp", "2", "--num-layers", "1", "--hidden-size", "32",
        "--num-attention-heads", "2", "--seq-length", "16", "--micro-batch-size", "2", "--eval-iters", "1",
        "--compression", "none", "--overwrite", "--out", tmp.resolve("amx").toString()};
    for (boolean given : new boolean[] {true, false}) {
      List<String> args = new ArrayList<>(List.of(run));
      if (given) args.addAll(List.of("--auto-max-error", "activations=0.1"));
      Process p = inProcessOfItsOwn("warn", args.toArray(String[]::new));
      String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor(120, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as(said).isZero();
      assertThat(said.contains("--auto-max-error has no effect here")).as("given: %s; %s", given, said)
          .isEqualTo(given);
    }
  }

  /** {@code taco} in a JVM of its own (its logger reads {@code TACO_LOG} once), stdout and stderr merged. */
  private static Process inProcessOfItsOwn(String tacoLog, String... args) throws IOException {
    String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<String> cmd = new ArrayList<>(List.of(javaBin, "--add-modules=jdk.incubator.vector", "-cp",
        System.getProperty("java.class.path"), "dev.taco.runtime.cli.TacoCli"));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().put("TACO_LOG", tacoLog);
    return pb.redirectErrorStream(true).start();
  }

  /**
   * The training options are declared once, in {@code Trainer.Options}: each is a flag of {@code taco train} named as
   * its component, whose help shows the builder's default; the report's config holds every one by its name.
   */
  @Test
  void trainHelpPrintsEveryDescriptionWithoutPicocliFormatWarnings() {
    // a bare "10 % of" in --data's description is a format specifier to picocli: it warned on stderr, once per line
    Result r = run("train", "--help");
    assertThat(r.status()).isZero();
    assertThat(r.err()).doesNotContain("picocli WARN");
    String help = r.out().replaceAll("\\s+", " ");
    assertThat(help).contains("the last 10 % of its bytes is held out for validation")
        .contains("at most " + dev.taco.runtime.train.SiteDump.MAX_ROWS + " token rows");
  }

  @Test
  void everyTrainingOptionIsAFlagNamedAsDeclaredWithTheBuildersDefault() throws Exception {
    CommandLine.Model.CommandSpec train = new CommandLine(new TacoCli()).getSubcommands().get("train")
        .getCommandSpec();
    String help = run("train", "--help").out().replaceAll("\\s+", " ");
    for (var c : dev.taco.runtime.train.Trainer.Options.class.getRecordComponents()) {
      String flag = dev.taco.runtime.train.Trainer.Options.flag(c.getName());
      assertThat(train.findOption(flag)).as(flag).isNotNull();
    }
    assertThat(dev.taco.runtime.train.Trainer.Options.defaults()).containsEntry("--micro-batch-size", 8)
        .containsEntry("--lr", 2e-3f).doesNotContainKey("--min-lr").doesNotContainKey("--global-batch-size");
    assertThat(help).contains("--micro-batch-size").contains("Default: 8.").contains("Default: 0.002.")
        .contains("Default: a tenth of --lr.");
    Path out = tmp.resolve("cfg");
    Result r = run(tiny(out, "--compression", "none", "--tp", "1", "--lr", "0.001", "--log-interval", "3"));
    assertThat(r.status()).as(r.err()).isZero();
    JsonObject config = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject()
        .getAsJsonObject("config");
    assertThat(config.get("min_lr").getAsFloat()).as("a tenth of the --lr given").isEqualTo(1e-3f / 10);
    assertThat(config.get("log_interval").getAsInt()).isEqualTo(3);
    assertThat(config.get("micro_batch_size").getAsInt()).isEqualTo(2);
    assertThat(config.get("tensor_model_parallel_size").getAsInt()).isEqualTo(1);
    assertThat(config.get("global_batch_size").getAsInt()).isEqualTo(2);
    // one check, named as typed: --data-parallel-size is checked by the options alone (it was checked twice)
    assertOneLineError(run(tiny(tmp.resolve("dp"), "--data-parallel-size", "0")),
        "--data-parallel-size must be positive, got 0");
  }

  @Test
  void aRunStoppedEarlyLeavesItsTableCellsEmptyAfterItsLastStep() {
    // SIGTERM during the second codec's run: its history is shorter than the first's (the table once indexed past it)
    java.util.List<RunResult.StepRow> full = new java.util.ArrayList<>(), cut = new java.util.ArrayList<>();
    for (int s = 0; s <= 10; s++) {
      full.add(new RunResult.StepRow(s, 3.0 - 0.1 * s, s % 5 == 0 ? 3.5 - 0.1 * s : null, 1e-3, 0.5));
      if (s <= 3) {
        cut.add(new RunResult.StepRow(s, 3.05 - 0.1 * s, s == 0 || s == 3 ? 3.55 - 0.1 * s : null, 1e-3, 0.5));
      }
    }
    java.io.StringWriter text = new java.io.StringWriter();
    TacoCli.printTable(new java.io.PrintWriter(text), java.util.List.of(result("none", 10, full), result("taco", 3,
        cut)), 1);
    String table = text.toString();
    String row10 = table.lines().filter(l -> l.startsWith("    10 |")).findFirst().orElseThrow();
    assertThat(row10).contains("2.0000").doesNotContain("2.05");
    assertThat(row10.substring(row10.lastIndexOf('|') + 1).strip()).as(row10).isEmpty();
    assertThat(table.lines().filter(l -> l.startsWith("     3 |")).findFirst().orElseThrow()).contains("2.7500");
    assertThat(table)
        .contains("taco vs none: final validation loss +0.00% (at step 3 against step 10: not comparable)");
  }

  @Test
  void aResumedRunsRowsStandAtTheirOwnSteps() {
    // --load: the first codec resumed at step 2, the second ran from step 0 (the table once put the resumed run's
    // step 2 in the row of step 0)
    java.util.List<RunResult.StepRow> resumed = new java.util.ArrayList<>(), fresh = new java.util.ArrayList<>();
    for (int s = 0; s <= 10; s++) {
      Double val = s % 5 == 0 ? 3.5 - 0.1 * s : null;
      if (s >= 2) resumed.add(new RunResult.StepRow(s, 3.0 - 0.1 * s, s == 10 ? val : null, 1e-3, 0.5));
      fresh.add(new RunResult.StepRow(s, 3.05 - 0.1 * s, val, 1e-3, 0.5));
    }
    java.io.StringWriter text = new java.io.StringWriter();
    TacoCli.printTable(new java.io.PrintWriter(text), java.util.List.of(result("none", 10, resumed), result("taco", 10,
        fresh)), 5);
    String table = text.toString();
    String row0 = table.lines().filter(l -> l.startsWith("     0 |")).findFirst().orElseThrow();
    assertThat(row0.substring(row0.indexOf('|') + 1, row0.lastIndexOf('|')).replace("none", "").strip()).as(row0)
        .isEmpty();
    assertThat(row0).contains("3.0500");
    String row5 = table.lines().filter(l -> l.startsWith("     5 |")).findFirst().orElseThrow();
    assertThat(row5).contains("2.5000").contains("2.5500");
    assertThat(table.lines().filter(l -> l.startsWith("     2 |"))).as("step 2 is neither logged nor evaluated")
        .isEmpty();
  }

  private static RunResult result(String codec, int steps, java.util.List<RunResult.StepRow> history) {
    return new RunResult(codec, 2, steps, 0, steps < 10 ? "signal" : null, 3.5, 3.0, 1e6, 0, 0, java.util.Map.of(),
        1.0, 1000.0, history, java.util.Map.of(), java.util.Map.of(), null, 0.0, null);
  }

  @Test
  void aDumpSitesPathThatIsAFileIsRefusedBeforeTraining() throws Exception {
    // it was found only when the last training step wrote the dump, and the runs' report was lost with it
    Path file = Files.writeString(tmp.resolve("taken"), "mine");
    Path out = tmp.resolve("never");
    Result r = run(tiny(out, "--dump-sites", file.toString()));
    assertOneLineError(r, "--dump-sites " + file.toAbsolutePath() + " exists and is not a folder");
    assertThat(r.status()).isEqualTo(2);
    assertThat(out).as("refused before the output folder is made").doesNotExist();
    assertThat(file).hasContent("mine");
  }

  @Test
  void aMissingLoadFolderIsNamedBeforeAnOutputFolderIsMade() {
    Path out = tmp.resolve("never");
    assertOneLineError(run(tiny(out, "--compression", "none,taco", "--load", tmp.resolve("missing").toString())),
        "--load " + tmp.resolve("missing") + ": no such folder");
    assertThat(out).doesNotExist();
  }

  @Test
  void aLongCodecNameWidensTheTablesFirstColumn() throws Exception {
    // taco-no-hadamard (16 characters) once ran into the tp column of a 12-wide name column
    Path text = Files.writeString(tmp.resolve("t.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    Result r = run(tiny(tmp.resolve("wide"), "--data", text.toString(), "--compression", "none,taco-no-hadamard",
        "--hidden-size", "64"));
    assertThat(r.status()).as(r.err()).isZero();
    String head = r.out().lines().filter(l -> l.startsWith("compression ")).findFirst().orElseThrow();
    for (String codec : new String[] {"none", "taco-no-hadamard"}) {
      String row = r.out().lines().filter(l -> l.startsWith(codec + " ") && l.matches(".*\\s2\\s.*")).findFirst()
          .orElseThrow();
      int tp = head.indexOf(" tp ") + 2; // "tp" right-aligned over the rank count
      assertThat(row.charAt(tp)).as("%s%n%s", head, row).isEqualTo('2');
      assertThat(row.charAt(tp - 1)).isEqualTo(' ');
      assertThat(row.substring(0, tp - 1).strip()).isEqualTo(codec);
    }
  }

  @Test
  void smallRunWritesReportAndPlot() throws Exception {
    Path text = Files.writeString(tmp.resolve("t.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    Path out = tmp.resolve("run");
    // hidden 64: rows at least as long as the smallest group (a row shorter than G is padded to G on the wire)
    Result r = run(
        tiny(out, "--data", text.toString(), "--compression", "none,taco", "--tp", "2", "--hidden-size", "64"));
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.out()).contains("taco vs none");
    JsonObject report = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
    assertThat(report.getAsJsonObject("machine").get("cores").getAsInt()).isPositive();
    var runs = report.getAsJsonArray("runs");
    assertThat(runs).hasSize(2);
    for (var e : runs) {
      JsonObject run = e.getAsJsonObject();
      for (String k : new String[] {"compression", "tp", "steps", "initial_val_loss", "final_val_loss",
          "tp_bytes_per_step", "wall_seconds"}) {
        assertThat(run.has(k)).as(k).isTrue();
      }
      assertThat(run.get("tp").getAsInt()).isEqualTo(2);
      assertThat(run.get("tp_bytes_per_step").getAsDouble()).isPositive();
      assertThat(Double.isFinite(run.get("final_val_loss").getAsDouble())).isTrue();
    }
    double none = runs.get(0).getAsJsonObject().get("tp_bytes_per_step").getAsDouble();
    double taco = runs.get(1).getAsJsonObject().get("tp_bytes_per_step").getAsDouble();
    assertThat(taco / none).isLessThan(0.7);
    String json = Files.readString(out.resolve("report.json"));
    assertThat(json).as("strict JSON has no NaN or Infinity").doesNotContain("NaN").doesNotContain("Infinity");
    byte[] png = Files.readAllBytes(out.resolve("loss.png"));
    assertThat(png).startsWith((byte) 0x89, (byte) 'P', (byte) 'N', (byte) 'G');
    assertThat(Files.readAllBytes(out.resolve("loss-diff.png"))).startsWith((byte) 0x89, (byte) 'P', (byte) 'N',
        (byte) 'G');
  }

  @Test
  void everySubcommandPrintsItsVersionAndHelpListsTheLauncherCommands() {
    for (String[] args : new String[][] {{"-V"}, {"train", "-V"}, {"analyze", "-V"}, {"test", "-V"}, {"build", "-V"}}) {
      Result r = run(args);
      assertThat(r.status()).as(String.join(" ", args)).isZero();
      assertThat(r.out().strip()).as(String.join(" ", args)).isEqualTo("taco 0.1.0");
    }
    Result help = run("--help");
    assertThat(help.out()).contains("train").contains("analyze").containsPattern("(?m)^\\s+test\\s+Run the test suite")
        .containsPattern("(?m)^\\s+build\\s+Build what is missing");
    for (String command : new String[] {"test", "build"}) {
      Result r = run(command);
      assertThat(r.status()).as(command).isEqualTo(2);
      assertThat(r.err()).as(command).contains("./taco " + command);
    }
  }

  @Test
  void aRunShorterThanCalibrationSaysItsBytesAndPlansAreCalibrations() {
    Path text = tmp.resolve("t.txt");
    Result r = run(tiny(tmp.resolve("c"), "--tp", "2", "--hidden-size", "64", "--steps", "1", "--compression", "taco",
        "--eval-interval", "100"));
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.out()).contains("note: sites calibrated in every step").contains("had not finished calibrating");
    Result longer = run(tiny(tmp.resolve("d"), "--tp", "2", "--hidden-size", "64", "--steps", "6", "--compression",
        "taco", "--eval-interval", "100"));
    assertThat(longer.out()).contains("TP bytes/step over the 4 steps after calibration (2 calibrating steps left out)")
        .doesNotContain("had not finished calibrating");
    Result one = run(tiny(tmp.resolve("e"), "--tp", "2", "--hidden-size", "64", "--steps", "3", "--compression",
        "taco", "--eval-interval", "100"));
    assertThat(one.out()).contains("TP bytes/step over the 1 step after calibration (2 calibrating steps left out)");
  }

  @Test
  void logIntervalSetsTheTableRows() {
    Result r = run(tiny(tmp.resolve("l"), "--steps", "9", "--log-interval", "3", "--eval-interval", "100"));
    assertThat(r.status()).as(r.err()).isZero();
    List<String> rows = r.out().lines().filter(l -> l.matches("\\s+\\d+ \\|.*")).map(l -> l.strip().split(" ")[0])
        .toList();
    assertThat(rows).containsExactly("0", "3", "6", "9");
    assertOneLineError(run(tiny(tmp.resolve("l2"), "--log-interval", "0")), "--log-interval must be positive");
  }

  // ---- taco analyze -------------------------------------------------------------------------------------------

  static String st(String name, int n) {
    return "{\"" + name + "\": {\"dtype\": \"F32\", \"shape\": [" + n + "], \"data_offsets\": [0, " + 4 * n + "]}}";
  }

  @Test
  void analyzePrintsTableWritesJsonAndPlots() throws Exception {
    Path npy = TestFiles.fixtures().resolve("f4_2d.npy");
    float[] v = new float[300];
    for (int i = 0; i < v.length; i++) {
      v[i] = (float) Math.sin(i) * (i % 50 == 0 ? 1e4f : 1f);
    }
    Path st = TestFiles.safetensors(tmp.resolve("w.safetensors"), st("layer.out", v.length), TestFiles.f32(v));
    Path json = tmp.resolve("out/a.json");
    Path plots = tmp.resolve("plots");
    Result r = run("analyze", npy.toString(), st.toString(), "--codec", "fp32,int8-group,taco:e5m2",
        "--json", json.toString(), "--plots", plots.toString());
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.out()).contains("rel L2", "SNR dB", "cosine", "max |err|", "zero-coll", "saturated", "B/elem")
        .contains("w.safetensors:layer.out", "64x256", "<f4", "F32", "taco:e5m2");
    // the table names the file, not its whole path (a long path misaligned the columns and clipped the plot titles)
    String table = r.out().substring(0, r.out().indexOf("wrote "));
    assertThat(table).doesNotContain(tmp.toString()).doesNotContain(npy.getParent().toString());
    assertThat(r.out().lines().filter(l -> l.contains("int8-group")).count()).isEqualTo(2);
    JsonObject report = JsonParser.parseString(Files.readString(json)).getAsJsonObject();
    assertThat(report.get("command").getAsString()).startsWith("taco analyze ").contains("--codec");
    assertThat(report.getAsJsonObject("machine").get("cores").getAsInt()).isPositive();
    var results = report.getAsJsonArray("results");
    assertThat(results).hasSize(6);
    JsonObject int8 = results.get(1).getAsJsonObject();
    assertThat(int8.get("codec").getAsString()).isEqualTo("int8-group");
    assertThat(int8.get("rel_l2").getAsDouble()).isBetween(1e-3, 0.05);
    assertThat(int8.get("bytes_per_element").getAsDouble()).isBetween(1.0, 1.1);
    assertThat(int8.get("error").isJsonNull()).isTrue();
    try (var files = Files.list(plots)) {
      List<Path> pngs = files.sorted().toList();
      assertThat(pngs).extracting(p -> p.getFileName().toString()).hasSize(4)
          .anyMatch(n -> n.startsWith("000-") && n.endsWith("f4_2d.npy-values.png"))
          .anyMatch(n -> n.startsWith("001-") && n.endsWith("layer.out-relerr.png"));
      for (Path p : pngs) {
        assertThat(Files.readAllBytes(p)).startsWith((byte) 0x89, (byte) 'P', (byte) 'N', (byte) 'G');
      }
    }
    // a 300-character tensor name: its plots' file names are cut (a file name holds 255 bytes at most)
    String longName = "layer." + "x".repeat(294);
    Path named = TestFiles.safetensors(tmp.resolve("long.safetensors"), st(longName, v.length), TestFiles.f32(v));
    Path longPlots = tmp.resolve("long-plots");
    Result lr = run("analyze", named.toString(), "--codec", "int8-group", "--plots", longPlots.toString());
    assertThat(lr.status()).as(lr.err()).isZero();
    try (var files = Files.list(longPlots)) {
      assertThat(files.map(p -> p.getFileName().toString()).toList()).hasSize(2)
          .allMatch(n -> n.length() < 160 && n.startsWith("000-long.safetensors_layer.xxx") && n.contains("x~-"));
    }
    // a newline in a tensor name is shown escaped: one table row per tensor and codec
    Path ctl = TestFiles.safetensors(tmp.resolve("ctl.safetensors"), st("a\\nb", v.length), TestFiles.f32(v));
    Result cr = run("analyze", ctl.toString(), "--codec", "int8-group");
    assertThat(cr.status()).as(cr.err()).isZero();
    assertThat(cr.out()).contains("ctl.safetensors:a\\nb ");
    assertThat(cr.out().lines().filter(l -> l.startsWith("b "))).isEmpty();
  }

  @Test
  void theFourBitFloatsTrainOnTheCpuAndAnalyze() throws Exception {
    Result r = run(tiny(tmp.resolve("fp4"), "--compression", "none,mxfp4,nvfp4:hadamard=on"));
    assertThat(r.status()).as(r.err()).isZero();
    for (String codec : new String[] {"mxfp4", "nvfp4:hadamard=on"}) { // fewer bytes than bf16, headers included
      assertThat(r.out()).as(codec)
          .containsPattern("(?m)^" + codec + " +2 +[0-9.]+ +[0-9.]+ +[0-9.]+% +\\d+ +0\\.[0-5]");
    }
    Result a = run("analyze", "--codec", "mxfp4,nvfp4", TestFiles.fixtures().resolve("f4_2d.npy").toString());
    assertThat(a.status()).as(a.err()).isZero();
    assertThat(a.out()).contains(" mxfp4 ").contains(" nvfp4 ");
    assertOneLineError(run(tiny(tmp.resolve("g"), "--compression", "mxfp4:g=64")),
        "mxfp4's format fixes its block size at 32");
  }

  /**
   * {@code --compression auto} on the CPU with one gate per direction: the report gives each site's codec with its
   * calibrated error, its direction's bound and why, the config the gate, and the TP bytes per collective kind and
   * direction (for {@code none}, which never calibrates, they add up to its TP bytes per step); a bad gate is one line
   * naming the option, before anything is made.
   */
  @Test
  void autoWithAGatePerDirectionReportsEachSitesCodecAndTheBytesPerKindAndDirection() throws Exception {
    Path text = Files.writeString(tmp.resolve("t.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    Path out = tmp.resolve("auto");
    Result r = run(tiny(out, "--data", text.toString(), "--compression", "none,auto", "--tp", "2", "--hidden-size",
        "64", "--link", "0.02", "--auto-max-error", "activations=0.05,gradients=0.3"));
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.out()).contains("auto: plans chosen per collective site by calibration");
    for (String site : new String[] {"layer0.attn.fwd", "layer0.mlp.fwd", "layer0.attn.bwd", "layer0.mlp.bwd"}) {
      String line = r.out().lines().filter(l -> l.startsWith("  " + site + " ")).findFirst().orElseThrow();
      boolean fwd = site.endsWith("fwd");
      double bound = fwd ? 0.05 : 0.3, relL2 = Double.parseDouble(line.replaceAll(".*rel L2 ([0-9.]+);.*", "$1"));
      assertThat(line).contains(fwd ? "(fwd gate rel L2 <= 0.0500)" : "(bwd gate rel L2 <= 0.300)");
      assertThat(relL2).as(line).isLessThanOrEqualTo(bound);
    }
    for (String codec : new String[] {"none", "auto"}) {
      assertThat(r.out()).containsPattern("(?m)^" + codec + " +bytes/step by kind, over all 4 steps: all-reduce bwd"
          + " \\d+, all-reduce fwd \\d+$");
    }
    JsonObject report = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
    assertThat(report.getAsJsonObject("config").get("auto_max_error").toString())
        .isEqualTo("{\"activations\":0.05,\"gradients\":0.3}");
    assertAllReduceBytesByDirection(report);
    JsonObject auto = report.getAsJsonArray("runs").get(1).getAsJsonObject();
    assertThat(auto.getAsJsonObject("plans").getAsJsonObject("layer0.mlp.bwd").get("choice").getAsString())
        .startsWith("predicted ms:").contains("(bwd gate rel L2 <= 0.300)");
    String[][] bad = {{"activations=0.05,weights=0.1", "--auto-max-error: unknown key 'weights'"},
        {"activations=", "--auto-max-error: activations has no value"},
        {"2", "--auto-max-error must be in (0, 1], got 2.0"},
        {"gradients=0", "--auto-max-error gradients must be in (0, 1], got 0.0"}};
    for (String[] b : bad) {
      Path never = tmp.resolve("never");
      assertOneLineError(run(tiny(never, "--compression", "auto", "--auto-max-error", b[0])), b[1]);
      assertThat(never).as(b[0]).doesNotExist();
    }
  }

  /**
   * A report of {@code none,auto} runs whose TP collectives are all-reduces: both runs' TP bytes by kind are per
   * direction, and {@code none}'s (which never calibrates) add up to its TP bytes per step.
   */
  static void assertAllReduceBytesByDirection(JsonObject report) {
    JsonObject none = report.getAsJsonArray("runs").get(0).getAsJsonObject();
    JsonObject kinds = none.getAsJsonObject("bytes_per_step_by_kind");
    assertThat(kinds.keySet()).containsExactly("all-reduce bwd", "all-reduce fwd");
    assertThat(kinds.get("all-reduce bwd").getAsDouble() + kinds.get("all-reduce fwd").getAsDouble())
        .isEqualTo(none.get("tp_bytes_per_step").getAsDouble());
    JsonObject auto = report.getAsJsonArray("runs").get(1).getAsJsonObject();
    assertThat(auto.getAsJsonObject("bytes_per_step_by_kind").keySet()).containsExactly("all-reduce bwd",
        "all-reduce fwd");
  }

  @Test
  void analyzeTakesCodecsWithSeveralParametersAndRefusesBadListsAndOutputs() throws Exception {
    Path npy = TestFiles.fixtures().resolve("f4_2d.npy");
    Result r = run("analyze", "--codec", "taco:e5m2,g=128,hadamard=off,none", npy.toString());
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.out()).contains("taco:e5m2,g=128,hadamard=off").contains(" none ");
    // a codec spec longer than the codec column's 24 characters widens it: the header and every row stay aligned
    String longSpec = "taco:e5m2,g=128,hadamard=off,alpha=0.5,nonfinite=propagate";
    Result wide = run("analyze", "--codec", longSpec + ",int8-group", npy.toString());
    assertThat(wide.status()).as(wide.err()).isZero();
    List<String> table = wide.out().lines().filter(l -> l.contains("B/elem") || l.contains("f4_2d")).toList();
    assertThat(table).hasSize(3);
    assertThat(table.get(1)).contains(longSpec);
    int end = table.get(0).indexOf("rel L2") + "rel L2".length();
    for (String row : table.subList(1, 3)) { // each row's relative error ends where the header's "rel L2" does
      assertThat(row.substring(end - 10, end)).as(row).matches(" *[0-9.]+e[-+][0-9]+");
      assertThat(row.length()).as(row).isEqualTo(table.get(0).length());
    }
    assertOneLineError(run("analyze", "--codec", ",", npy.toString()), "--codec: empty codec name");
    assertOneLineError(run("analyze", "--json", tmp.toString(), npy.toString()), "is a folder");
    Path input = Files.copy(npy, tmp.resolve("input.npy"));
    byte[] before = Files.readAllBytes(input);
    assertOneLineError(run("analyze", input.toString(), "--json", tmp.resolve("./input.npy").toString()),
        "is one of the input files");
    assertThat(input).hasBinaryContent(before);
    // a forgotten --json name takes the next path, here another tensor file: refused, the file kept, unless --overwrite
    Path other = Files.copy(npy, tmp.resolve("other.npy"));
    assertOneLineError(run("analyze", "--codec", "taco", "--json", other.toString(), npy.toString()),
        "--json " + other + " exists; give a new file name, or --overwrite");
    assertThat(other).hasSameBinaryContentAs(npy);
    Result replaced = run("analyze", "--codec", "taco", "--overwrite", "--json", other.toString(), npy.toString());
    assertThat(replaced.status()).as(replaced.err()).isZero();
    assertThat(Files.readString(other)).startsWith("{");
    Path file = Files.writeString(tmp.resolve("f"), "x");
    assertOneLineError(run("analyze", "--plots", file.toString(), npy.toString()), "exists and is not a folder");
    // refused before any work, in words (it was FileAlreadyExistsException, after the table)
    Result under = run("analyze", "--json", file.resolve("x.json").toString(), npy.toString());
    assertOneLineError(under, file + " is not a folder");
    assertThat(under.out()).doesNotContain("rel L2");
    assertOneLineError(run("analyze", "--json", file.resolve("deeper/x.json").toString(), npy.toString()),
        file + " is not a folder");
    // a folder whose permission bits say writable but that takes no file (/proc, even for root): before any work
    if (Files.isDirectory(Path.of("/proc/self"))) {
      Result proc = run("analyze", "--json", "/proc/taco-nope/x.json", npy.toString());
      assertOneLineError(proc, "--json folder /proc is not writable");
      assertThat(proc.out()).doesNotContain("rel L2");
    }
    // every input failed: no JSON, and the --plots folder made for the plots is gone again
    Path json = tmp.resolve("none.json"), plots = tmp.resolve("none-plots");
    Result none = run("analyze", "--json", json.toString(), "--plots", plots.toString(),
        tmp.resolve("missing.npy").toString());
    assertThat(none.status()).isEqualTo(2);
    assertThat(none.out()).doesNotContain("wrote");
    assertThat(json).doesNotExist();
    assertThat(plots).doesNotExist();
    // a train --out under a file: the reason in words
    assertOneLineError(run("train", "--steps", "1", "--out", file.resolve("run").toString()), "Not a directory");
  }

  @Test
  void analyzeReportsNonFiniteAndEmptyTensorsInTheTable() throws Exception {
    Path nan = TestFiles.npyF32(tmp.resolve("nan.npy"), "(2, 3)", 1, 2, 3, 4, Float.NaN, 6);
    Path empty = TestFiles.npyF32(tmp.resolve("empty.npy"), "(0, 3)");
    Result r = run("analyze", "--codec", "int8-group,taco", nan.toString(), empty.toString());
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.out()).contains("non-finite input NaN at index 4 (row 1, col 1)")
        .contains("zero-size tensor, skipped");
    assertThat(r.out().lines().filter(l -> l.contains("index 4")).count()).isEqualTo(2);
  }

  @Test
  void analyzeFixesANewUserTrippedOver() throws Exception {
    // an all-zero tensor: exact, so SNR is infinite beside cosine 1 (it was NaN beside 1.0)
    Path zeros = TestFiles.safetensors(tmp.resolve("z.safetensors"), st("z", 256), TestFiles.f32(new float[256]));
    Result z = run("analyze", zeros.toString(), "--codec", "taco");
    assertThat(z.status()).as(z.err()).isZero();
    assertThat(z.out()).contains("Infinity").doesNotContain("NaN");
    // a 1000 x 1 tensor is measured along its 1000 values, not padded to a group per row (69 bytes per element)
    float[] col = new float[1000];
    java.util.SplittableRandom rnd = new java.util.SplittableRandom();
    for (int i = 0; i < col.length; i++) col[i] = (float) rnd.nextGaussian();
    Path narrow = TestFiles.safetensors(tmp.resolve("n.safetensors"),
        "{\"c\": {\"dtype\": \"F32\", \"shape\": [1000, 1], \"data_offsets\": [0, 4000]}}", TestFiles.f32(col));
    Path json = tmp.resolve("n.json");
    Result n = run("analyze", narrow.toString(), "--codec", "taco", "--json", json.toString());
    assertThat(n.status()).as(n.err()).isZero();
    JsonObject row = JsonParser.parseString(Files.readString(json)).getAsJsonObject().getAsJsonArray("results").get(0)
        .getAsJsonObject();
    assertThat(row.get("codec").getAsString()).isEqualTo("taco (columns)");
    assertThat(row.get("bytes_per_element").getAsDouble()).isLessThan(1.2);
    assertThat(row.get("rel_l2").getAsDouble()).isBetween(1e-4, 0.1);
    // a file with no tensors is said to hold none (it printed nothing and exited 0)
    Path none = TestFiles.safetensors(tmp.resolve("none.safetensors"), "{}", new byte[0]);
    Result nothing = run("analyze", none.toString());
    assertThat(nothing.status()).isZero();
    assertThat(nothing.err()).contains("none.safetensors: holds no tensors");
    // every file failed: the errors and no table header
    Result bad = run("analyze", tmp.resolve("missing.npy").toString());
    assertThat(bad.status()).isEqualTo(2);
    assertThat(bad.out()).doesNotContain("rel L2");
    // the JSON library's advice and its JSON path stay out of the one-line error
    String deep = "{\"a\":".repeat(400) + "1" + "}".repeat(400);
    Path nested = TestFiles.safetensors(tmp.resolve("deep.safetensors"), deep, new byte[0]);
    Result d = run("analyze", nested.toString());
    assertThat(d.status()).isEqualTo(2);
    String line = d.err().strip();
    assertThat(line).doesNotContain("http").doesNotContain("setStrictness").doesNotContain("$.a");
    assertThat(line.length()).as(line).isLessThan(300);
    Path junk = TestFiles.safetensors(tmp.resolve("junk.safetensors"), "{\"x\": nope}", new byte[0]);
    assertThat(run("analyze", junk.toString()).err()).contains("not valid JSON").doesNotContain("http")
        .containsPattern("not valid JSON: \\S+.*line 1 column");
  }

  @Test
  void analyzeMalformedFilesGiveOneLineErrors() throws Exception {
    Path fixtures = TestFiles.fixtures();
    byte[] good = Files.readAllBytes(fixtures.resolve("f4_1d.npy"));
    Path truncated = Files.write(tmp.resolve("trunc.npy"), java.util.Arrays.copyOf(good, 40));
    assertOneLineError(run("analyze", truncated.toString()), "taco: error: " + truncated + ": truncated");
    Path lying = TestFiles.safetensors(tmp.resolve("lie.safetensors"), st("w", 8), TestFiles.f32(1, 2, 3, 4));
    assertOneLineError(run("analyze", lying.toString()), "lie outside the data section");
    assertOneLineError(run("analyze", fixtures.resolve("bad_int32.npy").toString()),
        "'<i4' (integer) is not supported");
    Path text = Files.writeString(tmp.resolve("notes.txt"), "hello");
    assertOneLineError(run("analyze", text.toString()), "not a .npy or .safetensors file");
    assertOneLineError(run("analyze", tmp.resolve("missing.npy").toString()), "file not found");
    assertOneLineError(run("analyze", "--codec", "zip", text.toString()), "unknown codec 'zip'");
    // one bad file among good ones: the good ones are still analysed, the exit status is still non-zero
    Result mixed = run("analyze", "--codec", "int8-group", fixtures.resolve("f4_1d.npy").toString(),
        truncated.toString());
    assertThat(mixed.status()).isEqualTo(2);
    assertThat(mixed.out()).contains("f4_1d.npy");
    assertThat(mixed.err().strip().lines().count()).isEqualTo(1);
  }

  /**
   * {@code --codec-error-interval}: the codec table samples every N-th step of rank 0's TP tensors (4 steps at interval 2:
   * steps 0 and 2, two sites of one layer a step); 0 samples nothing and prints no codec table; a negative value is a
   * one-line error naming the flag.
   */
  @Test
  void codecErrorIntervalSetsHowOftenTheCodecErrorIsSampled() throws Exception {
    Result every2 = run(tiny(tmp.resolve("a"), "--tp", "2", "--compression", "taco", "--calibration-steps", "0",
        "--codec-error-interval", "2"));
    assertThat(every2.status()).as(every2.err()).isZero();
    assertThat(every2.out()).containsPattern("(?m)^taco +fwd .* 4$").containsPattern("(?m)^taco +bwd .* 4$");
    Result never = run(tiny(tmp.resolve("b"), "--tp", "2", "--compression", "taco", "--calibration-steps", "0",
        "--codec-error-interval", "0"));
    assertThat(never.status()).as(never.err()).isZero();
    assertThat(never.out()).doesNotContain("rel L2");
    assertThat(java.nio.file.Files.readString(tmp.resolve("b/report.json"))).contains("\"codec_error_interval\": 0");
    assertOneLineError(run(tiny(tmp.resolve("c"), "--codec-error-interval", "-1")),
        "--codec-error-interval must be >= 0");
  }
}
