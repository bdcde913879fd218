package dev.taco.runtime.analyze;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A strict reader of NumPy {@code .npy} files (the format of NEP 1 and {@code numpy.lib.format}, versions 1.0,
 * 2.0 and 3.0).
 *
 * <p>Layout: the magic {@code \x93NUMPY}, a major and a minor version byte, the header length (u16 little-endian
 * for 1.0, u32 for 2.0 and 3.0), the header (a Python dict literal, latin-1 for 1.0/2.0, UTF-8 for 3.0, padded
 * with spaces and ended by {@code \n}) with exactly the keys {@code 'descr'}, {@code 'fortran_order'} and
 * {@code 'shape'}, then the raw data.
 *
 * <p>Accepted: {@code descr} {@code '<f2'}, {@code '<f4'} or {@code '<f8'} (little-endian float16/32/64) in C
 * order (or {@code fortran_order: True} where at most one dimension exceeds 1, so both orders coincide), any
 * shape including {@code ()} and empty ones. Data become float32: f2 widened exactly, f8 rounded to nearest
 * (finite values beyond the float32 range become infinities; a warning is logged). Everything else is refused
 * with a one-line {@link TensorFileException}: bad magic, unknown version, truncated header or data, a header
 * that is not such a dict, big-endian, integer, bool, complex, object, string or structured dtypes, Fortran
 * order, and a shape whose byte size differs from the bytes that follow the header. No buffer is sized from a
 * header field before that field has been checked against the file's length.
 */
public final class NpyReader {
  private static final Logger log = LoggerFactory.getLogger(NpyReader.class);

  /** The six magic bytes every {@code .npy} file starts with. */
  static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};

  /** The largest header accepted (numpy writes a few hundred bytes). */
  static final int MAX_HEADER = 1 << 20;

  private NpyReader() {}

  /**
   * Reads the one array of a {@code .npy} file.
   *
   * @param file the file
   * @return a one-element list: the array, named {@code ""}, with its shape, its descr and its float32 data
   * @throws TensorFileException if the file is malformed or of an unsupported dtype or order
   * @throws IOException if it cannot be read
   */
  public static List<NamedTensor> read(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      long fileSize = ch.size();
      ByteBuffer pre = TensorFiles.readFully(ch, file, 0, (int) Math.min(12, fileSize));
      if (fileSize == 0) throw new TensorFileException(file, "empty file (0 bytes), not a .npy file");
      for (int i = 0; i < MAGIC.length; i++) {
        if (pre.limit() <= i || pre.get(i) != MAGIC[i]) {
          throw new TensorFileException(file, "not a .npy file (bad magic; expected \\x93NUMPY)");
        }
      }
      if (pre.limit() < 10) {
        throw new TensorFileException(file, "truncated .npy header (" + fileSize + " bytes)");
      }
      int major = pre.get(6) & 0xff;
      int minor = pre.get(7) & 0xff;
      if (major < 1 || major > 3 || minor != 0) {
        throw new TensorFileException(file, "unsupported .npy format version " + major + "." + minor
            + " (1.0, 2.0 and 3.0 are)");
      }
      int start = major == 1 ? 10 : 12;
      if (fileSize < start) {
        throw new TensorFileException(file, "truncated .npy header (" + fileSize + " bytes)");
      }
      long headerLen = major == 1 ? pre.getShort(8) & 0xffff : pre.getInt(8) & 0xffffffffL;
      if (headerLen > fileSize - start) {
        throw new TensorFileException(file, "truncated .npy header: it claims " + headerLen + " bytes, the file has "
            + (fileSize - start) + " after the preamble");
      }
      if (headerLen > MAX_HEADER) {
        throw new TensorFileException(file, ".npy header of " + headerLen + " bytes exceeds " + MAX_HEADER);
      }
      ByteBuffer hb = TensorFiles.readFully(ch, file, start, (int) headerLen);
      String header;
      try {
        header = (major == 3 ? StandardCharsets.UTF_8 : StandardCharsets.ISO_8859_1).newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT).decode(hb).toString();
      } catch (CharacterCodingException e) {
        throw new TensorFileException(file, ".npy header is not valid UTF-8");
      }
      Map<String, Object> dict = parseHeader(file, header);
      long dataStart = start + headerLen;
      Header h = interpret(file, dict);
      long expected = h.type.byteLength(h.shape, file, "shape " + shapeText(h.shape));
      long actual = fileSize - dataStart;
      if (expected != actual) {
        throw new TensorFileException(file, "header says shape " + shapeText(h.shape) + " of " + h.descr + " = "
            + expected + " data bytes, but " + actual + " bytes follow the header"
            + (actual < expected ? " (truncated)" : " (trailing bytes)"));
      }
      int count = (int) (expected / h.type.size);
      float[] data = h.type.read(ch, file, "", dataStart, count);
      int[] shape = new int[h.shape.length];
      for (int i = 0; i < shape.length; i++) {
        shape[i] = (int) h.shape[i];
      }
      log.debug("{}: {} {} (.npy {}.0)", file, h.descr, shapeText(h.shape), major);
      return List.of(new NamedTensor("", shape, h.descr, data));
    }
  }

  private record Header(String descr, ElementType type, long[] shape) {}

  private static Header interpret(Path file, Map<String, Object> dict) {
    if (!dict.keySet().equals(Set.of("descr", "fortran_order", "shape"))) {
      throw new TensorFileException(file, ".npy header keys are " + dict.keySet()
          + ", expected exactly descr, fortran_order, shape");
    }
    if (!(dict.get("descr") instanceof String descr)) {
      throw new TensorFileException(file, "structured dtype " + shown(dict.get("descr")) + " is not supported"
          + " (expected '<f2', '<f4' or '<f8')");
    }
    ElementType type = dtype(file, descr);
    if (!(dict.get("shape") instanceof List<?> dims)) {
      throw new TensorFileException(file, ".npy header 'shape' is not a tuple: " + shown(dict.get("shape")));
    }
    long[] shape = new long[dims.size()];
    int nonUnit = 0;
    for (int i = 0; i < shape.length; i++) {
      if (!(dims.get(i) instanceof Long d) || d < 0) {
        throw new TensorFileException(file, ".npy header 'shape' holds " + shown(dims.get(i))
            + ", not a non-negative integer");
      }
      shape[i] = d;
      nonUnit += d > 1 ? 1 : 0;
    }
    if (!(dict.get("fortran_order") instanceof Boolean fortran)) {
      throw new TensorFileException(file, ".npy header 'fortran_order' is not True or False");
    }
    if (fortran && nonUnit > 1) {
      throw new TensorFileException(file, "Fortran-order (column-major) arrays are not supported;"
          + " save np.ascontiguousarray(a) instead");
    }
    return new Header(descr, type, shape);
  }

  private static ElementType dtype(Path file, String descr) {
    String expected = "; expected little-endian float '<f2', '<f4' or '<f8'";
    if (descr.length() < 2) {
      throw new TensorFileException(file, "dtype '" + descr + "' is not supported" + expected);
    }
    char order = descr.charAt(0);
    char kind = descr.charAt(1);
    String what = switch (kind) {
      case 'f' -> "float";
      case 'i', 'u' -> "integer";
      case 'b' -> "bool";
      case 'c' -> "complex";
      case 'O' -> "object";
      case 'S', 'U', 'a' -> "string";
      case 'V' -> "void/structured";
      case 'M', 'm' -> "datetime";
      default -> "unknown";
    };
    if (order == '>') {
      throw new TensorFileException(file, "big-endian dtype '" + descr + "' is not supported"
          + " (save a.astype('<" + descr.substring(1) + "'))");
    }
    if (kind != 'f' || order != '<') {
      throw new TensorFileException(file, "dtype '" + descr + "' (" + what + ") is not supported" + expected);
    }
    return switch (descr.substring(2)) {
      case "2" -> ElementType.F16;
      case "4" -> ElementType.F32;
      case "8" -> ElementType.F64;
      default -> throw new TensorFileException(file, "dtype '" + descr + "' is not supported" + expected);
    };
  }

  private static String shapeText(long[] shape) {
    StringBuilder b = new StringBuilder("(");
    for (int i = 0; i < shape.length; i++) {
      b.append(i > 0 ? ", " : "").append(shape[i]);
    }
    return b.append(shape.length == 1 ? ",)" : ")").toString();
  }

  /**
   * Parses the header: a Python dict literal whose values are strings, {@code True}/{@code False} or tuples/lists
   * of such values and integers, followed only by whitespace.
   *
   * @return the dict, keys in order; tuples and lists as {@code List}, integers as {@code Long}
   * @throws TensorFileException if it is not such a literal
   */
  static Map<String, Object> parseHeader(Path file, String text) {
    PyLiteral p = new PyLiteral(file, text);
    Object v = p.value();
    p.skipSpace();
    if (p.pos != text.length()) {
      throw p.error("unexpected text after the dict");
    }
    if (!(v instanceof Map<?, ?> m)) {
      throw p.error("the header is not a dict");
    }
    @SuppressWarnings("unchecked") Map<String, Object> dict = (Map<String, Object>) m;
    return dict;
  }

  /** A header value as the error shows it: at most 40 characters (a crafted header may hold thousands). */
  private static String shown(Object v) {
    String t = String.valueOf(v);
    return t.length() <= 40 ? t : t.substring(0, 37) + "...";
  }

  /** A recursive-descent parser of the small subset of Python literals numpy writes in headers. */
  private static final class PyLiteral {
    final Path file;
    final String s;
    int pos;
    /** Dicts, tuples and lists open at {@link #pos}: a header nested deeper than {@link #MAX_DEPTH} is refused. */
    int depth;
    static final int MAX_DEPTH = 32;

    PyLiteral(Path file, String s) {
      this.file = file;
      this.s = s;
    }

    TensorFileException error(String what) {
      return new TensorFileException(file, "malformed .npy header at character " + pos + ": " + what);
    }

    void skipSpace() {
      while (pos < s.length() && Character.isWhitespace(s.charAt(pos))) {
        pos++;
      }
    }

    char peek() {
      skipSpace();
      if (pos >= s.length()) {
        throw error("unexpected end");
      }
      return s.charAt(pos);
    }

    Object value() {
      char c = peek();
      if ((c == '{' || c == '(' || c == '[') && ++depth > MAX_DEPTH) {
        throw error("nested deeper than " + MAX_DEPTH + " levels");
      }
      if (c == '{') {
        Map<String, Object> m = dict();
        depth--;
        return m;
      }
      if (c == '(' || c == '[') {
        List<Object> l = sequence(c == '(' ? ')' : ']');
        depth--;
        return l;
      }
      if (c == '\'' || c == '"') {
        return string();
      }
      if (c == '-' || Character.isDigit(c)) {
        int b = pos++;
        while (pos < s.length() && Character.isDigit(s.charAt(pos))) {
          pos++;
        }
        String digits = s.substring(b, pos);
        if (pos < s.length() && s.charAt(pos) == 'L') {
          pos++; // Python 2 long suffix, as in old files
        }
        try {
          return Long.parseLong(digits);
        } catch (NumberFormatException e) {
          throw error("bad integer '" + digits + "'");
        }
      }
      for (String word : new String[] {"True", "False"}) {
        if (s.startsWith(word, pos)) {
          pos += word.length();
          return word.equals("True");
        }
      }
      throw error("unexpected '" + c + "'");
    }

    Map<String, Object> dict() {
      Map<String, Object> m = new LinkedHashMap<>();
      pos++;
      while (peek() != '}') {
        if (peek() != '\'' && peek() != '"') {
          throw error("dict key is not a string");
        }
        String key = string();
        if (peek() != ':') {
          throw error("expected ':'");
        }
        pos++;
        if (m.put(key, value()) != null) {
          throw error("duplicate key '" + key + "'");
        }
        if (peek() == ',') {
          pos++;
        } else if (peek() != '}') {
          throw error("expected ',' or '}'");
        }
      }
      pos++;
      return m;
    }

    List<Object> sequence(char close) {
      List<Object> l = new ArrayList<>();
      pos++;
      while (peek() != close) {
        l.add(value());
        if (peek() == ',') {
          pos++;
        } else if (peek() != close) {
          throw error("expected ',' or '" + close + "'");
        }
      }
      pos++;
      return l;
    }

    String string() {
      char q = s.charAt(pos++);
      int end = s.indexOf(q, pos);
      if (end < 0) {
        throw error("unterminated string");
      }
      String v = s.substring(pos, end);
      if (v.indexOf('\\') >= 0) {
        throw error("escape sequences are not supported");
      }
      pos = end + 1;
      return v;
    }
  }
}
