package dev.taco.runtime.analyze;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonPrimitive;
import com.google.gson.Strictness;
import com.google.gson.TypeAdapter;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import java.io.IOException;
import java.io.StringReader;
import java.math.BigDecimal;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A strict reader of {@code .safetensors} files (the format of the huggingface/safetensors README).
 *
 * <p>Layout: {@code N}, a u64 little-endian; {@code N} bytes of UTF-8 JSON starting with {@code '{'} (trailing
 * spaces allowed) that map each tensor name to {@code {"dtype", "shape", "data_offsets": [begin, end]}}, plus an
 * optional {@code "__metadata__"} object of string to string; then the data section, offsets relative to its
 * start, each tensor little-endian in C order.
 *
 * <p>Accepted dtypes: {@code F16}, {@code BF16} (widened exactly to float32), {@code F32}, {@code F64} (rounded
 * to the nearest float32). Validated before any data buffer is allocated, each failure a one-line
 * {@link TensorFileException}: {@code N <= file size - 8} and {@code N <= 100 MB}; strict JSON, no duplicate
 * names; {@code 0 <= begin <= end <= data section length}; {@code end - begin == product(shape) * dtype size};
 * and, as the README requires ("the byte buffer needs to be entirely indexed, and cannot contain holes"), the
 * tensors sorted by offset tile the data section exactly: no overlap, no gap, no trailing bytes. An unknown or
 * unsupported dtype is an error naming the tensor and the dtype. Empty tensors (a zero dimension, no bytes) and
 * scalars (shape {@code []}) are accepted.
 */
public final class SafetensorsReader {
  private static final Logger log = LoggerFactory.getLogger(SafetensorsReader.class);

  /** The largest header accepted, as in the reference implementation (100 MB). */
  public static final long MAX_HEADER = 100_000_000L;

  private static final TypeAdapter<JsonElement> JSON = new Gson().getAdapter(JsonElement.class);

  private SafetensorsReader() {}

  private record Entry(String name, String dtype, ElementType type, long[] shape, long begin, long end) {}

  /**
   * Reads every tensor of a safetensors file.
   *
   * @param file the file
   * @return the tensors in header order, each named as in the header, with its shape, dtype name and float32 data
   * @throws TensorFileException if the file is malformed or holds a dtype other than F16, BF16, F32, F64
   * @throws IOException if it cannot be read
   */
  public static List<NamedTensor> read(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      Header h = header(ch, file);
      long dataStart = h.dataStart();
      List<Entry> entries = parseHeader(file, h.text(), ch.size() - dataStart);
      List<NamedTensor> out = new ArrayList<>(entries.size());
      for (Entry e : entries) {
        int count = (int) ((e.end - e.begin) / e.type.size);
        float[] data = e.type.read(ch, file, e.name, dataStart + e.begin, count);
        int[] shape = new int[e.shape.length];
        for (int i = 0; i < shape.length; i++) {
          shape[i] = (int) e.shape[i];
        }
        out.add(new NamedTensor(e.name, shape, e.dtype, data));
      }
      log.debug("{}: {} tensors", file, out.size());
      return out;
    }
  }

  /**
   * The {@code __metadata__} of a safetensors file (what {@code taco train --dump-sites} writes about its run), checked
   * as {@link #read} checks it; empty where the header has none.
   *
   * @throws TensorFileException if the header is malformed
   * @throws IOException if the file cannot be read
   */
  public static Map<String, String> metadata(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      JsonElement m = topLevel(file, header(ch, file).text()).get("__metadata__");
      Map<String, String> out = new LinkedHashMap<>();
      if (m != null) {
        checkMetadata(file, m);
        m.getAsJsonObject().entrySet().forEach(e -> out.put(e.getKey(), e.getValue().getAsString()));
      }
      return out;
    }
  }

  /** A header's JSON text and where the data section after it starts. */
  private record Header(String text, long dataStart) {}

  /** The header, its length and encoding checked against the file. */
  private static Header header(FileChannel ch, Path file) throws IOException {
    long fileSize = ch.size();
    if (fileSize < 8) {
      throw new TensorFileException(file, "too short for a safetensors file (" + fileSize + " bytes)");
    }
    long n = TensorFiles.readFully(ch, file, 0, 8).getLong();
    if (n < 0 || n > fileSize - 8) {
      throw new TensorFileException(file, "safetensors header length " + Long.toUnsignedString(n)
          + " exceeds the file (" + fileSize + " bytes)");
    }
    if (n > MAX_HEADER) {
      throw new TensorFileException(file, "safetensors header length " + n + " exceeds 100 MB");
    }
    String text;
    try {
      text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .decode(TensorFiles.readFully(ch, file, 8, (int) n)).toString();
    } catch (CharacterCodingException e) {
      throw new TensorFileException(file, "safetensors header is not valid UTF-8");
    }
    if (!text.startsWith("{")) {
      throw new TensorFileException(file, "safetensors header does not start with '{'");
    }
    return new Header(text, 8 + n);
  }

  /** The header's top-level names and values, in order: strict JSON, no name twice. */
  private static Map<String, JsonElement> topLevel(Path file, String text) {
    Map<String, JsonElement> top = new LinkedHashMap<>();
    try (JsonReader r = new JsonReader(new StringReader(text))) {
      r.setStrictness(Strictness.STRICT);
      r.beginObject();
      while (r.hasNext()) {
        String name = r.nextName();
        if (top.put(name, JSON.read(r)) != null) {
          throw new TensorFileException(file, "duplicate name '" + name + "' in the safetensors header");
        }
      }
      r.endObject();
      if (r.peek() != JsonToken.END_DOCUMENT) {
        throw new TensorFileException(file, "text after the safetensors header's JSON object");
      }
    } catch (IOException | JsonParseException | IllegalStateException e) {
      throw new TensorFileException(file, "safetensors header is not valid JSON: " + jsonProblem(e.getMessage()));
    }
    return top;
  }

  /** Parses and validates the header against a data section of {@code dataLen} bytes. */
  private static List<Entry> parseHeader(Path file, String text, long dataLen) {
    Map<String, JsonElement> top = topLevel(file, text);
    List<Entry> entries = new ArrayList<>();
    for (Map.Entry<String, JsonElement> kv : top.entrySet()) {
      String name = kv.getKey();
      if (name.equals("__metadata__")) {
        checkMetadata(file, kv.getValue());
        continue;
      }
      String what = "tensor '" + name + "'";
      if (!(kv.getValue() instanceof JsonObject o)) {
        throw new TensorFileException(file, what + ": not a JSON object");
      }
      if (!(o.get("dtype") instanceof JsonPrimitive dp) || !dp.isString()) {
        throw new TensorFileException(file, what + ": missing or non-string \"dtype\"");
      }
      String dtype = dp.getAsString();
      ElementType type;
      try {
        type = ElementType.valueOf(dtype);
      } catch (IllegalArgumentException e) {
        throw new TensorFileException(file, what + ": dtype " + dtype + " is not supported (F16, BF16, F32, F64 are)");
      }
      long[] shape = longs(file, what, "shape", o.get("shape"), -1);
      long[] offsets = longs(file, what, "data_offsets", o.get("data_offsets"), 2);
      long begin = offsets[0];
      long end = offsets[1];
      if (begin > end) {
        throw new TensorFileException(file, what + ": data_offsets [" + begin + ", " + end + "] has begin > end");
      }
      if (end > dataLen) {
        throw new TensorFileException(file, what + ": data_offsets [" + begin + ", " + end
            + "] lie outside the data section (" + dataLen + " bytes)");
      }
      long bytes = type.byteLength(shape, file, what);
      if (end - begin != bytes) {
        throw new TensorFileException(file, what + ": data_offsets [" + begin + ", " + end + "] span " + (end - begin)
            + " bytes, but shape " + java.util.Arrays.toString(shape) + " of " + dtype + " needs " + bytes);
      }
      entries.add(new Entry(name, dtype, type, shape, begin, end));
    }
    checkTiling(file, entries, dataLen);
    return entries;
  }

  /** The README's rule: sorted by offset, the tensors cover the data section exactly once, without holes. */
  private static void checkTiling(Path file, List<Entry> entries, long dataLen) {
    List<Entry> sorted = new ArrayList<>(entries);
    sorted.sort(Comparator.comparingLong(Entry::begin).thenComparingLong(Entry::end));
    long covered = 0;
    Entry prev = null;
    for (Entry e : sorted) {
      if (e.begin < covered) {
        throw new TensorFileException(file, "tensors '" + prev.name + "' [" + prev.begin + ", " + prev.end + ") and '"
            + e.name + "' [" + e.begin + ", " + e.end + ") overlap");
      }
      if (e.begin > covered) {
        throw new TensorFileException(file, "gap of " + (e.begin - covered) + " bytes in the data section before"
            + " tensor '" + e.name + "' (the format requires the tensors to cover it without holes)");
      }
      covered = e.end;
      prev = e;
    }
    if (covered != dataLen) {
      throw new TensorFileException(file, "the tensors cover " + covered + " bytes of a " + dataLen
          + "-byte data section (trailing bytes, or offsets that lie)");
    }
  }

  private static void checkMetadata(Path file, JsonElement m) {
    if (!(m instanceof JsonObject o)) {
      throw new TensorFileException(file, "\"__metadata__\" is not a JSON object");
    }
    for (Map.Entry<String, JsonElement> kv : o.entrySet()) {
      if (!(kv.getValue() instanceof JsonPrimitive p) || !p.isString()) {
        throw new TensorFileException(file, "\"__metadata__\" value of '" + kv.getKey() + "' is not a string");
      }
    }
  }

  /** A JSON array of non-negative integers (of length {@code len} unless it is -1). */
  private static long[] longs(Path file, String what, String field, JsonElement e, int len) {
    String bad = what + ": \"" + field + "\" must be an array of " + (len < 0 ? "" : len + " ")
        + "non-negative integers";
    if (!(e instanceof JsonArray a) || (len >= 0 && a.size() != len)) {
      throw new TensorFileException(file, bad);
    }
    long[] v = new long[a.size()];
    for (int i = 0; i < v.length; i++) {
      if (!(a.get(i) instanceof JsonPrimitive p) || !p.isNumber()) {
        throw new TensorFileException(file, bad);
      }
      try {
        v[i] = new BigDecimal(p.getAsString()).longValueExact();
      } catch (ArithmeticException | NumberFormatException x) {
        throw new TensorFileException(file, bad + ", got " + p);
      }
      if (v[i] < 0) {
        throw new TensorFileException(file, bad + ", got " + v[i]);
      }
    }
    return v;
  }

  /**
   * The JSON library's message without its advice for programmers (a troubleshooting URL, "Use
   * JsonReader.setStrictness(...)") and the JSON path (thousands of characters for a deeply nested header), at most
   * 120 characters: one readable line.
   */
  static String jsonProblem(String message) {
    String m = oneLine(message).replaceAll("\\s*See https?://\\S+", "")
        .replaceAll("Use JsonReader\\.setStrictness\\([^)]*\\) to accept malformed JSON", "malformed JSON")
        .replaceAll(" path \\$\\S*", "").strip();
    return m.length() <= 120 ? m : m.substring(0, 117) + "...";
  }

  private static String oneLine(String s) {
    return s == null ? "" : s.replaceAll("\\s+", " ").strip();
  }

}
