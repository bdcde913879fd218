package dev.taco.runtime;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.TypeAdapter;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonWriter;
import dev.taco.collective.FidelityGate;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * Writes the reports ({@code report.json}, {@code taco analyze --json}) as strict JSON (RFC 8259): NaN and ±Infinity,
 * which JSON cannot express, are written as {@code null}; files appear atomically ({@link AtomicFile}), so a reader
 * never sees half a report.
 */
public final class JsonFiles {
  private JsonFiles() {}

  /** Doubles with a non-finite value become null. */
  private static final TypeAdapter<Double> FINITE_OR_NULL = new TypeAdapter<>() {
    @Override
    public void write(JsonWriter out, Double v) throws IOException {
      if (v == null || !Double.isFinite(v)) out.nullValue();
      else out.value(v);
    }

    @Override
    public Double read(JsonReader in) {
      throw new UnsupportedOperationException("write-only");
    }
  };

  /**
   * {@code --auto-max-error} as its one number when both directions share it (as the option was written before it had
   * two, so a checkpoint of then compares equal), else {@code {"activations": A, "gradients": B}}.
   */
  private static final TypeAdapter<FidelityGate> GATE = new TypeAdapter<>() {
    @Override
    public void write(JsonWriter out, FidelityGate g) throws IOException {
      if (g == null) {
        out.nullValue();
      } else if (g.uniform()) {
        out.value(g.activations());
      } else {
        out.beginObject().name("activations").value(g.activations()).name("gradients").value(g.gradients()).endObject();
      }
    }

    @Override
    public FidelityGate read(JsonReader in) {
      throw new UnsupportedOperationException("write-only");
    }
  };

  private static final Gson LINE = new GsonBuilder().serializeNulls().disableHtmlEscaping()
      .registerTypeAdapter(Double.class, FINITE_OR_NULL).registerTypeAdapter(double.class, FINITE_OR_NULL)
      .registerTypeAdapter(FidelityGate.class, GATE).create();
  private static final Gson GSON = LINE.newBuilder().setPrettyPrinting().create();

  /** {@code root} as strict, pretty-printed JSON (non-finite doubles as null). */
  public static String toJson(Object root) {
    return GSON.toJson(root);
  }

  /** {@code root} as strict JSON on one line (non-finite doubles as null): a line of a JSON-lines file. */
  public static String toJsonLine(Object root) {
    return LINE.toJson(root);
  }

  /**
   * Serialises {@code root} (maps, lists, records, numbers, strings) to {@code out}, creating its folder.
   *
   * @throws IOException if the folder cannot be created or written
   */
  public static void write(Path out, Object root) throws IOException {
    AtomicFile.write(out, o -> {
      Writer w = new java.io.OutputStreamWriter(o, StandardCharsets.UTF_8);
      GSON.toJson(root, w);
      w.flush();
    });
  }
}
