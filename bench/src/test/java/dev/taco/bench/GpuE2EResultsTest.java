package dev.taco.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The end-to-end benchmark's result rows: strict JSON, speed-up and Amdahl ceiling against the same link's none. */
class GpuE2EResultsTest {
  @Test
  void speedUpCeilingAndFractionAgainstNoneAndNullWhereThereIsNone() {
    long seed = new SplittableRandom().nextLong();
    SplittableRandom rng = new SplittableRandom(seed);
    int[] shape = {1024, 8, 16, 2048, 4};
    double nocomm = 5 + 10 * rng.nextDouble(), noneMs = nocomm + 5 + 20 * rng.nextDouble();
    double tacoMs = nocomm + (noneMs - nocomm) * (0.5 + 0.4 * rng.nextDouble());
    long bytes = 1L << 28;
    List<GpuE2E.Row> rows = List.of(
        new GpuE2E.Row("ib-ndr", 8, false, shape, "none", noneMs, noneMs, nocomm, bytes, ""),
        new GpuE2E.Row("ib-ndr", 8, false, shape, "taco", tacoMs, tacoMs, nocomm, bytes / 2, "taco in-order"),
        new GpuE2E.Row("pcie5-8", 8, false, shape, "taco", tacoMs, tacoMs, nocomm, bytes / 2, "")); // no none there
    List<String> out = GpuE2E.results(rows);
    System.out.println("GpuE2EResultsTest seed = " + seed);

    JsonObject none = JsonParser.parseString(out.get(0)).getAsJsonObject();
    JsonObject taco = JsonParser.parseString(out.get(1)).getAsJsonObject();
    JsonObject orphan = JsonParser.parseString(out.get(2)).getAsJsonObject();
    assertThat(none.get("fraction_of_ceiling").isJsonNull()).as("none's own fraction: 0/0").isTrue();
    assertThat(none.get("speedup").getAsDouble()).isEqualTo(1.0);
    double ceiling = noneMs / (nocomm + (noneMs - nocomm) * 0.5);
    assertThat(taco.get("speedup").getAsDouble()).as("seed %d", seed).isCloseTo(noneMs / tacoMs,
        org.assertj.core.data.Offset.offset(1e-4));
    assertThat(taco.get("ceiling").getAsDouble()).isCloseTo(ceiling, org.assertj.core.data.Offset.offset(1e-4));
    assertThat(taco.get("fraction_of_ceiling").getAsDouble()).isCloseTo((noneMs / tacoMs - 1) / (ceiling - 1),
        org.assertj.core.data.Offset.offset(1e-3));
    assertThat(orphan.get("speedup").isJsonNull()).as("no none on that link: no speed-up").isTrue();
    assertThat(orphan.get("ceiling").isJsonNull()).isTrue();
  }
}
