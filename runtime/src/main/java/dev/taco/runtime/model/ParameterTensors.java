package dev.taco.runtime.model;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * One tensor-parallel rank's parameters as shaped tensors in one flat arena (llm.c's {@code ParameterTensors}), each
 * with a shard descriptor that says how the rank's block lies in the full (TP = 1) tensor: Megatron-LM's split
 * (Shoeybi et al. 2019, §3; docs/design.md §6). Per block, the QKV projection and fc1 are column-parallel (this rank holds
 * the columns of its heads / MLP channels: {@link Split#COLUMNS}, the QKV matrix in its three parts), the attention
 * output projection and fc2 are row-parallel ({@link Split#ROWS}), and embeddings, LayerNorms and the row-parallel
 * biases are {@link Split#REPLICATED}.
 *
 * <p>Order in the arena: wte (V,C), wpe (T,C), then per layer ln1w, ln1b (C), qkvw (C, 3C/R), qkvb (3C/R), attprojw
 * (C/R, C), attprojb (C), ln2w, ln2b (C), fcw (C, 4C/R), fcb (4C/R), fcprojw (4C/R, C), fcprojb (C), then lnfw, lnfb
 * (C); every matrix row-major, input channels by output channels. The offsets of the named tensors are public fields
 * for the model's layer calls.
 */
public final class ParameterTensors {

  /** How a rank's block of a tensor lies in the full tensor. */
  public enum Split {
    /** Every rank holds the whole tensor. */
    REPLICATED,
    /** The full tensor's columns are {@code parts} equal parts, each cut into R column blocks; rank r holds block r of each. */
    COLUMNS,
    /** The full tensor's rows are cut into R blocks; rank r holds block r. */
    ROWS
  }

  /**
   * One tensor of the rank.
   *
   * @param name its name in a GPT-2 state dict's spirit ({@code h.3.attn.c_attn.weight}); unique
   * @param offset where the rank's block starts in the arena (elements)
   * @param fullOffset where the full tensor starts in the full (TP = 1) arena
   * @param fullRows rows of the full tensor (1 for vectors)
   * @param fullCols columns of the full tensor
   * @param split how the rank's block is cut out of it
   * @param parts for {@link Split#COLUMNS}: the number of column parts (3 for QKV), else 1
   * @param decay whether AdamW decays it (matrices and the token embedding)
   */
  public record Tensor(String name, int offset, int fullOffset, int fullRows, int fullCols, Split split, int parts,
      boolean decay) {

    /** Elements of the rank's block. */
    public int size(int ranks) {
      return split == Split.REPLICATED ? fullRows * fullCols : fullRows * fullCols / ranks;
    }

    /** Index in the full arena of element {@code i} of rank {@code rank}'s block (row-major in the block's shape). */
    public int fullIndex(int i, int rank, int ranks) {
      return switch (split) {
        case REPLICATED -> fullOffset + i;
        case ROWS -> fullOffset + rank * (fullRows / ranks) * fullCols + i;
        case COLUMNS -> {
          int partCols = fullCols / parts;
          int blockCols = partCols / ranks;
          int localCols = parts * blockCols;
          int row = i / localCols;
          int j = i - row * localCols;
          int part = j / blockCols;
          yield fullOffset + row * fullCols + part * partCols + rank * blockCols + (j - part * blockCols);
        }
      };
    }
  }

  public final int wte, wpe, lnfw, lnfb;
  public final int[] ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
  private final GptConfig cfg;
  private final int rank;
  private final List<Tensor> tensors = new ArrayList<>();
  private final int size;
  private final int fullSize;

  /** The tensors of rank {@code rank} of {@code cfg.tp()}. */
  public ParameterTensors(GptConfig cfg, int rank) {
    if (rank < 0 || rank >= cfg.tp()) {
      throw new IllegalArgumentException("rank " + rank + " is outside [0, " + cfg.tp() + ")");
    }
    this.cfg = cfg;
    this.rank = rank;
    int layers = cfg.numLayers(), c = cfg.hiddenSize(), v = cfg.vocabSize(), t = cfg.seqLength();
    ln1w = new int[layers];
    ln1b = new int[layers];
    qkvw = new int[layers];
    qkvb = new int[layers];
    attprojw = new int[layers];
    attprojb = new int[layers];
    ln2w = new int[layers];
    ln2b = new int[layers];
    fcw = new int[layers];
    fcb = new int[layers];
    fcprojw = new int[layers];
    fcprojb = new int[layers];
    int[] at = new int[2]; // next offset in the rank's arena, in the full arena
    wte = add(at, "wte.weight", v, c, Split.REPLICATED, 1, true);
    wpe = add(at, "wpe.weight", t, c, Split.REPLICATED, 1, false);
    for (int l = 0; l < layers; l++) {
      String h = "h." + l + ".";
      ln1w[l] = add(at, h + "ln_1.weight", 1, c, Split.REPLICATED, 1, false);
      ln1b[l] = add(at, h + "ln_1.bias", 1, c, Split.REPLICATED, 1, false);
      qkvw[l] = add(at, h + "attn.c_attn.weight", c, 3 * c, Split.COLUMNS, 3, true);
      qkvb[l] = add(at, h + "attn.c_attn.bias", 1, 3 * c, Split.COLUMNS, 3, false);
      attprojw[l] = add(at, h + "attn.c_proj.weight", c, c, Split.ROWS, 1, true);
      attprojb[l] = add(at, h + "attn.c_proj.bias", 1, c, Split.REPLICATED, 1, false);
      ln2w[l] = add(at, h + "ln_2.weight", 1, c, Split.REPLICATED, 1, false);
      ln2b[l] = add(at, h + "ln_2.bias", 1, c, Split.REPLICATED, 1, false);
      fcw[l] = add(at, h + "mlp.c_fc.weight", c, 4 * c, Split.COLUMNS, 1, true);
      fcb[l] = add(at, h + "mlp.c_fc.bias", 1, 4 * c, Split.COLUMNS, 1, false);
      fcprojw[l] = add(at, h + "mlp.c_proj.weight", 4 * c, c, Split.ROWS, 1, true);
      fcprojb[l] = add(at, h + "mlp.c_proj.bias", 1, c, Split.REPLICATED, 1, false);
    }
    lnfw = add(at, "ln_f.weight", 1, c, Split.REPLICATED, 1, false);
    lnfb = add(at, "ln_f.bias", 1, c, Split.REPLICATED, 1, false);
    size = at[0];
    fullSize = at[1];
  }

  private int add(int[] at, String name, int rows, int cols, Split split, int parts, boolean decay) {
    Tensor t = new Tensor(name, at[0], at[1], rows, cols, split, parts, decay);
    tensors.add(t);
    at[0] += t.size(cfg.tp());
    at[1] += rows * cols;
    return t.offset();
  }

  /** The tensors, in arena order. */
  public List<Tensor> tensors() {
    return List.copyOf(tensors);
  }

  /** Elements this rank holds. */
  public int size() {
    return size;
  }

  /** Elements of the full (TP = 1) model. */
  public int fullSize() {
    return fullSize;
  }

  /** This rank. */
  public int rank() {
    return rank;
  }

  /** This rank's block of every tensor of a full (TP = 1) parameter array, in arena order. */
  public float[] slice(float[] full) {
    float[] out = new float[size];
    for (Tensor t : tensors) {
      int n = t.size(cfg.tp());
      for (int i = 0; i < n; i++) out[t.offset() + i] = full[t.fullIndex(i, rank, cfg.tp())];
    }
    return out;
  }

  /**
   * The inverse of {@link #slice}: writes this rank's arena {@code block} into its places in the full (TP = 1) array
   * {@code full}. A replicated tensor already written there (by another rank) must hold the same bits, since every
   * rank computes identical values for it.
   *
   * @param written per full element, whether some rank wrote it already; updated
   * @throws IllegalStateException naming the tensor if this rank's copy of a replicated tensor differs from the one
   *     written before
   */
  public void placeInto(float[] block, float[] full, boolean[] written) {
    for (Tensor t : tensors) {
      int n = t.size(cfg.tp());
      for (int i = 0; i < n; i++) {
        int f = t.fullIndex(i, rank, cfg.tp());
        float x = block[t.offset() + i];
        if (written[f] && Float.floatToRawIntBits(full[f]) != Float.floatToRawIntBits(x)) {
          throw new IllegalStateException("rank " + rank + "'s copy of the replicated tensor " + t.name()
              + " differs from another rank's at element " + i + " (" + x + " vs " + full[f] + ")");
        }
        full[f] = x;
        written[f] = true;
      }
    }
  }

  /** AdamW's per-element weight-decay switch (1 for the decayed tensors), in arena order. */
  public byte[] decayMask() {
    byte[] d = new byte[size];
    for (Tensor t : tensors) {
      if (t.decay()) Arrays.fill(d, t.offset(), t.offset() + t.size(cfg.tp()), (byte) 1);
    }
    return d;
  }

  /** Per-element flag of this rank's arena: true where the element belongs to a replicated tensor. */
  public boolean[] replicatedMask() {
    boolean[] r = new boolean[size];
    for (Tensor t : tensors) {
      if (t.split() == Split.REPLICATED) Arrays.fill(r, t.offset(), t.offset() + t.size(cfg.tp()), true);
    }
    return r;
  }

  /**
   * The full model's parameters from {@code seed}: normal(0, 0.02) matrices, normal(0, 0.01) position embeddings,
   * residual projections scaled by 1/sqrt(2L) (GPT-2), LayerNorm gains 1, biases 0. The same for every TP size.
   */
  public static float[] initFull(GptConfig cfg, long seed) {
    ParameterTensors f = new ParameterTensors(cfg.withTp(1), 0);
    float[] w = new float[f.fullSize];
    int c = cfg.hiddenSize(), layers = cfg.numLayers();
    float resid = (float) (0.02 / Math.sqrt(2.0 * layers));
    Random rng = new Random(seed);
    gaussian(w, f.wte, cfg.vocabSize() * c, 0.02f, rng);
    gaussian(w, f.wpe, cfg.seqLength() * c, 0.01f, rng);
    for (int l = 0; l < layers; l++) {
      Arrays.fill(w, f.ln1w[l], f.ln1w[l] + c, 1f);
      gaussian(w, f.qkvw[l], 3 * c * c, 0.02f, rng);
      gaussian(w, f.attprojw[l], c * c, resid, rng);
      Arrays.fill(w, f.ln2w[l], f.ln2w[l] + c, 1f);
      gaussian(w, f.fcw[l], 4 * c * c, 0.02f, rng);
      gaussian(w, f.fcprojw[l], 4 * c * c, resid, rng);
    }
    Arrays.fill(w, f.lnfw, f.lnfw + c, 1f);
    return w;
  }

  private static void gaussian(float[] w, int off, int n, float std, Random rng) {
    for (int i = 0; i < n; i++) w[off + i] = (float) (rng.nextGaussian() * std);
  }
}
