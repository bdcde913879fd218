package dev.taco.codec;

import dev.taco.codec.AbstractCodec.NonFinite;
import java.util.List;
import java.util.Locale;

/**
 * Codec factory by command-line name (docs/design.md §3: TACO and every baseline behind one interface).
 *
 * <p>A spec is a base name, then optional parameters after a colon (or a comma), comma-separated:
 * {@code int8-group:g=64}, {@code taco:e5m2}, {@code taco:e4m3,g=128,alpha=0.5,hadamard=off},
 * {@code taco,nonfinite=propagate}. Every codec takes {@code nonfinite=refuse|propagate} (the NaN/Inf policy of
 * {@link Codec}); the grouped ones take {@code g=N} (a power of two in 32..256), except {@code mxfp4} and
 * {@code nvfp4}, whose formats fix it (32, 16); {@code nccl-fp8} takes {@code e4m3|e5m2}; the taco family takes
 * {@code e4m3|e5m2} and {@code alpha=A} (ASH strength in [0, 1]); {@code taco}, {@code taco-no-ds}, {@code mxfp4} and
 * {@code nvfp4} take {@code hadamard=on|off}.
 */
public final class Codecs {
  private Codecs() {}

  /** The valid base names and their parameters, for messages. */
  public static final String NAMES = "fp32, none, fp8-tensor, fp8-group, int8-group, int4-group, hadamard-int8, "
      + "mxfp4, nvfp4, nccl-fp8, taco, taco-no-ash, taco-no-ds, taco-no-hadamard (parameters: "
      + "nonfinite=refuse|propagate; g=N for the grouped ones but mxfp4 and nvfp4; hadamard=on|off for taco, "
      + "taco-no-ds, mxfp4 and nvfp4; nccl-fp8 and taco*: e4m3|e5m2; taco*: alpha=A)";

  private static final List<String> ALL = List.of("fp32", "none", "fp8-tensor", "fp8-group", "int8-group",
      "int4-group", "hadamard-int8", "mxfp4", "nvfp4", "nccl-fp8", "nccl-fp8:e5m2", "taco", "taco:e5m2", "taco-no-ash",
      "taco-no-ds",
      "taco-no-hadamard");

  /**
   * Every codec spec worth comparing, in a stable order (baselines first, then taco, its E5M2 variant and the
   * ablations): {@code fp32, none, fp8-tensor, fp8-group, int8-group, int4-group, hadamard-int8, mxfp4, nvfp4,
   * nccl-fp8, nccl-fp8:e5m2, taco, taco:e5m2, taco-no-ash, taco-no-ds, taco-no-hadamard}. Each is accepted by
   * {@link #byName}.
   *
   * @return an immutable list
   */
  public static List<String> names() {
    return ALL;
  }

  /**
   * Splits a comma-separated list of codec specs as the command line takes it: a comma followed by {@code key=value},
   * {@code e4m3} or {@code e5m2} continues the previous codec's parameters ({@code taco:e5m2,g=128,none} is two
   * codecs). Names are trimmed and lower-cased and each is validated with {@link #byName}.
   *
   * @throws IllegalArgumentException for an empty list or name, a name given twice, or an unknown codec
   */
  public static java.util.List<String> parseList(String value) {
    return parseList(value, java.util.Set.of());
  }

  /**
   * {@link #parseList(String)}, where the names {@code choosers} also stand (selections a caller resolves itself, such
   * as the collectives' {@code auto}, which chooses among codecs per site).
   */
  public static java.util.List<String> parseList(String value, java.util.Set<String> choosers) {
    java.util.List<String> out = new java.util.ArrayList<>();
    for (String part : value.split("(?i),(?![^:,]*=)(?!\\s*e[45]m[23]\\s*(,|$))", -1)) {
      String c = part.strip().toLowerCase(Locale.ROOT);
      if (c.isEmpty()) throw new IllegalArgumentException("empty codec name in '" + value + "'");
      if (out.contains(c)) throw new IllegalArgumentException("codec '" + c + "' is listed twice");
      if (!choosers.contains(c)) byName(c);
      out.add(c);
    }
    return out;
  }

  /**
   * A parsed codec spec: the base name and what the spec set explicitly; a null field was not given and takes the
   * codec's default. Calibration keeps what the user fixed (docs/design.md §4) by asking these fields, not the text.
   *
   * @param text the spec as given
   * @param base the lower-cased base name, one of {@link #NAMES}
   * @param nonFinite the NaN/Inf policy ({@code REFUSE} unless {@code nonfinite=propagate})
   * @param groupSize {@code g=N}, or null
   * @param format {@code e4m3} / {@code e5m2}, or null
   * @param alpha {@code alpha=A}, or null
   * @param hadamard {@code hadamard=on|off}, or null
   */
  public record Spec(String text, String base, NonFinite nonFinite, Integer groupSize, Fp8Format format, Float alpha,
      Boolean hadamard) {
    /**
     * Creates the codec this spec denotes.
     *
     * @throws IllegalArgumentException for an unknown name, a parameter the codec does not take, or a bad value,
     *     listing the valid names
     */
    public AbstractCodec codec() {
      boolean taco = base.startsWith("taco");
      boolean fp4 = base.equals("mxfp4") || base.equals("nvfp4");
      if (!taco && (format != null && !base.equals("nccl-fp8") || alpha != null || hadamard != null && !fp4)) {
        throw new IllegalArgumentException("codec '" + text + "': e4m3/e5m2 are taco and nccl-fp8 parameters, alpha"
            + " a taco one, hadamard taco's, mxfp4's and nvfp4's; valid: " + NAMES);
      }
      boolean grouped = !List.of("fp32", "none", "fp8-tensor", "nccl-fp8").contains(base);
      if (!grouped && groupSize != null) {
        throw new IllegalArgumentException("codec '" + text + "': " + base + " has no group size; valid: " + NAMES);
      }
      if (fp4 && groupSize != null) {
        throw new IllegalArgumentException("codec '" + text + "': " + base + "'s format fixes its block size at "
            + (base.equals("mxfp4") ? 32 : 16) + ", so it takes no g=; valid: " + NAMES);
      }
      return switch (base) {
        case "fp32" -> new Fp32Codec(nonFinite);
        case "none" -> new Bf16Codec(nonFinite);
        case "fp8-tensor" -> new Fp8TensorCodec(nonFinite);
        case "nccl-fp8" -> new NcclFp8Codec(format == null ? Fp8Format.E4M3 : format, NcclFp8Codec.ScaleRule.SUM,
            nonFinite);
        case "fp8-group" -> new Fp8GroupCodec(groupOr(Fp8GroupCodec.DEFAULT_GROUP), nonFinite);
        case "int8-group" -> new Int8GroupCodec(groupOr(Int8GroupCodec.DEFAULT_GROUP), nonFinite);
        case "int4-group" -> new Int4GroupCodec(groupOr(Int4GroupCodec.DEFAULT_GROUP), nonFinite);
        case "hadamard-int8" -> new HadamardInt8Codec(groupOr(HadamardInt8Codec.DEFAULT_GROUP), nonFinite);
        case "mxfp4" -> new MxFp4Codec(hadamard == null ? MxFp4Codec.DEFAULT_HADAMARD : hadamard, nonFinite);
        case "nvfp4" -> new NvFp4Codec(hadamard == null ? NvFp4Codec.DEFAULT_HADAMARD : hadamard, nonFinite);
        case "taco", "taco-no-ds" -> new TacoCodec(base, groupOr(TacoCodec.DEFAULT_GROUP),
            format == null ? Fp8Format.E4M3 : format, alpha == null ? 1f : alpha, hadamard == null || hadamard,
            !base.equals("taco-no-ds"), nonFinite);
        case "taco-no-ash", "taco-no-hadamard" -> {
          if (Boolean.TRUE.equals(hadamard) || (base.equals("taco-no-ash") && alpha != null && alpha != 0f)) {
            throw new IllegalArgumentException("codec '" + text + "': " + base + " fixes "
                + (Boolean.TRUE.equals(hadamard) ? "hadamard=off" : "alpha=0") + "; valid: " + NAMES);
          }
          yield new TacoCodec(base, groupOr(TacoCodec.DEFAULT_GROUP), format == null ? Fp8Format.E4M3 : format,
              base.equals("taco-no-ash") ? 0f : alpha == null ? 1f : alpha, false, true, nonFinite);
        }
        default -> throw new IllegalArgumentException("unknown codec '" + text + "'; valid: " + NAMES);
      };
    }

    /** G as given, or the codec's default. */
    private int groupOr(int defaultGroup) {
      return groupSize == null ? defaultGroup : groupSize;
    }
  }

  /**
   * Creates the codec a spec denotes: {@code parse(spec).codec()}.
   *
   * @param spec a name with optional parameters, as in the class doc (case-insensitive)
   * @return a new codec
   * @throws IllegalArgumentException for an unknown name or parameter, or a bad value, listing the valid names
   */
  public static AbstractCodec byName(String spec) {
    return parse(spec).codec();
  }

  /**
   * Parses a spec into its base name and the parameters it sets, without checking that the codec takes them
   * ({@link Spec#codec()} does).
   *
   * @param spec a name with optional parameters, as in the class doc (case-insensitive)
   * @throws IllegalArgumentException for an empty spec, a parameter no codec takes, a bad value or a parameter given
   *     twice
   */
  public static Spec parse(String spec) {
    if (spec == null || spec.isBlank()) {
      throw new IllegalArgumentException("empty codec name; valid: " + NAMES);
    }
    String s = spec.trim().toLowerCase(Locale.ROOT);
    int cut = s.length();
    for (int i = 0; i < s.length(); i++) {
      if (s.charAt(i) == ':' || s.charAt(i) == ',') {
        cut = i;
        break;
      }
    }
    if (cut < s.length() && s.substring(cut + 1).isBlank()) {
      throw new IllegalArgumentException(
          "codec '" + spec + "': nothing after '" + s.charAt(cut) + "'; valid: " + NAMES);
    }
    NonFinite nf = NonFinite.REFUSE;
    Integer g = null;
    Fp8Format f = null;
    Float alpha = null;
    Boolean had = null;
    java.util.Set<String> given = new java.util.HashSet<>();
    for (String p : s.substring(Math.min(cut + 1, s.length())).split(",")) {
      p = p.trim();
      if (p.isEmpty()) continue;
      String key = p.equals("e4m3") || p.equals("e5m2") ? "the fp8 format" : p.replaceAll("\\s*=.*", "");
      if (!given.add(key)) {
        throw new IllegalArgumentException("codec '" + spec + "': " + key + " is given twice");
      }
      switch (p) {
        case "nonfinite=refuse" -> nf = NonFinite.REFUSE;
        case "nonfinite=propagate" -> nf = NonFinite.PROPAGATE;
        case "e4m3" -> f = Fp8Format.E4M3;
        case "e5m2" -> f = Fp8Format.E5M2;
        case "hadamard=on" -> had = true;
        case "hadamard=off" -> had = false;
        default -> {
          if (p.startsWith("g=")) {
            g = intParam(spec, p);
          } else if (p.startsWith("alpha=")) {
            // a plain decimal number: Java's float syntax would also take 0.5d, 1f and hex
            java.math.BigDecimal d;
            try {
              d = new java.math.BigDecimal(p.substring(6));
            } catch (NumberFormatException e) {
              d = null;
            }
            alpha = d == null ? Float.NaN : d.floatValue() + 0f; // -0 is 0: one plan, one description
            if (!(alpha >= 0 && alpha <= 1) || d.compareTo(java.math.BigDecimal.ONE) > 0) {
              throw new IllegalArgumentException("codec '" + spec + "': alpha must be a number in [0, 1], got '"
                  + p.substring(6) + "'");
            }
            if (alpha == 0f && d.signum() != 0) {
              throw new IllegalArgumentException("codec '" + spec + "': alpha=" + p.substring(6) + " is 0 in float32"
                  + " (below 1.4e-45): write alpha=0 if that is meant");
            }
          } else {
            throw badParam(spec, p);
          }
        }
      }
    }
    return new Spec(spec, s.substring(0, cut).trim(), nf, g, f, alpha, had);
  }

  private static int intParam(String spec, String p) {
    try {
      return Integer.parseInt(p.substring(p.indexOf('=') + 1));
    } catch (NumberFormatException e) {
      throw badParam(spec, p);
    }
  }

  private static IllegalArgumentException badParam(String spec, String p) {
    if (ALL.stream().anyMatch(n -> n.equals(p) || n.startsWith(p + ":"))) { // "none,taco" where one codec is taken
      return new IllegalArgumentException("codec '" + spec + "': '" + p + "' is a codec, not a parameter; one codec"
          + " here");
    }
    return new IllegalArgumentException("codec '" + spec + "': bad parameter '" + p + "'; valid: " + NAMES);
  }
}
