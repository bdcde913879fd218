package dev.taco.codec;

import java.util.Locale;

/**
 * Codec factory by command-line name.
 *
 * <p>Names: {@code fp32}, {@code none} (bf16), {@code int8-group}, {@code taco}. Parameters follow a colon,
 * comma-separated: {@code int8-group:g=64}; {@code taco:e5m2}, {@code taco:e4m3,g=128,alpha=0.5,hadamard=off}.
 */
public final class Codecs {
  private Codecs() {}

  /** The valid base names. */
  public static final String NAMES = "fp32, none, int8-group, taco (parameters: int8-group:g=N; "
      + "taco:[e4m3|e5m2][,g=N][,alpha=A][,hadamard=on|off])";

  /**
   * Creates the codec a command-line name denotes.
   *
   * @param spec a name with optional parameters, as above (case-insensitive)
   * @return a new codec
   * @throws IllegalArgumentException for an unknown name or parameter, listing the valid names
   */
  public static AbstractCodec byName(String spec) {
    if (spec == null || spec.isBlank()) {
      throw new IllegalArgumentException("empty codec name; valid: " + NAMES);
    }
    String s = spec.trim().toLowerCase(Locale.ROOT);
    int colon = s.indexOf(':');
    String base = colon < 0 ? s : s.substring(0, colon);
    String[] params = colon < 0 ? new String[0] : s.substring(colon + 1).split(",");
    switch (base) {
      case "fp32", "none" -> {
        if (params.length > 0) {
          throw new IllegalArgumentException("codec " + base + " takes no parameters: " + spec);
        }
        return base.equals("fp32") ? new Fp32Codec() : new Bf16Codec();
      }
      case "int8-group" -> {
        int g = Int8GroupCodec.DEFAULT_GROUP;
        for (String p : params) {
          if (p.startsWith("g=")) {
            g = intParam(spec, p);
          } else {
            throw badParam(spec, p);
          }
        }
        return new Int8GroupCodec(g);
      }
      case "taco" -> {
        int g = TacoCodec.DEFAULT_GROUP;
        Fp8Format f = Fp8Format.E4M3;
        float alpha = 1f;
        boolean had = true;
        for (String p : params) {
          switch (p) {
            case "e4m3" -> f = Fp8Format.E4M3;
            case "e5m2" -> f = Fp8Format.E5M2;
            case "hadamard=on" -> had = true;
            case "hadamard=off" -> had = false;
            default -> {
              if (p.startsWith("g=")) {
                g = intParam(spec, p);
              } else if (p.startsWith("alpha=")) {
                try {
                  alpha = Float.parseFloat(p.substring(6));
                } catch (NumberFormatException e) {
                  throw badParam(spec, p);
                }
              } else {
                throw badParam(spec, p);
              }
            }
          }
        }
        return new TacoCodec(g, f, alpha, had);
      }
      default -> throw new IllegalArgumentException("unknown codec '" + spec + "'; valid: " + NAMES);
    }
  }

  private static int intParam(String spec, String p) {
    try {
      return Integer.parseInt(p.substring(p.indexOf('=') + 1));
    } catch (NumberFormatException e) {
      throw badParam(spec, p);
    }
  }

  private static IllegalArgumentException badParam(String spec, String p) {
    return new IllegalArgumentException("codec '" + spec + "': bad parameter '" + p + "'; valid: " + NAMES);
  }
}
