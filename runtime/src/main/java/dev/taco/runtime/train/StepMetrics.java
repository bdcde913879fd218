package dev.taco.runtime.train;

import dev.taco.runtime.AtomicFile;
import dev.taco.runtime.JsonFiles;
import java.io.Closeable;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The per-step metrics file ({@code metrics.jsonl} in the run's output folder), as Megatron-LM's and PyTorch's loggers
 * keep one: a JSON object per line and training step of every codec's run, written and flushed as the step ends, so
 * that {@code tail -f} or a plotting script follows a run as it goes and a run that is killed keeps its steps. A line
 * holds {@code codec}, {@code step}, {@code loss} (training, nats per byte), {@code val_loss} (null where the step was
 * not evaluated), {@code lr}, {@code grad_norm} (the global gradient norm before clipping), {@code tokens_per_s} (of
 * this step alone, evaluation left out) and {@code tp_bytes} (the bytes all ranks put on the wire in the step's TP
 * collectives, as the report's TP bytes per step counts them).
 */
public final class StepMetrics implements Closeable {
  private static final Logger log = LoggerFactory.getLogger(StepMetrics.class);

  private final Path file;
  private final boolean append;
  private Writer out;
  private boolean failed;

  /**
   * The metrics file {@code file}, created (replacing one of an earlier run) with the first line, so that a run that
   * fails before its first step leaves none.
   */
  public StepMetrics(Path file) {
    this(file, false);
  }

  /**
   * As {@link #StepMetrics(Path)}, but with {@code append} the lines go after those already in {@code file}: a run
   * resumed with {@code --load} keeps the steps its earlier calls wrote.
   */
  public StepMetrics(Path file, boolean append) {
    this.file = file;
    this.append = append;
  }

  /**
   * Writes and flushes one step's line. A write that fails (a full disk) is a warning, once: the run goes on without
   * its later lines.
   */
  synchronized void write(String codec, int step, float loss, Double valLoss, float lr, float gradNorm,
      double tokensPerSecond, long tpBytes) {
    if (failed) return;
    Map<String, Object> line = new LinkedHashMap<>();
    line.put("codec", codec);
    line.put("step", step);
    line.put("loss", loss);
    line.put("val_loss", valLoss);
    line.put("lr", lr);
    line.put("grad_norm", gradNorm);
    line.put("tokens_per_s", tokensPerSecond);
    line.put("tp_bytes", tpBytes);
    try {
      if (out == null) {
        out = append
            ? Files.newBufferedWriter(file, StandardCharsets.UTF_8, java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.APPEND)
            : Files.newBufferedWriter(file, StandardCharsets.UTF_8);
      }
      out.write(JsonFiles.toJsonLine(line));
      out.write('\n');
      out.flush();
    } catch (IOException e) {
      failed = true;
      log.warn("cannot write {} ({}): the run goes on without its per-step metrics", file, AtomicFile.why(e));
    }
  }

  /** Closes the file; a close that fails is a warning (every line was flushed when written). */
  @Override
  public synchronized void close() {
    if (out == null) return;
    try {
      out.close();
    } catch (IOException e) {
      log.warn("cannot close {}: {}", file, AtomicFile.why(e));
    }
  }
}
