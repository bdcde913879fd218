package dev.taco.bench;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.collective.link.LinkProfiles;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Graphics2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import javax.imageio.ImageIO;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * The picture of {@link GpuE2E}'s results: per model shape, the end-to-end speed-up over {@code none} against the
 * link's bus bandwidth (at 64 MiB messages, log scale), one curve per TP size, {@code taco} solid and {@code auto}
 * dashed; the infinitely fast link is left out. Every panel says the links are emulated.
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.E2EPlot gpu-e2e.json out.png}
 */
public final class E2EPlot {
  private E2EPlot() {}

  private static final Color[] TP_COLORS = {new Color(31, 119, 180), new Color(214, 39, 40), new Color(44, 160, 44),
      new Color(148, 103, 189)};

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws IOException {
    JsonObject root = JsonParser.parseString(Files.readString(Path.of(args[0]))).getAsJsonObject();
    // shape -> codec -> tp -> busbw -> speed-up
    Map<String, Map<String, Map<Integer, TreeMap<Double, Double>>>> curves = new TreeMap<>();
    for (var e : root.getAsJsonArray("results")) {
      JsonObject r = e.getAsJsonObject();
      String codec = r.get("codec").getAsString(), profile = r.get("profile").getAsString();
      if (!(codec.equals("taco") || codec.equals("auto")) || profile.equals("inf")) continue;
      String shape = String.format("hidden %4d, %d layers, T %d, B %d%s", r.get("hidden").getAsInt(),
          r.get("layers").getAsInt(), r.get("seq").getAsInt(), r.get("micro_batch").getAsInt(),
          r.get("sp").getAsBoolean() ? ", SP" : "");
      double gbps = LinkProfiles.byName(profile).busbw(64L << 20) / 1e9;
      curves.computeIfAbsent(shape, k -> new TreeMap<>()).computeIfAbsent(codec, k -> new TreeMap<>())
          .computeIfAbsent(r.get("tp").getAsInt(), k -> new TreeMap<>()).put(gbps, r.get("speedup").getAsDouble());
    }
    List<BufferedImage> panels = new ArrayList<>();
    for (var shape : curves.entrySet()) {
      XYChart chart = new XYChartBuilder().width(640).height(420).title(shape.getKey() + " (EMULATED links)")
          .xAxisTitle("link bus bandwidth, GB/s (log)").yAxisTitle("step speed-up over none").build();
      chart.getStyler().setXAxisLogarithmic(true);
      chart.getStyler().setChartBackgroundColor(Color.WHITE);
      chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNE);
      for (var codec : shape.getValue().entrySet()) {
        int i = 0;
        for (var tp : codec.getValue().entrySet()) {
          XYSeries s = chart.addSeries(codec.getKey() + " TP=" + tp.getKey(), new ArrayList<>(tp.getValue().keySet()),
              new ArrayList<>(tp.getValue().values()));
          s.setLineColor(TP_COLORS[i % TP_COLORS.length]);
          s.setMarkerColor(TP_COLORS[i++ % TP_COLORS.length]);
          s.setMarker(codec.getKey().equals("taco") ? SeriesMarkers.CIRCLE : SeriesMarkers.DIAMOND);
          if (!codec.getKey().equals("taco")) {
            s.setLineStyle(new BasicStroke(1.5f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f,
                new float[] {6f, 4f}, 0f));
          }
        }
      }
      panels.add(BitmapEncoder.getBufferedImage(chart));
    }
    int cols = Math.min(2, panels.size()), rows = (panels.size() + cols - 1) / cols;
    BufferedImage all = new BufferedImage(640 * cols, 420 * rows, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = all.createGraphics();
    g.setColor(Color.WHITE);
    g.fillRect(0, 0, all.getWidth(), all.getHeight());
    for (int i = 0; i < panels.size(); i++) g.drawImage(panels.get(i), 640 * (i % cols), 420 * (i / cols), null);
    g.dispose();
    ImageIO.write(all, "png", Path.of(args[1]).toFile());
  }
}
