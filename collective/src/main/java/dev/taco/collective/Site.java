package dev.taco.collective;

import java.util.Objects;

/**
 * A collective site: one place in the training step where a tensor crosses the wire, with a codec plan of its own
 * (docs/design.md §3.1). A typed value: a layer's tensor-parallel collective ({@link Layer}) or a parameter's
 * data-parallel gradient all-reduce ({@link Gradient}). Its {@link #name()} is what reports and checkpoints show and
 * store; nothing parses it back.
 */
public sealed interface Site {
  /** The pass a site's tensor belongs to: activations forward, their gradients backward. */
  enum Direction {
    FORWARD("fwd"), BACKWARD("bwd");

    private final String label;

    Direction(String label) {
      this.label = label;
    }

    /** {@code fwd} or {@code bwd}, as site names and the codec-error report give it. */
    public String label() {
      return label;
    }
  }

  /** The part of a transformer block a tensor-parallel site ends. */
  enum Block {
    ATTENTION("attn"), MLP("mlp");

    private final String label;

    Block(String label) {
      this.label = label;
    }

    /** {@code attn} or {@code mlp}. */
    public String label() {
      return label;
    }
  }

  /** The name reports and checkpoints use, e.g. {@code layer3.mlp.fwd}. */
  String name();

  /** The pass its tensor belongs to. */
  Direction direction();

  /**
   * A tensor-parallel collective of block {@code block} of layer {@code layer} (Megatron-LM's f/g operators, Shoeybi
   * et al. 2019 §3): forward the row-parallel output, backward the column-parallel input's gradient; with sequence
   * parallelism, {@code gather} marks the all-gather in front of the block's column-parallel linear (forward) or of its
   * row-parallel linear's backward (Korthikanti et al. 2022 §4.2.2). Named {@code layer<l>.<block>[.gather].<dir>}.
   *
   * @param layer 0-based layer index
   * @throws IllegalArgumentException for a negative layer
   */
  record Layer(int layer, Block block, boolean gather, Direction direction) implements Site {
    /** Validates the layer index. */
    public Layer {
      if (layer < 0) throw new IllegalArgumentException("a layer index is >= 0, got " + layer);
      Objects.requireNonNull(block, "block");
      Objects.requireNonNull(direction, "direction");
    }

    @Override
    public String name() {
      return "layer" + layer + "." + block.label() + (gather ? ".gather." : ".") + direction.label();
    }

    @Override
    public String toString() {
      return name();
    }
  }

  /**
   * The data-parallel gradient all-reduce of parameter tensor {@code tensor} (backward), named {@code dp.<tensor>}.
   *
   * @throws IllegalArgumentException for a blank tensor name
   */
  record Gradient(String tensor) implements Site {
    /** Validates the name. */
    public Gradient {
      if (tensor == null || tensor.isBlank()) throw new IllegalArgumentException("a gradient site names its tensor");
    }

    @Override
    public String name() {
      return "dp." + tensor;
    }

    @Override
    public Direction direction() {
      return Direction.BACKWARD;
    }

    @Override
    public String toString() {
      return name();
    }
  }
}
