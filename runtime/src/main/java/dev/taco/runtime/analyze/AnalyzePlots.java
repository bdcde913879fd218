package dev.taco.runtime.analyze;

import dev.taco.runtime.AtomicFile;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * The two PNG histograms {@code taco analyze --plots} writes per tensor, both over log-spaced bins on a
 * log-scaled x axis: the magnitudes {@code |x|} (zeros, which a log axis cannot show, counted in the title) and,
 * one series per codec, the per-element relative error {@code |y - x| / |x|} (elements with {@code x = 0} are
 * left out; exactly reconstructed elements are counted in the legend, codecs exact everywhere are named in the
 * title).
 */
public final class AnalyzePlots {
  /** Bins per histogram. */
  public static final int BINS = 60;

  private AnalyzePlots() {}

  /**
   * A histogram of the positive values of {@code v} over {@code BINS} log-spaced bins from their minimum to their
   * maximum.
   *
   * @return {@code [centers, counts]} (geometric bin centres); empty arrays if no value is positive and finite
   */
  static double[][] logHistogram(double[] v) {
    double lo = Double.POSITIVE_INFINITY;
    double hi = 0;
    for (double a : v) {
      if (a > 0 && a < Double.POSITIVE_INFINITY) {
        lo = Math.min(lo, a);
        hi = Math.max(hi, a);
      }
    }
    if (hi == 0) {
      return new double[][] {{}, {}};
    }
    double l0 = Math.log(lo);
    double width = Math.max(Math.log(hi) - l0, 1e-9) / BINS;
    double[] centers = new double[BINS];
    double[] counts = new double[BINS];
    for (int b = 0; b < BINS; b++) {
      centers[b] = Math.exp(l0 + (b + 0.5) * width);
    }
    for (double a : v) {
      if (a > 0 && a < Double.POSITIVE_INFINITY) {
        counts[Math.min(BINS - 1, (int) ((Math.log(a) - l0) / width))]++;
      }
    }
    return new double[][] {centers, counts};
  }

  /**
   * Writes {@code <prefix>-values.png} and, if {@code decoded} is not empty, {@code <prefix>-relerr.png} into
   * {@code dir}.
   *
   * @param title the tensor's label
   * @param t the tensor
   * @param decoded codec spec to decoded values ({@code t.size()} each), in legend order
   * @return the files written
   */
  public static List<Path> write(Path dir, String prefix, String title, NamedTensor t, Map<String, float[]> decoded)
      throws IOException {
    Files.createDirectories(dir);
    List<Path> out = new ArrayList<>();
    float[] x = t.data();
    double[] mag = new double[x.length];
    long zeros = 0;
    for (int i = 0; i < x.length; i++) {
      mag[i] = Math.abs(x[i]);
      zeros += x[i] == 0 ? 1 : 0;
    }
    Map<String, double[][]> values = new LinkedHashMap<>();
    values.put("|x|", logHistogram(mag));
    out.add(save(dir.resolve(prefix + "-values.png"), title + " " + t.shapeString() + ": |x| (zeros: " + zeros
        + " of " + x.length + ")", "|x|", values));
    if (!decoded.isEmpty()) {
      Map<String, double[][]> errs = new LinkedHashMap<>();
      List<String> exactEverywhere = new ArrayList<>();
      for (Map.Entry<String, float[]> e : decoded.entrySet()) {
        float[] y = e.getValue();
        double[] rel = new double[x.length];
        long exact = 0;
        for (int i = 0; i < x.length; i++) {
          rel[i] = x[i] == 0 ? 0 : Math.abs((double) y[i] - x[i]) / Math.abs(x[i]);
          exact += x[i] != 0 && rel[i] == 0 ? 1 : 0;
        }
        if (exact == x.length - zeros) {
          exactEverywhere.add(e.getKey());
        } else {
          errs.put(e.getKey() + " (exact: " + exact + ")", logHistogram(rel));
        }
      }
      out.add(save(dir.resolve(prefix + "-relerr.png"), title + ": per-element |y - x| / |x| (x = 0 left out: "
          + zeros + (exactEverywhere.isEmpty() ? "" : "; exact: " + String.join(", ", exactEverywhere)) + ")",
          "|y - x| / |x|", errs));
    }
    return out;
  }

  private static Path save(Path file, String title, String xTitle, Map<String, double[][]> series)
      throws IOException {
    XYChart chart = new XYChartBuilder().width(900).height(540).title(title).xAxisTitle(xTitle + " (log scale)")
        .yAxisTitle("count").build();
    chart.getStyler().setChartBackgroundColor(Color.WHITE);
    chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
    chart.getStyler().setXAxisLogarithmic(true);
    chart.getStyler().setDefaultSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Step);
    boolean any = false;
    for (Map.Entry<String, double[][]> s : series.entrySet()) {
      if (s.getValue()[0].length > 0) {
        chart.addSeries(s.getKey(), s.getValue()[0], s.getValue()[1]).setMarker(SeriesMarkers.NONE);
        any = true;
      }
    }
    if (!any) {
      chart.addSeries("nothing to show (all zero / exact)", new double[] {1}, new double[] {0})
          .setMarker(SeriesMarkers.NONE);
    }
    AtomicFile.writePng(file, chart);
    return file;
  }
}
