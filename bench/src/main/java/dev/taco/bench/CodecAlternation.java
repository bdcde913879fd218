package dev.taco.bench;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.openjdk.jmh.annotations.Param;

/**
 * Every codec's encode and decode on this build and on an earlier build, each as a fraction of a copy, measured side
 * by side in one JVM (docs/design.md §7: a gain is a ratio of two times taken side by side). The earlier build's codec classes come from its
 * own class path in a class loader of their own, so both run in the same process, on the same input
 * ({@link CodecBench.Data}: 1024 x 1024 float32 activations with outlier channels), the same threads and caches.
 *
 * <p>Per codec and direction, after {@code warmup} rounds, each of {@code rounds} rounds runs a slice of about
 * {@code slice} ms of {@code System.arraycopy} of the 4 MiB input, one of this build's codec and one of the earlier
 * build's (the two in turn first, round by round), and takes each codec's fraction {@code copy time / codec time}
 * of that round and their quotient, the gain. Reported: the median and quartiles over the rounds. On a shared
 * 2-core VM whose cores change speed from second to second, JMH runs of the two builds minutes apart gave fractions
 * with 99.9 % intervals of +-30-50 %; in one round both see the same machine.
 *
 * <p>Arguments: {@code baseline=CLASSPATH} (the earlier build's jars, with its slf4j; required),
 * {@code codecs=a,b} (default: {@link CodecBench.CodecState#codec}'s list), {@code rounds=40}, {@code warmup=10},
 * {@code slice=20}.
 * Prints a markdown table, then one line of JSON: a list with, per codec, {@code encode_fraction},
 * {@code encode_fraction_q1}/{@code _q3}, {@code reference_encode_fraction}, {@code encode_fraction_gain} (the median
 * round's gain) and its quartiles, {@code copy_gbps}, the same for decode, and the load.
 */
public final class CodecAlternation {
  private CodecAlternation() {}

  /** One build's codec: encode and decode bound to its payload. */
  private record Side(Object codec, MethodHandle encode, MethodHandle decode, byte[] payload) {
    static Side of(ClassLoader loader, String spec, float[] x) throws Throwable {
      Object c = loader.loadClass("dev.taco.codec.Codecs").getMethod("byName", String.class).invoke(null, spec);
      MethodHandles.Lookup l = MethodHandles.publicLookup();
      Class<?> k = c.getClass();
      MethodHandle size = l.findVirtual(k, "encodedSize", MethodType.methodType(int.class, int.class, int.class));
      MethodHandle enc = l.findVirtual(k, "encode",
          MethodType.methodType(int.class, float[].class, int.class, int.class, int.class, byte[].class, int.class));
      MethodHandle dec = l.findVirtual(k, "decode",
          MethodType.methodType(int.class, byte[].class, int.class, int.class, float[].class, int.class,
              boolean.class));
      byte[] p = new byte[(int) size.invoke(c, CodecBench.ROWS, CodecBench.COLS)];
      enc.invoke(c, x, 0, CodecBench.ROWS, CodecBench.COLS, p, 0);
      return new Side(c, enc, dec, p);
    }

    void run(boolean encode, float[] x, float[] y) throws Throwable {
      if (encode) {
        this.encode.invoke(codec, x, 0, CodecBench.ROWS, CodecBench.COLS, payload, 0);
      } else {
        decode.invoke(codec, payload, 0, payload.length, y, 0, false);
      }
    }
  }

  /** Nanoseconds per call over a slice of about {@code sliceMs}: a copy when {@code side} is null. */
  private static double slice(Side side, boolean encode, float[] x, float[] y, int sliceMs) throws Throwable {
    long t0 = System.nanoTime();
    long t;
    int calls = 0;
    do {
      if (side == null) {
        System.arraycopy(x, 0, y, 0, x.length);
      } else {
        side.run(encode, x, y);
      }
      calls++;
      t = System.nanoTime();
    } while (t - t0 < sliceMs * 1_000_000L);
    return (t - t0) / (double) calls;
  }

  /**
   * Runs the comparison (arguments in the class notes).
   *
   * @throws IllegalArgumentException without {@code baseline=}, or for an unknown argument
   */
  public static void main(String[] args) throws Throwable {
    String codecs = String.join(",", CodecBench.CodecState.class.getField("codec").getAnnotation(Param.class).value());
    Map<String, String> a = Alternation.arguments(args, Map.of("codecs", codecs, "rounds", "40", "warmup", "10",
        "slice", "20"));
    ClassLoader baseline = Alternation.baseline(a.get("baseline"));
    int rounds = Integer.parseInt(a.get("rounds"));
    int warmup = Integer.parseInt(a.get("warmup"));
    int sliceMs = Integer.parseInt(a.get("slice"));
    CodecBench.Data d = new CodecBench.Data();
    d.setup();
    StringBuilder table = new StringBuilder(String.format(Locale.ROOT, "%d x %d float32 per call; %d rounds of "
        + "%d ms slices (copy, this build, the baseline); fraction = copy time / codec time, median [quartiles]%n%n"
        + "| codec | way | fraction | baseline fraction | gain | copy GB/s | load |%n|---|---|---|---|---|---|---|%n",
        CodecBench.ROWS, CodecBench.COLS, rounds, sliceMs));
    List<String> json = new ArrayList<>();
    for (String spec : a.get("codecs").split(",")) {
      StringBuilder entry = new StringBuilder("{\"codec\": \"" + spec + "\"");
      Side current = Side.of(CodecAlternation.class.getClassLoader(), spec, d.x);
      Side earlier = Side.of(baseline, spec, d.x);
      for (boolean encode : new boolean[] {true, false}) {
        String way = encode ? "encode" : "decode";
        double[] cur = new double[rounds];
        double[] old = new double[rounds];
        double[] gain = new double[rounds];
        double[] copy = new double[rounds];
        for (int r = -warmup; r < rounds; r++) {
          double c = slice(null, encode, d.x, d.y, sliceMs);
          boolean currentFirst = (r & 1) == 0;
          double t1 = slice(currentFirst ? current : earlier, encode, d.x, d.y, sliceMs);
          double t2 = slice(currentFirst ? earlier : current, encode, d.x, d.y, sliceMs);
          if (r >= 0) {
            cur[r] = c / (currentFirst ? t1 : t2);
            old[r] = c / (currentFirst ? t2 : t1);
            gain[r] = cur[r] / old[r];
            copy[r] = CodecBench.BYTES / c;
          }
        }
        String load = Alternation.load();
        double[] cq = Alternation.quartiles(cur);
        double[] oq = Alternation.quartiles(old);
        double[] gq = Alternation.quartiles(gain);
        double copyGbps = Alternation.quartiles(copy)[1];
        table.append(String.format(Locale.ROOT, "| %s | %s | %.3f [%.3f-%.3f] | %.4f [%.4f-%.4f] | %.1fx [%.1f-%.1f] "
            + "| %.2f | %s |%n", spec, way, cq[1], cq[0], cq[2], oq[1], oq[0], oq[2], gq[1], gq[0], gq[2], copyGbps,
            load));
        entry.append(String.format(Locale.ROOT, ", \"%1$s_fraction\": %2$.4f, \"%1$s_fraction_q1\": %3$.4f, "
            + "\"%1$s_fraction_q3\": %4$.4f, \"reference_%1$s_fraction\": %5$.4f, \"%1$s_fraction_gain\": %6$.2f, "
            + "\"%1$s_gain_q1\": %7$.2f, \"%1$s_gain_q3\": %8$.2f, \"%9$s\": %10$.2f, \"%1$s_load\": \"%11$s\"", way,
            cq[1], cq[0], cq[2], oq[1], gq[1], gq[0], gq[2], encode ? "copy_gbps" : "decode_copy_gbps", copyGbps,
            load));
      }
      json.add(entry.append(", \"rounds\": ").append(rounds).append(", \"slice_ms\": ").append(sliceMs).append('}')
          .toString());
    }
    System.out.print(table);
    System.out.println("[" + String.join(", ", json) + "]");
  }
}
