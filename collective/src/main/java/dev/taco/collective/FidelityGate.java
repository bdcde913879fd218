package dev.taco.collective;

import java.util.Locale;

/**
 * {@code --compression auto}'s fidelity gate ({@code --auto-max-error}, docs/design.md §9): the largest mean relative L2
 * error a site's plan may have on the site's own calibration tensors, one bound per {@link Site.Direction}: forward
 * activations and backward gradients (a data-parallel gradient site is backward). Written {@code A} (both) or
 * {@code activations=A,gradients=B}; a key left out takes {@link #DEFAULT}.
 *
 * @param activations the bound of the forward sites, in (0, 1]
 * @param gradients the bound of the backward sites, in (0, 1]
 */
public record FidelityGate(double activations, double gradients) {
  /** The bound of either direction by default. */
  public static final double DEFAULT = 0.05;

  /** @throws IllegalArgumentException naming {@code --auto-max-error} and the direction, for a bound outside (0, 1] */
  public FidelityGate {
    check("activations", activations);
    check("gradients", gradients);
  }

  /**
   * One bound for both directions.
   *
   * @throws IllegalArgumentException naming {@code --auto-max-error}, unless {@code 0 < bound <= 1}
   */
  public static FidelityGate of(double bound) {
    check(null, bound);
    return new FidelityGate(bound, bound);
  }

  /**
   * The gate as the command line writes it: {@code 0.05}, or {@code activations=0.05,gradients=0.15} (either key alone,
   * the other at {@link #DEFAULT}; spaces around the parts ignored).
   *
   * @throws IllegalArgumentException with one line naming {@code --auto-max-error}: an unknown key, a key given twice,
   *     a missing or non-numeric value, a bound outside (0, 1]
   */
  public static FidelityGate parse(String text) {
    String s = text == null ? "" : text.strip();
    if (s.isEmpty()) {
      throw new IllegalArgumentException("--auto-max-error needs a bound: A, or activations=A,gradients=B");
    }
    if (!s.contains("=")) return of(number(s, s));
    Double a = null, g = null;
    for (String part : s.split(",", -1)) {
      String p = part.strip();
      int eq = p.indexOf('=');
      String key = eq < 0 ? p : p.substring(0, eq).strip().toLowerCase(Locale.ROOT);
      String value = eq < 0 ? "" : p.substring(eq + 1).strip();
      if (!key.equals("activations") && !key.equals("gradients")) {
        throw new IllegalArgumentException("--auto-max-error: unknown key '" + key + "' in '" + s + "': the keys are"
            + " activations and gradients (activations=A,gradients=B), or give one bound A for both");
      }
      if (value.isEmpty()) {
        throw new IllegalArgumentException("--auto-max-error: " + key + " has no value in '" + s + "' (write " + key
            + "=A, A in (0, 1])");
      }
      if (key.equals("activations") ? a != null : g != null) {
        throw new IllegalArgumentException("--auto-max-error: " + key + " is given twice in '" + s + "'");
      }
      double v = number(value, s);
      if (key.equals("activations")) a = v;
      else g = v;
    }
    return new FidelityGate(a == null ? DEFAULT : a, g == null ? DEFAULT : g);
  }

  /** The bound of a site of {@code direction}. */
  public double bound(Site.Direction direction) {
    return direction == Site.Direction.FORWARD ? activations : gradients;
  }

  /** Whether both directions have the same bound. */
  public boolean uniform() {
    return activations == gradients;
  }

  /** As {@link #parse} reads it: {@code 0.05}, or {@code activations=0.05,gradients=0.15}. */
  @Override
  public String toString() {
    return uniform() ? shown(activations) : "activations=" + shown(activations) + ",gradients=" + shown(gradients);
  }

  private static String shown(double v) {
    return java.math.BigDecimal.valueOf(v).stripTrailingZeros().toPlainString();
  }

  /** Refuses a bound outside (0, 1], naming the option and the direction (null: both). */
  private static void check(String direction, double bound) {
    if (!(bound > 0 && bound <= 1)) {
      throw new IllegalArgumentException("--auto-max-error" + (direction == null ? "" : " " + direction)
          + " must be in (0, 1], got " + bound);
    }
  }

  /** A plain decimal number (Java's double syntax would also take 0.5d and hex). */
  private static double number(String value, String whole) {
    try {
      return new java.math.BigDecimal(value).doubleValue();
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--auto-max-error: '" + value + "' is not a number (in '" + whole + "'): give"
          + " A, or activations=A,gradients=B, each in (0, 1]");
    }
  }
}
