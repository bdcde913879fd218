package dev.taco.bench;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@link TrainStepBench}'s step (the default model, TP = 2 as two threads) on this build and on an earlier build,
 * taking turns in one JVM, so that the speed-up is a ratio of two times measured side by side (a speed-up over an
 * earlier build means something only on the same machine in the same run). The earlier build's classes, with {@link
 * TrainStepBench} compiled against them ({@code bench/run-train-step.sh} does both), load in a class loader of their
 * own; each side builds its two ranks once per codec.
 *
 * <p>Per codec, after {@code warmup} rounds (the taco plans calibrate in them, as in the JMH warm-up), each of
 * {@code rounds} rounds runs whole steps of one side for about {@code slice} ms, then of the other (the two in turn
 * first), and takes each side's mean step time and their quotient. Reported: medians and quartiles over the rounds.
 * On the shared 2-core VM, the same JMH benchmark run for one build, then the other, gave speed-ups of 1.4x to 3.4x
 * for the same two builds within ten minutes, since a core's speed changes from one second to the next.
 *
 * <p>Arguments: {@code baseline=CLASSPATH} (required), {@code codecs=none,taco}, {@code rounds=20}, {@code warmup=5},
 * {@code slice=1500}. Prints a markdown table, then one line of JSON: per codec {@code ms} and {@code baseline_ms} (the
 * medians over the rounds), {@code speedup} (the median round's quotient), its quartiles, rounds and load.
 */
public final class TrainStepAlternation {
  private TrainStepAlternation() {}

  /** One build's two ranks and its step. */
  private record Side(Object bench, Method step, Object ranks, Method tearDown) {
    static Side of(ClassLoader loader, String codec) throws ReflectiveOperationException {
      Class<?> ranksClass = loader.loadClass("dev.taco.bench.TrainStepBench$Ranks");
      Object ranks = ranksClass.getConstructor().newInstance();
      ranksClass.getField("codec").set(ranks, codec);
      ranksClass.getMethod("setup").invoke(ranks);
      Class<?> benchClass = loader.loadClass("dev.taco.bench.TrainStepBench");
      return new Side(benchClass.getConstructor().newInstance(), benchClass.getMethod("step", ranksClass), ranks,
          ranksClass.getMethod("tearDown"));
    }

    /** Milliseconds per step over whole steps for about {@code sliceMs}. */
    double slice(int sliceMs) throws ReflectiveOperationException {
      long t0 = System.nanoTime();
      long t;
      int steps = 0;
      do {
        step.invoke(bench, ranks);
        steps++;
        t = System.nanoTime();
      } while (t - t0 < sliceMs * 1_000_000L);
      return (t - t0) / 1e6 / steps;
    }
  }

  /**
   * Runs the comparison (arguments in the class notes).
   *
   * @throws IllegalArgumentException without {@code baseline=}, for a missing class path entry or an unknown argument
   */
  public static void main(String[] args) throws Exception {
    Map<String, String> a = Alternation.arguments(args, Map.of("codecs", "none,taco", "rounds", "20", "warmup",
        "5", "slice", "1500"));
    ClassLoader baseline = Alternation.baseline(a.get("baseline"));
    int rounds = Integer.parseInt(a.get("rounds"));
    int warmup = Integer.parseInt(a.get("warmup"));
    int sliceMs = Integer.parseInt(a.get("slice"));
    StringBuilder table = new StringBuilder(String.format(Locale.ROOT, "%d rounds of %d ms of steps per side; "
        + "median [quartiles]%n%n| codec | ms/step | baseline ms/step | speed-up | load |%n|---|---|---|---|---|%n",
        rounds, sliceMs));
    List<String> json = new ArrayList<>();
    for (String codec : a.get("codecs").split(",")) {
      Side current = Side.of(TrainStepAlternation.class.getClassLoader(), codec);
      Side earlier = Side.of(baseline, codec);
      double[] cur = new double[rounds];
      double[] old = new double[rounds];
      double[] speedup = new double[rounds];
      for (int r = -warmup; r < rounds; r++) {
        boolean currentFirst = (r & 1) == 0;
        double t1 = (currentFirst ? current : earlier).slice(sliceMs);
        double t2 = (currentFirst ? earlier : current).slice(sliceMs);
        if (r >= 0) {
          cur[r] = currentFirst ? t1 : t2;
          old[r] = currentFirst ? t2 : t1;
          speedup[r] = old[r] / cur[r];
        }
      }
      current.tearDown.invoke(current.ranks);
      earlier.tearDown.invoke(earlier.ranks);
      double[] c = Alternation.quartiles(cur);
      double[] o = Alternation.quartiles(old);
      double[] s = Alternation.quartiles(speedup);
      String load = Alternation.load();
      table.append(String.format(Locale.ROOT, "| %s | %.1f [%.1f-%.1f] | %.1f [%.1f-%.1f] | %.2fx [%.2f-%.2f] | %s |%n",
          codec, c[1], c[0], c[2], o[1], o[0], o[2], s[1], s[0], s[2], load));
      json.add(String.format(Locale.ROOT, "\"%s\": {\"ms\": %.3f, \"baseline_ms\": %.3f, \"speedup\": %.3f, "
          + "\"speedup_q1\": %.3f, \"speedup_q3\": %.3f, \"ms_q1\": %.3f, \"ms_q3\": %.3f, \"baseline_ms_q1\": %.3f, "
          + "\"baseline_ms_q3\": %.3f, \"rounds\": %d, \"slice_ms\": %d, \"load\": \"%s\"}", codec, c[1], o[1], s[1],
          s[0], s[2], c[0], c[2], o[0], o[2], rounds, sliceMs, load));
    }
    System.out.print(table);
    System.out.println("{" + String.join(", ", json) + "}");
  }
}
