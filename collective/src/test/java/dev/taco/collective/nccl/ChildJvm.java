package dev.taco.collective.nccl;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * A rank in a JVM of its own, as torchrun starts one per GPU: this JVM's java and classpath (under Maven's surefire or
 * the JUnit console launcher that runs the GPU tests), the given environment on top of this one's, stdout and stderr
 * merged and collected line by line on a thread.
 */
final class ChildJvm implements AutoCloseable {
  final Process process;
  final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
  private final StringBuffer all = new StringBuffer();

  ChildJvm(Class<?> main, Map<String, String> env, String... args) {
    List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"), "-cp",
        classPath(), main.getName()));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().putAll(env);
    try {
      process = pb.start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
        for (String l; (l = r.readLine()) != null;) {
          all.append(l).append('\n');
          lines.add(l);
        }
      } catch (IOException e) {
        all.append("(reading the child's output failed: ").append(e).append(")\n");
      }
    }, "child-output");
    reader.setDaemon(true);
    reader.start();
  }

  /** The first line starting with {@code prefix} within {@code seconds}, or null. */
  String await(String prefix, double seconds) throws InterruptedException {
    long end = System.nanoTime() + (long) (seconds * 1e9);
    for (long left; (left = end - System.nanoTime()) > 0;) {
      String l = lines.poll(left, java.util.concurrent.TimeUnit.NANOSECONDS);
      if (l != null && l.startsWith(prefix)) return l;
    }
    return null;
  }

  /** Everything the child printed so far. */
  String output() {
    return all.toString();
  }

  /** The classpath this JVM's classes came from: a URL class loader's URLs (JUnit's console launcher), then -cp. */
  private static String classPath() {
    List<String> parts = new ArrayList<>();
    if (ChildJvm.class.getClassLoader() instanceof URLClassLoader u) {
      for (URL url : u.getURLs()) {
        try {
          parts.add(Path.of(url.toURI()).toString());
        } catch (URISyntaxException e) {
          throw new IllegalStateException(e);
        }
      }
    }
    parts.add(System.getProperty("java.class.path"));
    return String.join(File.pathSeparator, parts);
  }

  @Override
  public void close() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor(10, java.util.concurrent.TimeUnit.SECONDS);
  }
}
