package dev.taco.runtime.analyze;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.codec.CodecStats;
import dev.taco.codec.Int8GroupCodec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The codec's error against numpy (docs/design.md §3): on files written by the real numpy (and safetensors) libraries, the
 * Java {@code int8-group} relative L2 error equals an independent numpy computation of the same definition
 * ({@code make_fixtures.py}, recorded in {@code expected.json}) to 3 significant digits.
 */
class FixturesTest {
  static JsonObject expected() throws Exception {
    return JsonParser.parseString(Files.readString(TestFiles.fixtures().resolve("expected.json"))).getAsJsonObject();
  }

  /** Checks every expected tensor of files whose name ends with {@code suffix}; returns how many were checked. */
  static int check(String suffix) throws Exception {
    int checked = 0;
    for (JsonElement e : expected().getAsJsonArray("tensors")) {
      JsonObject o = e.getAsJsonObject();
      String file = o.get("file").getAsString();
      if (!file.endsWith(suffix)) {
        continue;
      }
      List<NamedTensor> ts = TensorFiles.read(TestFiles.fixtures().resolve(file));
      NamedTensor t = ts.stream().filter(x -> x.name().equals(o.get("tensor").getAsString())).findFirst()
          .orElseThrow(() -> new AssertionError(file + ": no tensor " + o.get("tensor")));
      List<Integer> shape = new ArrayList<>();
      o.getAsJsonArray("shape").forEach(s -> shape.add(s.getAsInt()));
      assertThat(t.shape()).as(file).containsExactly(shape.stream().mapToInt(Integer::intValue).toArray());
      assertThat(t.dtype()).as(file).isEqualTo(o.get("dtype").getAsString());
      double want = o.get("int8_group_rel_l2").getAsDouble();
      double got = CodecStats.measure(new Int8GroupCodec(128), t.data(), t.rows(), t.cols()).relL2();
      assertThat(got).as("%s:%s int8-group rel L2", file, t.name()).isCloseTo(want, within(5e-4 * want));
      // the definitions agree operation by operation, so in practice the match is far tighter than 3 digits
      assertThat(got).as("%s:%s exact agreement", file, t.name()).isCloseTo(want, within(1e-9 * want));
      checked++;
    }
    return checked;
  }

  @Test
  void numpyWrittenNpyMatchesIndependentInt8GroupError() throws Exception {
    assertThat(check(".npy")).isGreaterThanOrEqualTo(7);
  }

  @Test
  void numpyWrittenInvalidFilesAreRefused() throws Exception {
    for (JsonElement e : expected().getAsJsonArray("invalid")) {
      Path f = TestFiles.fixtures().resolve(e.getAsJsonObject().get("file").getAsString());
      assertThatThrownBy(() -> TensorFiles.read(f)).isInstanceOf(TensorFileException.class)
          .hasMessageContaining(e.getAsJsonObject().get("error_contains").getAsString());
    }
  }

  /**
   * LIBRARY-WRITTEN SAFETENSORS FIXTURES. They are written by {@code make_fixtures.py --only safetensors} on a
   * machine with the safetensors and torch packages (bf16_torch.safetensors: BF16 via torch;
   * mixed_numpy.safetensors: F16/F32/F64 via safetensors.numpy) and committed next to it; until then this test is
   * skipped, visibly, and the hand-built files of {@link SafetensorsReaderTest} stand in.
   */
  @Test
  void libraryWrittenSafetensorsMatchIndependentInt8GroupError() throws Exception {
    Path dir = TestFiles.fixtures();
    Assumptions.assumeTrue(Files.exists(dir.resolve("bf16_torch.safetensors")),
        "SKIPPED: library-written safetensors fixtures absent; run `python3 make_fixtures.py --only safetensors`"
            + " in runtime/src/test/resources/analyze on a machine with safetensors+torch and commit the output");
    assertThat(check(".safetensors")).isGreaterThanOrEqualTo(4);
  }
}
