package dev.taco.bench;

import java.io.File;
import java.io.IOException;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What {@link CodecAlternation} and {@link TrainStepAlternation} share: their {@code key=value} arguments, the class
 * loader of the earlier build they run beside this one, quartiles over rounds, and the load average.
 */
final class Alternation {
  private Alternation() {}

  /**
   * {@code defaults} overridden by {@code key=value} arguments, plus the required {@code baseline=CLASSPATH}.
   *
   * @throws IllegalArgumentException for an argument that is not {@code key=value} of a known key, or without
   *     {@code baseline=}
   */
  static Map<String, String> arguments(String[] args, Map<String, String> defaults) {
    Map<String, String> a = new LinkedHashMap<>(defaults);
    for (String arg : args) {
      String[] kv = arg.split("=", 2);
      if (kv.length != 2 || !(a.containsKey(kv[0]) || kv[0].equals("baseline"))) {
        throw new IllegalArgumentException("unknown argument '" + arg + "' (baseline=CLASSPATH, then any of "
            + defaults.keySet() + " as key=value)");
      }
      a.put(kv[0], kv[1]);
    }
    if (!a.containsKey("baseline")) {
      throw new IllegalArgumentException("baseline=CLASSPATH (the earlier build's class path) is required");
    }
    return a;
  }

  /**
   * A class loader over the earlier build's class path (entries separated by {@link File#pathSeparator}) whose parent
   * is the platform loader, so that none of this build's classes is seen from it.
   *
   * @throws IllegalArgumentException naming a class path entry that does not exist
   */
  static ClassLoader baseline(String classPath) throws MalformedURLException {
    List<URL> urls = new ArrayList<>();
    for (String p : classPath.split(File.pathSeparator)) {
      if (!Files.exists(Path.of(p))) throw new IllegalArgumentException("baseline class path entry " + p + " missing");
      urls.add(Path.of(p).toUri().toURL());
    }
    return new URLClassLoader(urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader());
  }

  /** First quartile, median, third quartile of {@code v} (the lower middle element for an even count). */
  static double[] quartiles(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    int n = s.length;
    return new double[] {s[(n - 1) / 4], s[(n - 1) / 2], s[3 * (n - 1) / 4]};
  }

  /** The 1, 5 and 15 minute load averages, or "?" where /proc/loadavg cannot be read. */
  static String load() {
    try {
      String[] f = Files.readString(Path.of("/proc/loadavg")).split(" ");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (IOException | RuntimeException e) {
      return "?";
    }
  }
}
