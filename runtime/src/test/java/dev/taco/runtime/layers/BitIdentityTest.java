package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.collective.Communicator;
import dev.taco.collective.LocalGroup;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.layers.AdamW;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import jdk.incubator.vector.FloatVector;
import org.junit.jupiter.api.Test;

/**
 * The host wrappers give exactly the floats the layers gave before they were split into translatable kernels
 * (docs/design.md §5): every output of every layer, AdamW and a whole GPT step (TP = 1 and 2) on fixed random inputs, hashed
 * over the raw bits of the full arrays (pads included), equals a fingerprint recorded from the code before the split
 * (commit 67eed6f). Backward buffers start random, not zero, so the order of the {@code +=} accumulation counts too.
 * A change that moves one bit of one value anywhere fails here; if a change is meant to alter the numbers, record
 * the new fingerprints printed by the failing assertion and say why in the commit.
 */
class BitIdentityTest {
  /** Two shapes per layer: odd sizes (remainder paths: C % 16, HS % 4) and a round one. */
  record Shape(int b, int t, int c, int v, int nh, int hs, int oc) {}

  static final List<Shape> SHAPES = List.of(new Shape(2, 7, 40, 37, 3, 6, 52), new Shape(3, 16, 64, 256, 4, 16, 96));

  /** Fingerprints of the code before the split, of the layers without a GEMM (exact on any x86-64 HotSpot). */
  static final Map<String, String> EXPECTED = Map.ofEntries(
      Map.entry("adamw.update", "acbbfa2e2f8f5234"),
      Map.entry("s0.attention.backward", "d885f82c18b3213b"),
      Map.entry("s0.attention.forward", "c702658fb3019933"),
      Map.entry("s0.crossentropy.backward", "55ae4c26705c184c"),
      Map.entry("s0.crossentropy.forward", "54865d114acb2bb2"),
      Map.entry("s0.encoder.backward", "6dcad441e9a652ca"),
      Map.entry("s0.encoder.forward", "efe1ab8c87388690"),
      Map.entry("s0.gelu.backward", "e179425f4e3091f8"),
      Map.entry("s0.gelu.forward", "e0c54915311a7df3"),
      Map.entry("s0.layernorm.backward", "98f8e63ce2b0da39"),
      Map.entry("s0.layernorm.forward", "514ebf52c588b5dd"),
      Map.entry("s0.residual.backward", "068d816e78434f20"),
      Map.entry("s0.residual.forward", "a93916331c1e1ea4"),
      Map.entry("s1.attention.backward", "72c27025c5200be4"),
      Map.entry("s1.attention.forward", "8446f236c40ef0e3"),
      Map.entry("s1.crossentropy.backward", "97d1e0b02149185e"),
      Map.entry("s1.crossentropy.forward", "2c5d0b3433030af9"),
      Map.entry("s1.encoder.backward", "650f1601b2e8c9cd"),
      Map.entry("s1.encoder.forward", "600526faaec68823"),
      Map.entry("s1.gelu.backward", "a0536b336bbda7e5"),
      Map.entry("s1.gelu.forward", "9f0abb9a3c91515d"),
      Map.entry("s1.layernorm.backward", "23b133bc4e486f4b"),
      Map.entry("s1.layernorm.forward", "f6204f4e9f145e3d"),
      Map.entry("s1.residual.backward", "77d7e9c1d2408e1e"),
      Map.entry("s1.residual.forward", "58bb058959cfbcfe"));

  /**
   * Fingerprints of what goes through {@link dev.taco.kernels.Gemm}, whose sums follow the machine's preferred vector
   * width: recorded with {@link #RECORDED_LANES} float lanes (AVX-512), checked only there.
   *
   * <p>One deliberate exception to "recorded before the split": the float64 bits of {@code gradSquaredNorm} (the
   * {@code .gradSquaredNorm} entries, both sums as raw double bits). {@link GradNorm} sums in
   * {@link GradNorm#PARTS} strided partials instead of one sequential chain, so that the GPU can run it; that
   * re-associates the float64 additions and moves the last bits (here by 1e-14 relative). What the trainer uses is the
   * float it rounds that to, and those ({@code .gradSquaredNorm.float}) are still the bits from before the split.
   *
   * <p>A second one: the four {@code matmul.backward} entries, re-recorded when {@link dev.taco.kernels.Gemm} began to
   * sum each element as one in-order chain of fused multiply-adds that starts from C's value (docs/design.md §5; before,
   * each K block of 256 was summed from zero and then added to C). Their gradient buffers start random, so C's value
   * now enters the chain first; where C starts at zero and k <= 256, as in every other entry here, the bits are equal.
   */
  static final Map<String, String> EXPECTED_GEMM = Map.ofEntries(
      Map.entry("gpt.tp1.rank0", "552d6d2d6450ff0b"),
      Map.entry("gpt.tp1.rank0.gradSquaredNorm", "40225d8c509e996e/3ff18ba248a9864f"),
      Map.entry("gpt.tp1.rank0.gradSquaredNorm.float", "b4e745218f00cfdd"),
      Map.entry("gpt.tp2.rank0", "91108027ec325534"),
      Map.entry("gpt.tp2.rank0.gradSquaredNorm", "4021410fda234d80/3fe14f7d3da982a5"),
      Map.entry("gpt.tp2.rank0.gradSquaredNorm.float", "1f413c4f721263b3"),
      Map.entry("gpt.tp2.rank1", "34e12791c92f40b2"),
      Map.entry("gpt.tp2.rank1.gradSquaredNorm", "402148947c7cd41e/3fe1c7c76341ed5d"),
      Map.entry("gpt.tp2.rank1.gradSquaredNorm.float", "9ffbb46e4b01857a"),
      Map.entry("s0.matmul.backward", "53be20e46e9937a4"),
      Map.entry("s0.matmul.backward.bias", "a8b0ffb58b3bcd72"),
      Map.entry("s0.matmul.forward", "3837a985915d4575"),
      Map.entry("s0.matmul.forward.bias", "798749476dfaa079"),
      Map.entry("s1.matmul.backward", "aa7ef2b9ec12bd23"),
      Map.entry("s1.matmul.backward.bias", "095e376239897d8a"),
      Map.entry("s1.matmul.forward", "6f82c5d90d05d5c8"),
      Map.entry("s1.matmul.forward.bias", "e2bb3a55d0d34a7c"));

  static final int RECORDED_LANES = 16;

  @Test
  void everyLayerGivesTheRecordedBits() {
    assumeTrue(System.getProperty("os.arch").equals("amd64"),
        "fingerprints were recorded on x86-64 (Math.exp/log intrinsics); this is " + System.getProperty("os.arch"));
    Map<String, String> got = fingerprints();
    Map<String, String> plain = new TreeMap<>(got);
    plain.keySet().removeAll(EXPECTED_GEMM.keySet());
    assertThat(plain).as("fingerprints (to record, if the change is meant to alter numbers):%n%s", table(got))
        .isEqualTo(new TreeMap<>(EXPECTED));
    int lanes = FloatVector.SPECIES_PREFERRED.length();
    assumeTrue(lanes == RECORDED_LANES, "GEMM fingerprints were recorded with " + RECORDED_LANES
        + " float lanes; this machine has " + lanes + ": only the GEMM-free layers were checked");
    Map<String, String> gemm = new TreeMap<>(got);
    gemm.keySet().retainAll(EXPECTED_GEMM.keySet());
    assertThat(gemm).as("fingerprints (to record, if the change is meant to alter numbers):%n%s", table(got))
        .isEqualTo(new TreeMap<>(EXPECTED_GEMM));
  }

  static Map<String, String> fingerprints() {
    Map<String, String> got = new TreeMap<>();
    for (int s = 0; s < SHAPES.size(); s++) {
      layers(SHAPES.get(s), "s" + s + ".", got);
    }
    adamW(got);
    gpt(1, got);
    gpt(2, got);
    return got;
  }

  static String table(Map<String, String> got) {
    StringBuilder table = new StringBuilder();
    got.forEach((k, v) -> table.append("      Map.entry(\"").append(k).append("\", \"").append(v).append("\"),\n"));
    return table.toString();
  }

  static void layers(Shape sh, String p, Map<String, String> got) {
    Random rnd = new Random(20261201L + sh.c());
    int b = sh.b(), t = sh.t(), c = sh.c(), v = sh.v(), nh = sh.nh(), hs = sh.hs(), oc = sh.oc();
    int bt = b * t, n = bt * c, d = nh * hs;

    // Encoder
    int[] tok = Bufs.tokens(bt, rnd, v);
    float[] wte = Bufs.input(v * c, rnd, 1.0);
    float[] wpe = Bufs.input(t * c, rnd, 1.0);
    float[] enc = Bufs.output(n);
    Encoder.forward(enc, OFF, tok, OFF, wte, OFF, wpe, OFF, b, t, c, v);
    got.put(p + "encoder.forward", hash(enc));
    float[] dwte = Bufs.input(v * c, rnd, 1.0);
    float[] dwpe = Bufs.input(t * c, rnd, 1.0);
    float[] dout = Bufs.input(n, rnd, 1.0);
    Encoder.backward(dwte, OFF, dwpe, OFF, dout, OFF, tok, OFF, b, t, c, v);
    got.put(p + "encoder.backward", hash(dwte, dwpe));

    // LayerNorm, with a mean far from zero against the spread
    float[] x = Bufs.input(n, rnd, 2.0);
    for (int i = 0; i < n; i++) {
      x[OFF + i] += 3f;
    }
    float[] w = Bufs.input(c, rnd, 1.0);
    float[] bias = Bufs.input(c, rnd, 1.0);
    float[] ln = Bufs.output(n);
    float[] mean = Bufs.output(bt);
    float[] rstd = Bufs.output(bt);
    LayerNorm.forward(ln, OFF, mean, OFF, rstd, OFF, x, OFF, w, OFF, bias, OFF, b, t, c);
    got.put(p + "layernorm.forward", hash(ln, mean, rstd));
    float[] dx = Bufs.input(n, rnd, 1.0);
    float[] dw = Bufs.input(c, rnd, 1.0);
    float[] db = Bufs.input(c, rnd, 1.0);
    LayerNorm.backward(dx, OFF, dw, OFF, db, OFF, dout, OFF, x, OFF, w, OFF, mean, OFF, rstd, OFF, b, t, c);
    got.put(p + "layernorm.backward", hash(dx, dw, db));

    // Matmul, with and without bias
    float[] mw = Bufs.input(c * oc, rnd, 0.2);
    float[] mb = Bufs.input(oc, rnd, 1.0);
    float[] mo = Bufs.output(bt * oc);
    Matmul.forward(mo, OFF, x, OFF, mw, OFF, mb, OFF, b, t, c, oc);
    got.put(p + "matmul.forward.bias", hash(mo));
    Matmul.forward(mo, OFF, x, OFF, mw, OFF, null, 0, b, t, c, oc);
    got.put(p + "matmul.forward", hash(mo));
    float[] mdout = Bufs.input(bt * oc, rnd, 1.0);
    float[] mdx = Bufs.input(n, rnd, 1.0);
    float[] mdw = Bufs.input(c * oc, rnd, 1.0);
    float[] mdb = Bufs.input(oc, rnd, 1.0);
    Matmul.backward(mdx, OFF, mdw, OFF, mdb, OFF, mdout, OFF, x, OFF, mw, OFF, b, t, c, oc);
    got.put(p + "matmul.backward.bias", hash(mdx, mdw, mdb));
    Matmul.backward(mdx, OFF, mdw, OFF, null, 0, mdout, OFF, x, OFF, mw, OFF, b, t, c, oc);
    got.put(p + "matmul.backward", hash(mdx, mdw));

    // Attention
    float[] qkv = Bufs.input(bt * 3 * d, rnd, 1.5);
    float[] ao = Bufs.output(bt * d);
    float[] att = Bufs.output(b * nh * t * t);
    Attention.forward(ao, OFF, att, OFF, qkv, OFF, b, t, nh, hs);
    got.put(p + "attention.forward", hash(ao, att));
    float[] adout = Bufs.input(bt * d, rnd, 1.0);
    float[] dqkv = Bufs.input(bt * 3 * d, rnd, 1.0);
    float[] scratch = Bufs.output(b * nh * t * t);
    Attention.backward(dqkv, OFF, scratch, OFF, adout, OFF, qkv, OFF, att, OFF, b, t, nh, hs);
    got.put(p + "attention.backward", hash(dqkv));

    // GELU, over a range that reaches both tails
    float[] gx = Bufs.input(n, rnd, 4.0);
    float[] gy = Bufs.output(n);
    Gelu.forward(gy, OFF, gx, OFF, n);
    got.put(p + "gelu.forward", hash(gy));
    float[] gdx = Bufs.input(n, rnd, 1.0);
    Gelu.backward(gdx, OFF, dout, OFF, gx, OFF, n);
    got.put(p + "gelu.backward", hash(gdx));

    // Residual
    float[] ry = Bufs.output(n);
    Residual.forward(ry, OFF, x, OFF, gx, OFF, n);
    got.put(p + "residual.forward", hash(ry));
    float[] rda = Bufs.input(n, rnd, 1.0);
    float[] rdb = Bufs.input(n, rnd, 1.0);
    Residual.backward(rda, OFF, rdb, OFF, dout, OFF, n);
    got.put(p + "residual.backward", hash(rda, rdb));

    // CrossEntropy
    float[] logits = Bufs.input(bt * v, rnd, 3.0);
    int[] tgt = Bufs.tokens(bt, rnd, v);
    float[] losses = Bufs.output(bt);
    float[] probs = Bufs.output(bt * v);
    float mloss = CrossEntropy.forward(losses, OFF, probs, OFF, logits, OFF, tgt, OFF, b, t, v);
    got.put(p + "crossentropy.forward", hash(losses, probs, new float[] {mloss}));
    float[] dlogits = Bufs.input(bt * v, rnd, 1.0);
    CrossEntropy.backward(dlogits, OFF, probs, OFF, tgt, OFF, b, t, v, 0.75f);
    got.put(p + "crossentropy.backward", hash(dlogits));
  }

  static void adamW(Map<String, String> got) {
    Random rnd = new Random(99);
    int n = 1000;
    float[] params = new float[n];
    float[] grads = new float[n];
    float[] m = new float[n];
    float[] v = new float[n];
    byte[] decay = new byte[n];
    for (int i = 0; i < n; i++) {
      params[i] = (float) rnd.nextGaussian();
      decay[i] = (byte) (i % 3 == 0 ? 0 : 1);
    }
    for (int step = 1; step <= 3; step++) {
      for (int i = 0; i < n; i++) {
        grads[i] = (float) (rnd.nextGaussian() * 0.1);
      }
      AdamW.update(params, grads, m, v, decay, n, 2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, step);
    }
    got.put("adamw.update", hash(params, m, v));
  }

  /** One forward + backward of a small GPT at TP = r with exact collectives; every rank's loss, grads, norms. */
  static void gpt(int r, Map<String, String> got) {
    GptConfig cfg = new GptConfig(256, 16, 2, 4, 32, r);
    int b = 2;
    Random rnd = new Random(5);
    int[] in = new int[b * cfg.seqLength()];
    int[] tgt = new int[in.length];
    for (int i = 0; i < in.length; i++) {
      in[i] = rnd.nextInt(256);
      tgt[i] = rnd.nextInt(256);
    }
    List<String[]> ranks = LocalGroup.run(r, (Communicator comm) -> {
      Gpt<float[]> model = Gpt.cpu(cfg, comm, b, 42);
      model.zeroGrad();
      float loss = model.forward(in, tgt);
      model.backward();
      double all = model.gradSquaredNorm(true);
      double shards = model.gradSquaredNorm(false);
      return new String[] {hash(new float[] {loss}, model.grads()), Long.toHexString(Double.doubleToRawLongBits(all))
          + "/" + Long.toHexString(Double.doubleToRawLongBits(shards)),
          hash(new float[] {(float) all, (float) shards})};
    });
    for (int i = 0; i < r; i++) {
      got.put("gpt.tp" + r + ".rank" + i, ranks.get(i)[0]);
      got.put("gpt.tp" + r + ".rank" + i + ".gradSquaredNorm", ranks.get(i)[1]);
      got.put("gpt.tp" + r + ".rank" + i + ".gradSquaredNorm.float", ranks.get(i)[2]);
    }
  }

  /** The first 64 bits of SHA-256 over the raw bits of every value of the arrays, in order. */
  static String hash(float[]... arrays) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      for (float[] a : arrays) {
        ByteBuffer bb = ByteBuffer.allocate(4 * a.length + 4);
        bb.putInt(a.length);
        for (float f : a) {
          bb.putInt(Float.floatToRawIntBits(f));
        }
        md.update(bb.array());
      }
      return HexFormat.of().formatHex(md.digest(), 0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
