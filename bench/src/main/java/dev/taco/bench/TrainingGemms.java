package dev.taco.bench;

import dev.taco.runtime.model.GptConfig;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The matrix products one training step of the CPU backend makes on one tensor-parallel rank, read off the training
 * code: {@code Gpt.forwardLoaded}/{@code backward} call {@code CpuOps.matmulForward}/{@code matmulBackward} (through
 * {@code layers.Matmul}: {@code Gemm.matmul} forward, {@code matmulTransB} for the input gradient and
 * {@code matmulTransA} for the weight gradient, both accumulating) for the QKV, attention-projection, fc1 and fc2
 * linears of every layer, and {@code headForward}/{@code headBackward} for the tied LM head (one A·Bᵀ forward, one
 * A·B and one accumulating Aᵀ·B backward). Without sequence parallelism every rank multiplies all B·T token rows.
 *
 * <p>A shape is (m, k, n, op) with op(A) m×k and op(B) k×n, as {@code Gemm} takes them; products of the same shape
 * and op are merged into one entry with the calls added up ({@link Shape#uses} lists them).
 */
final class TrainingGemms {
  private TrainingGemms() {}

  /** How {@code Gemm} reads the operands: the three public forms. */
  enum Op {
    /** {@code Gemm.matmul}: A [m,k], B [k,n]. */
    AB("A·B"),
    /** {@code Gemm.matmulTransB}: A [m,k], B stored [n,k]. */
    ABT("A·Bᵀ"),
    /** {@code Gemm.matmulTransA}: A stored [k,m], B [k,n]. */
    ATB("Aᵀ·B");

    final String label;

    Op(String label) {
      this.label = label;
    }
  }

  /**
   * One product shape of a model's step.
   *
   * @param model "default", "wide" or "square"
   * @param accumulate whether the training adds into C (the most frequent use's flag when uses differ)
   * @param calls how many times one step of one rank makes this product
   * @param uses where, e.g. {@code "fc2.fwd x4, head.dx x1"}
   */
  record Shape(String model, int m, int k, int n, Op op, boolean accumulate, int calls, String uses) {
    /** The JMH parameter value, e.g. {@code default:1024x128x192:AB:acc}. */
    String key() {
      return model + ":" + m + "x" + k + "x" + n + ":" + op + ":" + (accumulate ? "acc" : "set");
    }

    /** The shape a {@link #key()} names (calls and uses are not part of the key: 0 and ""). */
    static Shape parse(String key) {
      String[] f = key.split(":");
      String[] mkn = f[1].split("x");
      return new Shape(f[0], Integer.parseInt(mkn[0]), Integer.parseInt(mkn[1]), Integer.parseInt(mkn[2]),
          Op.valueOf(f[2]), f[3].equals("acc"), 0, "");
    }

    /** Floating-point operations of one product, 2mkn. */
    long flops() {
      return 2L * m * k * n;
    }

    /** One tab-separated line: key, model, m, k, n, op label, accumulate, calls, uses. */
    String tsv() {
      return String.join("\t", key(), model, Integer.toString(m), Integer.toString(k), Integer.toString(n), op.label,
          Boolean.toString(accumulate), Integer.toString(calls), uses);
    }
  }

  /** The default {@code ./taco train} model at TP = 2: 4 layers, C = 128, 4 heads, T = 128, vocabulary 256. */
  static final GptConfig DEFAULT = new GptConfig(256, 128, 4, 4, 128, 2);
  /** The same model 4x wider: C = 512. */
  static final GptConfig WIDE = new GptConfig(256, 128, 4, 4, 512, 2);
  /** The default micro-batch B. */
  static final int MICRO_BATCH = 8;

  /** The default and wide models' shapes at {@link #MICRO_BATCH}, then the square n = 1024. */
  static List<Shape> all() {
    List<Shape> out = new ArrayList<>(of("default", DEFAULT, MICRO_BATCH));
    out.addAll(of("wide", WIDE, MICRO_BATCH));
    out.add(new Shape("square", 1024, 1024, 1024, Op.AB, false, 0, "reference"));
    return out;
  }

  /** Every product of one rank's training step of {@code cfg} (without sequence parallelism), merged by shape. */
  static List<Shape> of(String model, GptConfig cfg, int microBatch) {
    int rows = microBatch * cfg.seqLength(), c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn();
    int v = cfg.vocabSize(), layers = cfg.numLayers();
    Map<String, Shape> merged = new LinkedHashMap<>();
    linear(merged, model, "qkv", rows, c, 3 * cr, layers);
    linear(merged, model, "attproj", rows, cr, c, layers);
    linear(merged, model, "fc1", rows, c, ff, layers);
    linear(merged, model, "fc2", rows, ff, c, layers);
    add(merged, new Shape(model, rows, c, v, Op.ABT, false, 1, "head.fwd x1"));
    add(merged, new Shape(model, rows, v, c, Op.AB, false, 1, "head.dx x1"));
    add(merged, new Shape(model, v, rows, c, Op.ATB, true, 1, "head.dw x1"));
    return new ArrayList<>(merged.values());
  }

  /** A linear layer {@code out(rows, cOut) = inp(rows, cIn) · W(cIn, cOut)}: forward, input and weight gradients. */
  private static void linear(Map<String, Shape> merged, String model, String name, int rows, int cIn, int cOut,
      int calls) {
    String x = " x" + calls;
    add(merged, new Shape(model, rows, cIn, cOut, Op.AB, false, calls, name + ".fwd" + x));
    add(merged, new Shape(model, rows, cOut, cIn, Op.ABT, true, calls, name + ".dx" + x));
    add(merged, new Shape(model, cIn, rows, cOut, Op.ATB, true, calls, name + ".dw" + x));
  }

  private static void add(Map<String, Shape> merged, Shape s) {
    String at = String.format(Locale.ROOT, "%dx%dx%d:%s", s.m(), s.k(), s.n(), s.op());
    Shape old = merged.get(at);
    if (old == null) {
      merged.put(at, s);
      return;
    }
    boolean acc = old.calls() >= s.calls() ? old.accumulate() : s.accumulate();
    merged.put(at, new Shape(s.model(), s.m(), s.k(), s.n(), s.op(), acc, old.calls() + s.calls(),
        old.uses() + ", " + s.uses()));
  }
}
