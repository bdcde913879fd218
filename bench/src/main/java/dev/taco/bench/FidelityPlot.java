package dev.taco.bench;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.CategorySeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * The GPU fidelity plot (docs/design.md §7): per codec, every seed's best and final validation loss as markers and the mean
 * best as a line, from the {@code "fidelity"} array of a results file ({@code bench/results/gpu-train-1gpu.json}:
 * {@code [{"codec", "seeds", "best_val", "final_val"}]}), so codecs compare at a glance against the spread over seeds.
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.FidelityPlot RESULTS.json OUT.png}
 */
public final class FidelityPlot {
  private FidelityPlot() {}

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws IOException {
    if (args.length != 2) {
      System.err.println("usage: FidelityPlot RESULTS.json OUT.png (a \"fidelity\" array of codec, seeds, best_val, "
          + "final_val)");
      System.exit(2);
    }
    JsonArray fidelity = JsonParser.parseString(Files.readString(Path.of(args[0]))).getAsJsonObject()
        .getAsJsonArray("fidelity");
    if (fidelity == null || fidelity.isEmpty()) {
      System.err.println("FidelityPlot: no \"fidelity\" entries in " + args[0]);
      System.exit(1);
    }
    List<String> codecs = new ArrayList<>();
    List<double[]> best = new ArrayList<>(), last = new ArrayList<>();
    List<int[]> seeds = new ArrayList<>();
    for (JsonElement e : fidelity) {
      JsonObject f = e.getAsJsonObject();
      codecs.add(f.get("codec").getAsString());
      best.add(doubles(f.getAsJsonArray("best_val")));
      last.add(doubles(f.getAsJsonArray("final_val")));
      seeds.add(f.getAsJsonArray("seeds").asList().stream().mapToInt(JsonElement::getAsInt).toArray());
    }
    CategoryChart chart = new CategoryChartBuilder().width(900).height(560)
        .title("Validation loss at GPU scale, TP=2, by codec and seed (11.3 M parameters, 5000 steps)")
        .xAxisTitle("codec").yAxisTitle("validation loss (nats per byte)").build();
    chart.getStyler().setChartBackgroundColor(Color.WHITE);
    chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideE);
    chart.getStyler().setDefaultSeriesRenderStyle(CategorySeries.CategorySeriesRenderStyle.Scatter);
    Color[] palette = {new Color(31, 119, 180), new Color(214, 39, 40), new Color(44, 160, 44)};
    double lo = Double.POSITIVE_INFINITY, hi = Double.NEGATIVE_INFINITY;
    for (int s = 0; s < seeds.get(0).length; s++) {
      List<Double> b = new ArrayList<>(), f = new ArrayList<>();
      for (int c = 0; c < codecs.size(); c++) {
        b.add(best.get(c)[s]);
        f.add(last.get(c)[s]);
        lo = Math.min(lo, best.get(c)[s]);
        hi = Math.max(hi, last.get(c)[s]);
      }
      CategorySeries sb = chart.addSeries("best, seed " + seeds.get(0)[s], codecs, b);
      sb.setMarker(SeriesMarkers.CIRCLE);
      sb.setMarkerColor(palette[s % palette.length]);
      CategorySeries sf = chart.addSeries("final, seed " + seeds.get(0)[s], codecs, f);
      sf.setMarker(SeriesMarkers.DIAMOND);
      sf.setMarkerColor(palette[s % palette.length]);
    }
    List<Double> mean = new ArrayList<>();
    for (double[] b : best) mean.add(java.util.Arrays.stream(b).average().orElse(Double.NaN));
    CategorySeries m = chart.addSeries("mean best", codecs, mean);
    m.setChartCategorySeriesRenderStyle(CategorySeries.CategorySeriesRenderStyle.Line);
    m.setMarker(SeriesMarkers.NONE);
    m.setLineColor(Color.BLACK);
    chart.getStyler().setYAxisMin(Math.floor(lo * 50) / 50 - 0.01);
    chart.getStyler().setYAxisMax(Math.ceil(hi * 50) / 50 + 0.01);
    chart.getStyler().setMarkerSize(10);
    BitmapEncoder.saveBitmap(chart, args[1], BitmapEncoder.BitmapFormat.PNG);
    System.out.println("wrote " + args[1]);
  }

  private static double[] doubles(JsonArray a) {
    double[] d = new double[a.size()];
    for (int i = 0; i < d.length; i++) d[i] = a.get(i).getAsDouble();
    return d;
  }
}
