package dev.taco.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Output files appear whole or not at all, and a failed write names its file and leaves nothing behind. */
class AtomicFileTest {
  @TempDir
  Path tmp;

  @Test
  void aWriteThatFailsMidwayLeavesTheEarlierFileAndNoTempFileAndNamesTheFile() throws IOException {
    Path out = tmp.resolve("sub/loss.png");
    AtomicFile.write(out, o -> o.write(new byte[] {1, 2, 3}));
    assertThat(out).hasBinaryContent(new byte[] {1, 2, 3});
    assertThatThrownBy(() -> AtomicFile.write(out, o -> {
      o.write(new byte[1 << 16]); // more than the buffer: some bytes reach the temp file
      throw new IOException("I/O error writing PNG file!", new IOException("No space left on device"));
    })).isInstanceOf(IOException.class).hasMessage("cannot write " + out.toAbsolutePath()
        + ": I/O error writing PNG file! (No space left on device)");
    assertThat(out).as("the earlier file is left as it was").hasBinaryContent(new byte[] {1, 2, 3});
    try (var files = Files.list(out.getParent())) {
      assertThat(files).as("no temp file left behind").containsExactly(out);
    }
  }

  @Test
  void aFileInTheWayOfTheFolderIsNamedWithTheReason() throws IOException {
    Path file = Files.writeString(tmp.resolve("f"), "x");
    assertThatThrownBy(() -> AtomicFile.write(file.resolve("report.json"), o -> o.write(1)))
        .isInstanceOf(IOException.class).hasMessageStartingWith("cannot write " + file.resolve("report.json"));
    assertThat(file).hasContent("x");
  }

  /** A chart is rendered in memory (no ImageIO cache file that a failed write could leave open) and written whole. */
  @Test
  void aChartIsWrittenAsAPngRenderedInMemory() throws IOException {
    var chart = new org.knowm.xchart.XYChartBuilder().width(320).height(200).build();
    chart.addSeries("y", new double[] {0, 1, 2}, new double[] {1, 3, 2});
    javax.imageio.ImageIO.setUseCache(true);
    Path out = tmp.resolve("plot.png");
    AtomicFile.writePng(out, chart);
    assertThat(javax.imageio.ImageIO.getUseCache()).as("ImageIO's disk cache off").isFalse();
    var image = javax.imageio.ImageIO.read(out.toFile());
    assertThat(image).as("a PNG that decodes").isNotNull();
    assertThat(new int[] {image.getWidth(), image.getHeight()}).containsExactly(320, 200);
    Path file = Files.writeString(tmp.resolve("f"), "x");
    assertThatThrownBy(() -> AtomicFile.writePng(file.resolve("plot.png"), chart)).isInstanceOf(IOException.class)
        .hasMessageStartingWith("cannot write " + file.resolve("plot.png"));
  }
}
