package dev.taco.codec;

import static org.assertj.core.api.Assertions.assertThat;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.simd.RowSplit;
import dev.taco.kernels.simd.Simd;
import dev.taco.kernels.simd.SimdSeeds;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Supplier;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every codec's SIMD path ({@link Simd#enabled}) against its scalar reference ({@link Simd#reference}), bit for bit:
 * payload bytes and saturation counts, the refusal of NaN/Inf (same exception, same message), decoded floats
 * (overwrite and accumulate; NaNs compared as NaN, see {@link #bits}), decode-reduce (with and without the caller's
 * own part, in place), and the verdict on corrupted bodies. Inputs are fresh random (the seed is printed and named in
 * every failure; {@code -Dtaco.seed} replays it) and awkward: shapes not a multiple of the lanes or of G, single
 * elements, zeros and -0, groups 2^40 apart, the whole float32 range,
 * subnormals, rows so small that the decode multipliers are subnormal, values on rounding ties, values near
 * {@link Float#MAX_VALUE}, and NaN/Inf (whole rows and groups included) under both policies.
 */
class SimdIdentityTest {

  static long seed;

  @BeforeAll
  static void seed() {
    seed = SimdSeeds.fresh("SimdIdentityTest");
  }

  static List<String> specs() {
    List<String> s = new ArrayList<>(Codecs.names());
    s.addAll(List.of("int8-group:g=32", "int4-group:g=128", "int4-group:g=256", "fp8-group:g=32", "hadamard-int8:g=32",
        "hadamard-int8:g=256", "taco:g=32", "taco:g=256", "taco:e5m2,g=128", "taco:alpha=0.5", "taco-no-ds:e5m2",
        "taco-no-hadamard:g=32,e5m2", "taco:hadamard=off,g=256", "mxfp4:hadamard=off", "nvfp4:hadamard=on"));
    return s;
  }

  /** Rows x cols; 9 x 64, 3 x 256 and 2 x 512 hold whole groups in every row (the group codecs' one flat decode). */
  static final int[][] SHAPES = {{1, 1}, {1, 7}, {2, 16}, {3, 17}, {2, 33}, {5, 100}, {3, 129}, {2, 300}, {4, 257},
      {1, 1000}, {9, 64}, {3, 256}, {2, 512}};

  static final String[] INPUTS = {"gaussian", "heavy", "wide40", "range", "subnormal", "tinyRows", "zeros", "sparse",
      "ties", "huge", "nonfinite", "nanRows"};

  /** Input {@code kind}, {@code rows x cols}, from {@code s}. */
  static float[] input(String kind, long s, int rows, int cols) {
    int n = rows * cols;
    SplittableRandom r = new SplittableRandom(s);
    float[] x = switch (kind) {
      case "gaussian" -> Inputs.gaussian(s, n);
      case "heavy" -> Inputs.heavyTailed(s, n);
      case "wide40" -> Inputs.wideGroups(s, rows, cols, 32 << r.nextInt(4), 40);
      case "tinyRows" -> scaled(Inputs.wideGroups(s, rows, cols, 32 << r.nextInt(4), 30), -115);
      case "huge" -> scaled(Inputs.gaussian(s, n), 124);
      default -> new float[n];
    };
    for (int i = 0; i < n; i++) {
      switch (kind) {
        case "range" -> x[i] = (float) Math.scalb(r.nextGaussian(), r.nextInt(-149, 127));
        case "subnormal" -> x[i] = Float.intBitsToFloat(r.nextInt(1 << r.nextInt(1, 24)) | (r.nextBoolean() ? 1 << 31
            : 0));
        case "zeros" -> x[i] = r.nextInt(5) == 0 ? -0f : 0f;
        case "sparse" -> x[i] = r.nextInt(40) == 0 ? (float) r.nextGaussian() : r.nextBoolean() ? 0f : -0f;
        case "ties" -> x[i] = (float) Math.scalb(r.nextInt(-512, 513) / 16.0 + (r.nextBoolean() ? 1 / 32.0 : 0),
            r.nextInt(-3, 4));
        case "huge" -> x[i] = r.nextInt(50) == 0 ? Math.copySign(Float.MAX_VALUE, x[i]) : x[i];
        default -> {}
      }
    }
    if (kind.equals("nonfinite") || kind.equals("nanRows")) {
      x = Inputs.heavyTailed(s, n);
      float[] special = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, -Float.NaN};
      for (int k = r.nextInt(1, 5); k > 0; k--) {
        x[r.nextInt(n)] = special[r.nextInt(4)];
      }
      if (kind.equals("nanRows")) {
        int row = r.nextInt(rows);
        for (int c = 0; c < cols; c++) {
          x[row * cols + c] = c % 3 == 0 ? 0f : special[r.nextInt(4)];
        }
      }
    }
    return x;
  }

  static float[] scaled(float[] x, int e) {
    for (int i = 0; i < x.length; i++) {
      x[i] = Math.scalb(x[i], e);
    }
    return x;
  }

  /** What an encode gave: the payload and saturation count, or the exception's class and message. */
  record Outcome(byte[] payload, long saturated, String error) {
    static Outcome of(Supplier<Outcome> op) {
      try {
        return op.get();
      } catch (RuntimeException e) {
        return new Outcome(null, 0, e.getClass().getName() + ": " + e.getMessage());
      }
    }
  }

  static Outcome encode(AbstractCodec c, float[] x, int off, int rows, int cols) {
    return Outcome.of(() -> {
      byte[] out = new byte[c.encodedSize(rows, cols) + 3];
      EncodeResult r = c.encodeWithStats(x, off, rows, cols, out, 3);
      return new Outcome(out, r.saturated(), null);
    });
  }

  /**
   * The bits of each value, every NaN as {@link Float#NaN}'s: a NaN that float arithmetic makes from Inf or NaN
   * operands (a WHT whose sums overflow, say) has the sign and payload of whichever operand the instruction form
   * favours, which C2 may choose differently even for the scalar reference (it commutes adds); where a NaN is, is
   * compared exactly.
   */
  static int[] bits(float[] v) {
    int[] b = new int[v.length];
    for (int i = 0; i < v.length; i++) {
      b[i] = Float.floatToIntBits(v[i]);
    }
    return b;
  }

  /** Decodes (overwriting, then accumulating onto {@code base}), both results' bits; the error message if rejected. */
  static Object decode(AbstractCodec c, byte[] p, int n, float[] base) {
    try {
      float[] y = new float[n + 1];
      c.decode(p, 3, p.length - 3, y, 1, false);
      float[] acc = base.clone();
      c.decode(p, 3, p.length - 3, acc, 0, true);
      return List.of(Arrays.toString(bits(y)), Arrays.toString(bits(acc)));
    } catch (MalformedPayloadException e) {
      return e.getMessage();
    }
  }

  static <T> T reference(Supplier<T> op) {
    return Simd.reference(op);
  }

  @ParameterizedTest
  @MethodSource("specs")
  void encodeAndDecodeAreBitIdenticalToTheReference(String spec) {
    SplittableRandom rnd = new SplittableRandom(seed ^ spec.hashCode());
    for (String policy : new String[] {"", "nonfinite=propagate"}) {
      AbstractCodec c = Codecs.byName(spec + (policy.isEmpty() ? "" : (spec.contains(":") ? "," : ":") + policy));
      for (int[] shape : SHAPES) {
        for (String kind : INPUTS) {
          long s = rnd.nextLong();
          int rows = shape[0];
          int cols = shape[1];
          float[] x = input(kind, s, rows, cols);
          float[] padded = new float[x.length + 2];
          System.arraycopy(x, 0, padded, 2, x.length);
          String what = String.format("seed %d: %s, %s %dx%d (input seed %d)", seed, c, kind, rows, cols, s);
          Outcome simd = encode(c, padded, 2, rows, cols);
          Outcome ref = reference(() -> encode(c, padded, 2, rows, cols));
          assertThat(simd.error()).as(what).isEqualTo(ref.error());
          if (ref.error() != null) { // NaN/Inf refused, (hadamard-int8) a transform that overflows float32, or
            // (mxfp4, nvfp4) a value beyond their range
            assertThat(ref.error()).as(what).containsAnyOf("non-finite input",
                c.name().startsWith("hadamard") ? "overflows float32" : "non-finite input",
                CodecPropertiesTest.clipsByDesign(spec) ? "above 2^119" : "non-finite input");
            continue;
          }
          assertThat(simd.payload()).as(what).isEqualTo(ref.payload());
          assertThat(simd.saturated()).as(what).isEqualTo(ref.saturated());
          float[] base = Inputs.gaussian(s + 1, rows * cols);
          assertThat(decode(c, simd.payload(), rows * cols, base)).as(what)
              .isEqualTo(reference(() -> decode(c, simd.payload(), rows * cols, base)));
        }
      }
    }
  }

  @ParameterizedTest
  @MethodSource("specs")
  void decodeReduceIsBitIdenticalToTheReference(String spec) {
    SplittableRandom rnd = new SplittableRandom(seed ^ ~spec.hashCode());
    AbstractCodec c = Codecs.byName(spec + (spec.contains(":") ? "," : ":") + "nonfinite=propagate");
    for (int[] shape : SHAPES) {
      int rows = shape[0];
      int cols = shape[1];
      int n = rows * cols;
      byte[][] payloads = new byte[4][];
      String kinds = "";
      for (int q = 0; q < payloads.length; q++) {
        if (q == 2) {
          continue; // the caller's own slot
        }
        String kind;
        Outcome o;
        do { // (hadamard-int8 refuses values whose transform overflows float32, mxfp4 and nvfp4 values above 2^119:
          // another kind then)
          kind = INPUTS[rnd.nextInt(INPUTS.length)];
          o = encode(c, input(kind, rnd.nextLong(), rows, cols), 0, rows, cols);
        } while (o.error() != null && (o.error().contains("overflows float32") || o.error().contains("above 2^119")));
        kinds += kind + " ";
        byte[] p = o.payload();
        payloads[q] = Arrays.copyOfRange(p, 3, p.length);
      }
      float[] own = Inputs.heavyTailed(rnd.nextLong(), n + 3);
      own[5 % own.length] = -0f;
      String what = String.format("seed %d: %s %dx%d, payloads %s", seed, c, rows, cols, kinds);
      for (boolean withOwn : new boolean[] {false, true}) {
        float[] o = withOwn ? own : null;
        assertThat(reduce(c, payloads, rows, cols, o, 3, new float[n + 1], 1)).as(what + (withOwn ? ", own" : ""))
            .isEqualTo(reference(() -> reduce(c, payloads, rows, cols, o, 3, new float[n + 1], 1)));
      }
      float[] a = own.clone();
      float[] b = own.clone();
      assertThat(reduce(c, payloads, rows, cols, a, 3, a, 3)).as(what + ", in place")
          .isEqualTo(reference(() -> reduce(c, payloads, rows, cols, b, 3, b, 3)));
      assertThat(reduce(c, new byte[3][], rows, cols, own.clone(), 3, new float[n + 3], 3)).as(what + ", no payloads")
          .isEqualTo(reference(() -> reduce(c, new byte[3][], rows, cols, own.clone(), 3, new float[n + 3], 3)));
    }
  }

  /** {@link AbstractCodec#decodeReduce}'s output bits, or the message it was refused with. */
  static String reduce(AbstractCodec c, byte[][] payloads, int rows, int cols, float[] own, int ownOff, float[] out,
      int outOff) {
    try {
      c.decodeReduce(payloads, rows, cols, own, ownOff, out, outOff);
      return Arrays.toString(bits(out));
    } catch (MalformedPayloadException e) {
      return e.getMessage();
    }
  }

  /** Corrupted bodies with a recomputed checksum: the same verdict (message) or the same decoded bits. */
  @ParameterizedTest
  @MethodSource("specs")
  void corruptedBodiesGetTheSameVerdict(String spec) {
    SplittableRandom rnd = new SplittableRandom(seed ^ 31 * spec.hashCode());
    AbstractCodec c = Codecs.byName(spec);
    int rejected = 0;
    for (int t = 0; t < 300; t++) {
      int rows = rnd.nextInt(1, 4);
      int cols = rnd.nextInt(1, 300);
      byte[] p = encode(c, input("heavy", rnd.nextLong(), rows, cols), 0, rows, cols).payload();
      int body = 3 + PayloadHeader.SIZE;
      for (int k = rnd.nextInt(1, 4); k > 0; k--) {
        int at = rnd.nextInt(body, p.length);
        p[at] = rnd.nextInt(3) == 0 ? (byte) rnd.nextInt() : new byte[] {0x7F, (byte) 0xFF, (byte) 0x80, 0x7C, 0x08}[k];
      }
      Bytes.putInt(p, 3 + 24, PayloadHeader.crc(p, body, p.length - body));
      float[] base = new float[rows * cols];
      Object simd = decode(c, p, rows * cols, base);
      assertThat(simd).as("seed %d %s t %d", seed, c, t).isEqualTo(reference(() -> decode(c, p, rows * cols, base)));
      rejected += simd instanceof String ? 1 : 0;
    }
    assertThat(rejected).as("some corruptions must be caught by the body checks").isPositive();
  }

  /**
   * Bodies of many checking pieces (the SIMD path checksums and checks a piece at a time): NaN/Inf codes planted in
   * any piece, with the checksum recomputed (the body check names the first) or not (the checksum mismatch wins).
   */
  @ParameterizedTest
  @MethodSource("specs")
  void largeCorruptedBodiesGetTheSameVerdict(String spec) {
    SplittableRandom rnd = new SplittableRandom(seed ^ 37 * spec.hashCode());
    AbstractCodec c = Codecs.byName(spec);
    int rows = 130;
    int cols = 1000;
    byte[] clean = encode(c, input("heavy", rnd.nextLong(), rows, cols), 0, rows, cols).payload();
    int body = 3 + PayloadHeader.SIZE;
    for (int t = 0; t < 12; t++) {
      byte[] p = clean.clone();
      for (int k = rnd.nextInt(1, 4); k > 0; k--) { // 0xFF 0x7F: the top bytes of a NaN (fp32, bf16), an E4M3 NaN
        int at = rnd.nextInt(body, p.length - 1);
        p[at] = (byte) 0xFF;
        p[at + 1] = (byte) 0x7F;
      }
      if (t % 3 != 0) {
        Bytes.putInt(p, 3 + 24, PayloadHeader.crc(p, body, p.length - body));
      }
      float[] base = new float[rows * cols];
      Object simd = decode(c, p, rows * cols, base);
      assertThat(simd).as("seed %d %s t %d", seed, c, t).isEqualTo(reference(() -> decode(c, p, rows * cols, base)));
    }
  }

  @ParameterizedTest
  @MethodSource("specs")
  void rowBlocksOnSeveralThreadsGiveTheSameBytesAndFloats(String spec) {
    SplittableRandom rnd = new SplittableRandom(seed ^ 17 * spec.hashCode());
    AbstractCodec c = Codecs.byName(spec + (spec.contains(":") ? "," : ":") + "nonfinite=propagate");
    int rows = rnd.nextInt(2, 40);
    int cols = rnd.nextInt(1, 700);
    float[] x = input(rnd.nextBoolean() ? "heavy" : "nonfinite", rnd.nextLong(), rows, cols);
    Outcome one = encode(c, x, 0, rows, cols);
    Outcome split = RowSplit.withThreads(3, 1, () -> encode(c, x, 0, rows, cols));
    String what = String.format("seed %d: %s %dx%d", seed, c, rows, cols);
    assertThat(split.payload()).as(what).isEqualTo(one.payload());
    assertThat(split.saturated()).as(what).isEqualTo(one.saturated());
    float[] base = Inputs.gaussian(rnd.nextLong(), rows * cols);
    assertThat(RowSplit.withThreads(3, 1, () -> decode(c, one.payload(), rows * cols, base))).as(what)
        .isEqualTo(decode(c, one.payload(), rows * cols, base));
    float[] bad = x.clone();
    bad[bad.length - 1] = Float.NaN; // the last block meets it: the refusal names it all the same
    AbstractCodec refuse = Codecs.byName(spec);
    assertThat(RowSplit.withThreads(3, 1, () -> encode(refuse, bad, 0, rows, cols)).error()).as(what)
        .isEqualTo(encode(refuse, bad, 0, rows, cols).error()).contains("non-finite input");
  }

  /** The E2M1 codecs' inputs: block scales near their formats' limits, zero blocks among others, outlier channels. */
  static final String[] FP4_INPUTS = {"gaussian", "outliers", "tinyMx", "tinyNv", "zeroBlocks"};

  /** Input {@code kind} of {@link #FP4_INPUTS}, {@code rows x cols}, from {@code s}. */
  static float[] fp4Input(String kind, long s, int rows, int cols) {
    SplittableRandom r = new SplittableRandom(s);
    return switch (kind) {
      case "outliers" -> Inputs.outlierChannels(s, rows, cols);
      // blocks of 16 around 2^-127 .. 2^-149: MXFP4's smallest E8M0 scale, subnormal block maxima
      case "tinyMx" -> scaled(Inputs.wideGroups(s, rows, cols, 16, 12), -132);
      // blocks of 16 spread over 2^-24 .. 2^0 of the row's largest: NVFP4's E4M3 block scales down to 0 and its
      // subnormals
      case "tinyNv" -> scaled(Inputs.wideGroups(s, rows, cols, 16, 12), -12 + r.nextInt(-100, 100));
      case "zeroBlocks" -> {
        float[] x = Inputs.heavyTailed(s, rows * cols);
        for (int i = 0; i < x.length; i += 16) {
          if (r.nextInt(3) == 0) {
            Arrays.fill(x, i, Math.min(x.length, i + 16), r.nextBoolean() ? 0f : -0f);
          }
        }
        yield x;
      }
      default -> Inputs.gaussian(s, rows * cols);
    };
  }

  /**
   * {@code mxfp4} and {@code nvfp4}, rotated or not, on their own SIMD kernels: every row length from 1 to 200 and
   * 4096, a few rows (a few hundred one time in twenty), payload bytes, clip counts and decoded floats (overwrite and
   * accumulate) against the reference.
   */
  @ParameterizedTest
  @MethodSource("fp4Specs")
  void fp4CodecsAreBitIdenticalForEveryRowLength(String spec) {
    SplittableRandom rnd = new SplittableRandom(seed ^ 41 * spec.hashCode());
    AbstractCodec c = Codecs.byName(spec);
    for (int cols = 1; cols <= 201; cols++) {
      int len = cols == 201 ? 4096 : cols;
      int rows = rnd.nextInt(20) == 0 ? rnd.nextInt(100, 400) : rnd.nextInt(1, 4);
      String kind = FP4_INPUTS[rnd.nextInt(FP4_INPUTS.length)];
      long s = rnd.nextLong();
      float[] x = fp4Input(kind, s, rows, len);
      String what = String.format("seed %d: %s, %s %dx%d (input seed %d)", seed, c, kind, rows, len, s);
      Outcome simd = encode(c, x, 0, rows, len);
      Outcome ref = reference(() -> encode(c, x, 0, rows, len));
      assertThat(simd.error()).as(what).isNull();
      assertThat(simd.payload()).as(what).isEqualTo(ref.payload());
      assertThat(simd.saturated()).as(what).isEqualTo(ref.saturated());
      float[] base = Inputs.gaussian(s + 1, rows * len);
      assertThat(decode(c, simd.payload(), rows * len, base)).as(what)
          .isEqualTo(reference(() -> decode(c, simd.payload(), rows * len, base)));
    }
  }

  static List<String> fp4Specs() {
    return List.of("mxfp4:hadamard=on", "mxfp4:hadamard=off", "nvfp4:hadamard=on", "nvfp4:hadamard=off");
  }

  @Test
  void largeTensorsAreBitIdenticalToo() {
    SplittableRandom rnd = new SplittableRandom(seed + 7);
    int rows = 96;
    int cols = 1000;
    for (String spec : specs()) {
      AbstractCodec c = Codecs.byName(spec);
      float[] x = Inputs.outlierChannels(rnd.nextLong(), rows, cols);
      Outcome simd = encode(c, x, 0, rows, cols);
      Outcome ref = reference(() -> encode(c, x, 0, rows, cols));
      assertThat(simd.payload()).as("seed %d %s", seed, c).isEqualTo(ref.payload());
      float[] base = Inputs.gaussian(1, rows * cols);
      assertThat(decode(c, simd.payload(), rows * cols, base))
          .isEqualTo(reference(() -> decode(c, simd.payload(), rows * cols, base)));
    }
  }
}
