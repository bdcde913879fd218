package dev.taco.bench;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A JSON results file that a merge reads (a benchmark's output, a training report): its root object and field readers
 * whose errors are one line naming the file, what it should have been and what is wrong.
 *
 * @param what what the file should be, for messages ({@code "gpu-codec.json (GpuCodecBench)"})
 * @param path the file
 * @param root its top-level object
 */
record ResultFile(String what, Path path, JsonObject root) {

  /**
   * Reads {@code path}.
   *
   * @throws IllegalArgumentException if it cannot be read or is not a JSON object
   */
  static ResultFile read(String what, Path path) {
    String text;
    try {
      text = Files.readString(path);
    } catch (IOException e) {
      throw new IllegalArgumentException(what + " " + path + ": cannot be read (" + e + ")");
    }
    try {
      JsonElement e = JsonParser.parseString(text);
      if (!e.isJsonObject()) throw new IllegalArgumentException(what + " " + path + ": not a JSON object");
      return new ResultFile(what, path, e.getAsJsonObject());
    } catch (JsonParseException e) {
      String why = e.getCause() != null ? e.getCause().getMessage() : e.getMessage();
      throw new IllegalArgumentException(what + " " + path + ": not valid JSON (" + why.lines().findFirst().orElse("")
          + ")");
    }
  }

  /** An error about this file: {@code what path: why}. */
  IllegalArgumentException bad(String why) {
    return new IllegalArgumentException(what + " " + path + ": " + why);
  }

  /** The array {@code key} of {@code o}. @throws IllegalArgumentException if it is missing or not an array */
  JsonArray array(JsonObject o, String key) {
    JsonElement e = o.get(key);
    if (e == null || !e.isJsonArray()) throw bad("no \"" + key + "\" array");
    return e.getAsJsonArray();
  }

  /** The object {@code e}. @throws IllegalArgumentException if it is not one, naming {@code where} */
  JsonObject object(JsonElement e, String where) {
    if (e == null || !e.isJsonObject()) throw bad(where + " is not an object");
    return e.getAsJsonObject();
  }

  /** The string {@code key} of {@code o}. @throws IllegalArgumentException if it is missing or not a string */
  String string(JsonObject o, String key) {
    JsonElement e = o.get(key);
    if (e == null || !e.isJsonPrimitive() || !e.getAsJsonPrimitive().isString()) throw bad("no \"" + key + "\" string");
    return e.getAsString();
  }

  /** The value {@code key} of {@code o} as text, or null where it is absent or JSON null (a run that ran out). */
  String optionalString(JsonObject o, String key) {
    JsonElement e = o.get(key);
    return e == null || e.isJsonNull() ? null : e.getAsString();
  }

  /**
   * The number {@code key} of {@code o}; NaN where it is JSON null (a figure not measured).
   *
   * @throws IllegalArgumentException if it is missing or neither a number nor null
   */
  double number(JsonObject o, String key) {
    JsonElement e = o.get(key);
    if (e != null && e.isJsonNull()) return Double.NaN;
    if (e == null || !e.isJsonPrimitive() || !e.getAsJsonPrimitive().isNumber()) throw bad("no \"" + key + "\" number");
    return e.getAsDouble();
  }

  /** The boolean {@code key} of {@code o}. @throws IllegalArgumentException if it is missing or not a boolean */
  boolean flag(JsonObject o, String key) {
    JsonElement e = o.get(key);
    if (e == null || !e.isJsonPrimitive() || !e.getAsJsonPrimitive().isBoolean())
      throw bad("no \"" + key + "\" boolean");
    return e.getAsBoolean();
  }

  /** The top-level string {@code key}, or {@code fallback} where it is absent or not a string. */
  String label(String key, String fallback) {
    JsonElement e = root.get(key);
    return e != null && e.isJsonPrimitive() ? e.getAsString() : fallback;
  }
}
