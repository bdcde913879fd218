package dev.taco.runtime.analyze;

import static dev.taco.runtime.analyze.TestFiles.f32;
import static dev.taco.runtime.analyze.TestFiles.safetensors;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link SafetensorsReader} on hand-built files (header JSON written here, byte by byte as the safetensors README
 * specifies) and on every malformed case. The library-written fixtures are checked in {@link FixturesTest}.
 */
class SafetensorsReaderTest {
  @TempDir
  Path tmp;

  static String t(String name, String dtype, String shape, long begin, long end) {
    return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": [" + begin
        + ", " + end + "]}";
  }

  @Test
  void readsEveryAcceptedDtypeInHeaderOrder() throws Exception {
    ByteBuffer d = ByteBuffer.allocate(4 * 4 + 2 * 2 + 2 * 2 + 8).order(ByteOrder.LITTLE_ENDIAN);
    d.putFloat(1).putFloat(-2).putFloat(3).putFloat(0.5f); // F32 [2,2] at 0..16
    d.putShort((short) 0x3f80).putShort((short) 0xc040); // BF16 [2]: 1, -3 at 16..20
    d.putShort((short) 0x3800).putShort((short) 0x7bff); // F16 [2]: 0.5, 65504 at 20..24
    d.putDouble(0.1); // F64 scalar at 24..32
    String header = "{\"__metadata__\": {\"format\": \"pt\"}, " + t("z.f64", "F64", "[]", 24, 32) + ", "
        + t("a.f32", "F32", "[2, 2]", 0, 16) + ", " + t("b.bf16", "BF16", "[2]", 16, 20) + ", "
        + t("c.f16", "F16", "[2]", 20, 24) + ", " + t("empty", "F32", "[0, 4]", 32, 32) + "}   ";
    List<NamedTensor> ts = SafetensorsReader.read(safetensors(tmp.resolve("a.safetensors"), header, d.array()));
    assertThat(ts).extracting(NamedTensor::name).containsExactly("z.f64", "a.f32", "b.bf16", "c.f16", "empty");
    assertThat(ts.get(0).data()).containsExactly(0.1f);
    assertThat(ts.get(0).shape()).isEmpty();
    assertThat(ts.get(1).data()).containsExactly(1, -2, 3, 0.5f);
    assertThat(ts.get(1).shape()).containsExactly(2, 2);
    assertThat(ts.get(2).data()).containsExactly(1, -3);
    assertThat(ts.get(2).dtype()).isEqualTo("BF16");
    assertThat(ts.get(3).data()).containsExactly(0.5f, 65504f);
    assertThat(ts.get(4).size()).isZero();
  }

  Path file(String header, byte[] data) throws Exception {
    return safetensors(tmp.resolve("x.safetensors"), header, data);
  }

  void refused(String expected, String header, byte[] data) throws Exception {
    Path f = file(header, data);
    assertThatThrownBy(() -> SafetensorsReader.read(f)).isInstanceOf(TensorFileException.class)
        .hasMessageStartingWith(f + ": ").hasMessageContaining(expected).message().doesNotContain("\n");
  }

  @Test
  void refusesUnsupportedDtypesNamingTensorAndDtype() throws Exception {
    refused("tensor 'ids': dtype I32 is not supported", "{" + t("ids", "I32", "[2]", 0, 8) + "}", new byte[8]);
    refused("tensor 'q': dtype F8_E4M3 is not supported", "{" + t("q", "F8_E4M3", "[2]", 0, 2) + "}", new byte[2]);
    refused("tensor 'w': dtype f32 is not supported", "{" + t("w", "f32", "[1]", 0, 4) + "}", f32(1));
    refused("missing or non-string \"dtype\"", "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", f32(1));
  }

  @Test
  void refusesOffsetsThatLie() throws Exception {
    byte[] d = f32(1, 2, 3, 4);
    refused("lie outside the data section (16 bytes)", "{" + t("w", "F32", "[8]", 0, 32) + "}", d);
    refused("has begin > end", "{" + t("w", "F32", "[1]", 8, 4) + "}", d);
    refused("span 16 bytes, but shape [3] of F32 needs 12", "{" + t("w", "F32", "[3]", 0, 16) + "}", d);
    refused("tensors 'a' [0, 12) and 'b' [8, 16) overlap",
        "{" + t("a", "F32", "[3]", 0, 12) + ", " + t("b", "F32", "[2]", 8, 16) + "}", d);
    refused("gap of 4 bytes", "{" + t("a", "F32", "[1]", 0, 4) + ", " + t("b", "F32", "[2]", 8, 16) + "}", d);
    refused("cover 8 bytes of a 16-byte data section", "{" + t("a", "F32", "[2]", 0, 8) + "}", d);
    refused("\"data_offsets\" must be an array of 2 non-negative integers",
        "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0]}}", d);
    refused("got -4", "{" + t("w", "F32", "[4]", -4, 12) + "}", d);
    refused("got 1.5", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 16]}}", d);
    refused("too large", "{" + t("w", "F32", "[100000, 100000]", 0, 16) + "}", d);
  }

  @Test
  void refusesMalformedHeaders() throws Exception {
    byte[] d = f32(1);
    String ok = t("w", "F32", "[1]", 0, 4);
    refused("not valid JSON", "{" + ok, d);
    refused("not valid JSON", "{" + ok + ",}", d);
    refused("does not start with '{'", " {" + ok + "}", d);
    refused("duplicate name 'w'", "{" + ok + ", " + ok + "}", d);
    refused("\"__metadata__\" value of 'n' is not a string", "{\"__metadata__\": {\"n\": 1}, " + ok + "}", d);
    refused("not a JSON object", "{\"w\": [1]}", d);
  }

  @Test
  void refusesHeaderLengthsBeyondTheFile() throws Exception {
    Path f = file("{" + t("w", "F32", "[1]", 0, 4) + "}", f32(1));
    byte[] all = Files.readAllBytes(f);
    for (long n : new long[] {all.length, Long.MAX_VALUE, -1L}) {
      ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN).putLong(0, n);
      Path g = Files.write(tmp.resolve("g.safetensors"), all);
      assertThatThrownBy(() -> SafetensorsReader.read(g)).hasMessageContaining("exceeds the file");
    }
    Path tiny = Files.write(tmp.resolve("tiny.safetensors"), new byte[] {1, 0, 0});
    assertThatThrownBy(() -> SafetensorsReader.read(tiny)).hasMessageContaining("too short");
    // a header length over 100 MB inside a (sparse) file that long: refused before anything is allocated
    Path big = tmp.resolve("big.safetensors");
    try (RandomAccessFile r = new RandomAccessFile(big.toFile(), "rw")) {
      r.setLength(200_000_000L);
      r.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(150_000_000L).array());
    }
    assertThatThrownBy(() -> SafetensorsReader.read(big)).hasMessageContaining("exceeds 100 MB");
  }
}
