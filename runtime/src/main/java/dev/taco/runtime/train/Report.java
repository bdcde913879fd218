package dev.taco.runtime.train;

import dev.taco.runtime.AtomicFile;
import dev.taco.runtime.JsonFiles;
import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/** Writes a training comparison as {@code report.json} and {@code loss.png} into an output folder. */
public final class Report {
  private Report() {}

  /** Whether this Java runtime can draw the plots (XChart needs the {@code java.desktop} module). */
  public static boolean canPlot() {
    return ModuleLayer.boot().findModule("java.desktop").isPresent();
  }

  /** The machine a run was measured on: cores, memory, JDK, OS. */
  public static Map<String, Object> machine() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("cores", Runtime.getRuntime().availableProcessors());
    m.put("max_heap_mib", Runtime.getRuntime().maxMemory() >> 20);
    m.put("jdk", System.getProperty("java.vm.vendor") + " " + System.getProperty("java.runtime.version"));
    m.put("os",
        System.getProperty("os.name") + " " + System.getProperty("os.version") + " " + System.getProperty("os.arch"));
    m.put("jvm_args", ManagementFactory.getRuntimeMXBean().getInputArguments());
    return m;
  }

  /**
   * Writes {@code report.json} (atomically: temp file + rename) with {@code machine}, {@code config},
   * {@code data} and {@code runs}.
   */
  public static Path writeJson(Path dir, Map<String, Object> config, String data, List<RunResult> runs)
      throws IOException {
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("machine", machine());
    root.put("config", config);
    root.put("data", data);
    root.put("runs", runs);
    Path out = dir.resolve("report.json");
    JsonFiles.write(out, root);
    return out;
  }

  /** Plots every run's training loss (line) and validation loss (markers) against the step into {@code loss.png}. */
  public static Path writeLossPlot(Path dir, List<RunResult> runs) throws IOException {
    XYChart chart = new XYChartBuilder().width(900).height(540).title("Byte-level GPT, tensor-parallel training")
        .xAxisTitle("step").yAxisTitle("loss (nats per byte)").build();
    chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNE);
    chart.getStyler().setChartBackgroundColor(Color.WHITE);
    Color[] palette = {new Color(31, 119, 180), new Color(214, 39, 40), new Color(44, 160, 44),
        new Color(148, 103, 189),
        new Color(255, 127, 14), new Color(140, 86, 75)};
    for (int r = 0; r < runs.size(); r++) {
      RunResult run = runs.get(r);
      Color color = palette[r % palette.length];
      List<Double> xs = new ArrayList<>(), ys = new ArrayList<>(), vx = new ArrayList<>(), vy = new ArrayList<>();
      for (RunResult.StepRow row : run.history()) {
        if (row.train_loss() != null) {
          xs.add((double) row.step());
          ys.add(row.train_loss());
        }
        if (row.val_loss() != null) {
          vx.add((double) row.step());
          vy.add(row.val_loss());
        }
      }
      String label = run.compression() + " (TP=" + run.tp() + ")";
      if (!xs.isEmpty()) {
        XYSeries s = chart.addSeries(label + " train", xs, ys);
        s.setMarker(SeriesMarkers.NONE);
        s.setLineColor(color);
        // runs after the first are dashed, so curves that coincide (as compressed and uncompressed runs do) stay visible
        s.setLineStyle(r == 0 ? new BasicStroke(1.6f)
            : new BasicStroke(1.2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {2f + 3f * r, 3f},
                0f));
      }
      if (!vx.isEmpty()) {
        XYSeries v = chart.addSeries(label + " val", vx, vy);
        v.setMarker(new org.knowm.xchart.style.markers.Marker[] {SeriesMarkers.CIRCLE, SeriesMarkers.DIAMOND,
            SeriesMarkers.SQUARE, SeriesMarkers.TRIANGLE_UP, SeriesMarkers.TRIANGLE_DOWN, SeriesMarkers.CROSS}[r % 6]);
        v.setMarkerColor(color);
        v.setLineColor(color);
        v.setLineStyle(
            new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f}, 0f));
      }
    }
    Path out = dir.resolve("loss.png");
    AtomicFile.writePng(out, chart);
    return out;
  }

  /**
   * Plots every run's validation loss minus the first run's, per evaluated step, into {@code loss-diff.png}: runs
   * that coincide in {@code loss.png} (as a compressed and the uncompressed run should) are told apart here.
   * Nothing is written for a single run.
   *
   * @return the file written, or null
   */
  public static Path writeLossDifferencePlot(Path dir, List<RunResult> runs) throws IOException {
    if (runs.size() < 2) return null;
    RunResult base = runs.get(0);
    XYChart chart = new XYChartBuilder().width(900).height(400)
        .title("Validation loss minus the " + base.compression() + " run's").xAxisTitle("step")
        .yAxisTitle("difference (nats per byte)").build();
    chart.getStyler().setChartBackgroundColor(Color.WHITE);
    chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNE);
    for (int r = 1; r < runs.size(); r++) {
      List<Double> xs = new ArrayList<>(), ys = new ArrayList<>();
      List<RunResult.StepRow> h = runs.get(r).history();
      for (int i = 0; i < h.size() && i < base.history().size(); i++) {
        Double v = h.get(i).val_loss(), b = base.history().get(i).val_loss();
        if (v != null && b != null) {
          xs.add((double) h.get(i).step());
          ys.add(v - b);
        }
      }
      if (!xs.isEmpty()) chart.addSeries(runs.get(r).compression() + " - " + base.compression(), xs, ys);
    }
    Path out = dir.resolve("loss-diff.png");
    AtomicFile.writePng(out, chart);
    return out;
  }
}
