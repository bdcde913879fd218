package dev.taco.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The foreign-function binding of numpy's OpenBLAS that the GEMM benchmark alternates with ours: each transpose
 * against a float64 reference, so that a ratio never compares our product with a different one. Skips (with the
 * reason) where python3 with numpy's bundled OpenBLAS is missing.
 */
class OpenBlasTest {
  /** The library's path, or null; {@link #missing} says why. */
  private static Path library;

  private static String missing;

  @BeforeAll
  static void locate() throws Exception {
    Process p;
    try {
      p = new ProcessBuilder("python3", "gemm_openblas.py", "lib").redirectErrorStream(true).start();
    } catch (IOException e) {
      missing = "no python3 on this machine: " + e.getMessage();
      return;
    }
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    if (p.waitFor() == 0) library = Path.of(out);
    else missing = "gemm_openblas.py lib found no numpy OpenBLAS (python3 without numpy?): " + out;
  }

  /** The library, or the test skipped with the reason (reported per test, not as a silent empty class). */
  private static Path library() {
    Assumptions.assumeTrue(library != null, () -> missing);
    return library;
  }

  @Test
  void everyTransposeMatchesAFloat64Reference() {
    OpenBlas lib = new OpenBlas(library());
    lib.threads(1);
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    Random r = new Random(seed);
    int[][] shapes = {{37, 53, 29}, {64, 128, 96}, {5, 300, 17}};
    for (int[] sh : shapes) {
      int m = sh[0], k = sh[1], n = sh[2];
      for (int op = 0; op < 3; op++) {
        boolean transA = op == 1, transB = op == 2;
        for (boolean accumulate : new boolean[] {false, true}) {
          float[] a = random(r, m * k), b = random(r, k * n), c = random(r, m * n);
          double[] want = new double[m * n];
          for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
              double sum = accumulate ? c[i * n + j] : 0;
              for (int p = 0; p < k; p++) {
                double x = transA ? a[p * m + i] : a[i * k + p];
                double y = transB ? b[j * k + p] : b[p * n + j];
                sum += x * y;
              }
              want[i * n + j] = sum;
            }
          }
          lib.sgemm(transA, transB, m, n, k, a, b, c, accumulate);
          double err = 0, norm = 0;
          for (int i = 0; i < want.length; i++) {
            err += (c[i] - want[i]) * (c[i] - want[i]);
            norm += want[i] * want[i];
          }
          assertThat(Math.sqrt(err / norm))
              .as("%dx%dx%d op %d accumulate %b (seed %d: -Dtaco.seed)", m, k, n, op, accumulate, seed)
              .isLessThan(1e-5); // NaN fails too
        }
      }
    }
  }

  @Test
  void aFileThatIsNotTheLibraryIsNamedInTheError() throws IOException {
    Path bogus = Files.createTempFile("not-openblas", ".so");
    try {
      assertThatThrownBy(() -> new OpenBlas(bogus))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining(bogus.toString());
    } finally {
      Files.delete(bogus);
    }
  }

  @Test
  void eachAlternatedModeReportsBothSidesAndTheMedianRatio() throws Exception {
    OpenBlas lib = new OpenBlas(library());
    String key = "default:1024x64x128:AB:set";
    for (String mode : new String[] {"pair", "solo"}) {
      JsonObject r = JsonParser.parseString(GemmShapesBench.alternate(lib, key, mode, 1, 5, 2)).getAsJsonObject();
      assertThat(r.get("mode").getAsString()).isEqualTo(mode);
      assertThat(r.get("threads").getAsInt()).as(mode).isEqualTo(mode.equals("pair") ? 2 : 1);
      double ratio = r.get("ratio").getAsDouble();
      assertThat(r.get("gflops").getAsDouble()).as(mode).isPositive();
      assertThat(r.get("openblas_gflops").getAsDouble()).as(mode).isPositive();
      assertThat(ratio).as(mode).isBetween(r.get("ratio_q1").getAsDouble(), r.get("ratio_q3").getAsDouble());
    }
    assertThatThrownBy(() -> GemmShapesBench.alternate(lib, key, "cpu", 1, 5, 2))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cpu does not alternate (pair, solo, core)");
  }

  private static float[] random(Random r, int n) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) x[i] = (float) r.nextGaussian();
    return x;
  }
}
