package dev.taco.kernels.compiler;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs nvcc from PATH (tests only): a compile check of generated CUDA C. */
final class Nvcc {
  private Nvcc() {}

  /** The nvcc executable on PATH, or null. */
  static Path find() {
    String path = System.getenv("PATH");
    if (path == null) {
      return null;
    }
    for (String dir : path.split(java.io.File.pathSeparator)) {
      Path p = Path.of(dir, "nvcc");
      if (Files.isExecutable(p)) {
        return p;
      }
    }
    return null;
  }

  /** Exit status and combined output of {@code nvcc args...}. */
  record Result(int exit, String log) {}

  static Result run(List<String> args) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>();
    cmd.add(find().toString());
    cmd.addAll(args);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(300, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      return new Result(-1, log + "\n(timeout)");
    }
    return new Result(p.exitValue(), log);
  }
}
