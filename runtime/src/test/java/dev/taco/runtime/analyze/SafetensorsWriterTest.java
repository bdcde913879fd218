package dev.taco.runtime.analyze;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link SafetensorsWriter}: the same tensors and metadata give the same bytes whatever the metadata map's order (a
 * checkpoint's files were byte-different in every JVM, Map.of's order), and read back as written.
 */
class SafetensorsWriterTest {
  @TempDir
  Path tmp;

  @Test
  void theSameTensorsAndMetadataGiveTheSameBytesWhateverTheMapsOrder() throws Exception {
    List<SafetensorsWriter.Tensor> tensors = List.of(new SafetensorsWriter.Tensor("w", new int[] {2, 2},
        new float[] {1, -2, 3, 0.5f}, 0), new SafetensorsWriter.Tensor("b", new int[] {2}, new float[] {7, 8}, 0));
    Map<String, String> forward = new LinkedHashMap<>(), backward = new LinkedHashMap<>();
    for (String k : List.of("format", "step", "codec")) forward.put(k, k + "-value");
    for (String k : List.of("codec", "step", "format")) backward.put(k, k + "-value");
    Path a = tmp.resolve("a.safetensors"), b = tmp.resolve("b.safetensors");
    SafetensorsWriter.write(a, tensors, forward);
    SafetensorsWriter.write(b, tensors, backward);
    assertThat(Files.mismatch(a, b)).isEqualTo(-1L);
    byte[] bytes = Files.readAllBytes(a);
    String header = new String(bytes, 8, (int) java.nio.ByteBuffer.wrap(bytes).order(java.nio.ByteOrder.LITTLE_ENDIAN)
        .getLong(0), StandardCharsets.UTF_8);
    assertThat(header).startsWith("{\"__metadata__\":{\"codec\":\"codec-value\",\"format\":\"format-value\","
        + "\"step\":\"step-value\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}");
    List<NamedTensor> read = SafetensorsReader.read(a);
    assertThat(read).extracting(NamedTensor::name).containsExactly("w", "b");
    assertThat(read.get(1).data()).containsExactly(7, 8);
  }
}
