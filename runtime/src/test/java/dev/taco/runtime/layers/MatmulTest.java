package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import java.util.function.DoubleSupplier;
import org.junit.jupiter.api.Test;

class MatmulTest {
  static final int B = 2, T = 5, C = 8, OC = 12, BT = B * T;

  final long seed = LanesAssert.seed(getClass().getSimpleName());
  final Random rnd = new Random(seed);
  final float[] inp = Bufs.input(BT * C, rnd, 1.0);
  final float[] weight = Bufs.input(C * OC, rnd, 0.5);
  final float[] bias = Bufs.input(OC, rnd, 1.0);
  final float[] out = Bufs.output(BT * OC);

  @Test
  void forwardMatchesDoubleReference() {
    Matmul.forward(out, OFF, inp, OFF, weight, OFF, bias, OFF, B, T, C, OC);
    for (int i = 0; i < BT; i++) {
      for (int j = 0; j < OC; j++) {
        double s = bias[OFF + j], mag = Math.abs(bias[OFF + j]);
        for (int c = 0; c < C; c++) {
          double term = (double) inp[OFF + i * C + c] * weight[OFF + c * OC + j];
          s += term;
          mag += Math.abs(term);
        }
        // a float32 product per term and C partial sums: within about (C + 1) * 2^-24 of the magnitude; twice that
        Bufs.assertNear("out[" + i + "," + j + "], seed " + seed, out[OFF + i * OC + j], s, mag, 2 * (C + 1) * 0x1p-24);
      }
    }
    Bufs.assertPadsIntact("out", out, BT * OC);
  }

  @Test
  void nullBiasMeansNoBias() {
    float[] withZero = Bufs.output(BT * OC);
    Matmul.forward(withZero, OFF, inp, OFF, weight, OFF, Bufs.output(OC), OFF, B, T, C, OC);
    Matmul.forward(out, OFF, inp, OFF, weight, OFF, null, 0, B, T, C, OC);
    assertThat(out).containsExactly(withZero);
  }

  @Test
  void backwardMatchesFiniteDifferences() {
    double[] r = Bufs.weights(BT * OC, rnd);
    float[] dout = Bufs.asDout(r);
    float[] dinp = Bufs.output(BT * C), dweight = Bufs.output(C * OC), dbias = Bufs.output(OC);
    Matmul.backward(dinp, OFF, dweight, OFF, dbias, OFF, dout, OFF, inp, OFF, weight, OFF, B, T, C, OC);
    Bufs.assertPadsIntact("dinp", dinp, BT * C);
    Bufs.assertPadsIntact("dweight", dweight, C * OC);
    Bufs.assertPadsIntact("dbias", dbias, OC);
    DoubleSupplier loss = () -> {
      Matmul.forward(out, OFF, inp, OFF, weight, OFF, bias, OFF, B, T, C, OC);
      return Bufs.dot(out, r);
    };
    GradCheck.check("dinp", inp, dinp, BT * C, loss);
    GradCheck.check("dweight", weight, dweight, C * OC, loss);
    GradCheck.check("dbias", bias, dbias, OC, loss);
  }

  @Test
  void backwardAccumulates() {
    float[] dout = Bufs.asDout(Bufs.weights(BT * OC, rnd));
    float[] dinp = Bufs.output(BT * C), dweight = Bufs.output(C * OC), dbias = Bufs.output(OC);
    GradCheck.assertAccumulates(
        () -> Matmul.backward(dinp, OFF, dweight, OFF, dbias, OFF, dout, OFF, inp, OFF, weight, OFF, B, T, C, OC),
        new float[][] {dinp, dweight, dbias}, new int[] {BT * C, C * OC, OC});
  }

  @Test
  void rejectsBadArguments() {
    assertThatThrownBy(() -> Matmul.forward(out, OFF, inp, OFF, weight, OFF, bias, OFF, B, T, C, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("OC");
    assertThatThrownBy(() -> Matmul.forward(out, OFF, inp, OFF, new float[C * OC - 1], 0, bias, OFF, B, T, C, OC))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("weight");
    assertThatThrownBy(() -> Matmul.forward(out, OFF, inp, OFF, weight, OFF, new float[2], 0, B, T, C, OC))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bias");
    assertThatThrownBy(
        () -> Matmul.backward(new float[1], 0, weight, OFF, null, 0, out, OFF, inp, OFF, weight, OFF, B, T, C, OC))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dinp");
  }

  @Test
  void addBiasIsTheBiasOfForward() {
    float[] viaForward = Bufs.output(BT * OC);
    Matmul.forward(viaForward, OFF, inp, OFF, weight, OFF, bias, OFF, B, T, C, OC);
    Matmul.forward(out, OFF, inp, OFF, weight, OFF, null, 0, B, T, C, OC);
    Matmul.addBias(out, OFF, bias, OFF, BT, OC);
    assertThat(out).containsExactly(viaForward);
    assertThatThrownBy(() -> Matmul.addBias(out, OFF, new float[OC - 1], 0, BT, OC))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bias");
    assertThatThrownBy(() -> Matmul.addBias(out, OFF, bias, OFF, 0, OC))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("N");
  }
}
