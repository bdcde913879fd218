package dev.taco.runtime.model;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The per-tensor shard descriptors give Megatron-LM's split, element by element, and partition the full model. */
class ParameterTensorsTest {
  static final GptConfig CFG = new GptConfig(256, 16, 2, 4, 32, 1);

  @ParameterizedTest(name = "R={0}")
  @ValueSource(ints = {1, 2, 4})
  void theMegatronSplitElementByElement(int r) {
    GptConfig cfg = CFG.withTp(r);
    int c = 32, cr = c / r, ff = 4 * c / r;
    ParameterTensors full = new ParameterTensors(cfg.withTp(1), 0);
    for (int rank = 0; rank < r; rank++) {
      ParameterTensors p = new ParameterTensors(cfg, rank);
      for (ParameterTensors.Tensor t : p.tensors()) {
        int n = t.size(r);
        for (int i = 0; i < n; i++) {
          int f = t.fullIndex(i, rank, r) - t.fullOffset();
          int expect = switch (t.split()) {
            case REPLICATED -> i;
            // rows of fc2 / attn proj: rank's rows, all columns
            case ROWS -> rank * (t.fullRows() / r) * t.fullCols() + i;
            case COLUMNS -> {
              int local = t.parts() * (t.fullCols() / t.parts() / r);
              int row = i / local, j = i % local, part = j / (local / t.parts()), within = j % (local / t.parts());
              yield row * t.fullCols() + part * (t.fullCols() / t.parts()) + rank * (local / t.parts()) + within;
            }
          };
          assertThat(f).as(t.name() + "[" + i + "] rank " + rank).isEqualTo(expect);
        }
      }
      // sizes: qkv (C, 3C/R), fc1 (C, 4C/R), the row-parallel projections (C/R, C) and (4C/R, C)
      assertThat(p.qkvb[0] - p.qkvw[0]).isEqualTo(c * 3 * cr);
      assertThat(p.attprojb[0] - p.attprojw[0]).isEqualTo(cr * c);
      assertThat(p.fcb[0] - p.fcw[0]).isEqualTo(c * ff);
      assertThat(p.fcprojb[0] - p.fcprojw[0]).isEqualTo(ff * c);
      float[] values = ParameterTensors.initFull(cfg, 7);
      float[] sliced = p.slice(values);
      for (ParameterTensors.Tensor t : p.tensors()) {
        assertThat(sliced[t.offset()]).isEqualTo(values[t.fullIndex(0, rank, r)]);
      }
    }
    assertThat(full.size()).isEqualTo(full.fullSize());
  }

  @Test
  void everyFullElementIsOwnedOnceOrReplicatedOnEveryRank() {
    int r = 4;
    GptConfig cfg = CFG.withTp(r);
    int fullSize = new ParameterTensors(cfg.withTp(1), 0).fullSize();
    int[] owners = new int[fullSize];
    for (int rank = 0; rank < r; rank++) {
      ParameterTensors p = new ParameterTensors(cfg, rank);
      for (ParameterTensors.Tensor t : p.tensors()) {
        for (int i = 0; i < t.size(r); i++) owners[t.fullIndex(i, rank, r)]++;
      }
    }
    ParameterTensors one = new ParameterTensors(cfg.withTp(1), 0);
    for (ParameterTensors.Tensor t : one.tensors()) {
      int expect = t.split() == ParameterTensors.Split.REPLICATED ? r : 1;
      for (int i = 0; i < t.size(1); i++) {
        assertThat(owners[t.fullOffset() + i]).as(t.name() + "[" + i + "]").isEqualTo(expect);
      }
    }
  }
}
