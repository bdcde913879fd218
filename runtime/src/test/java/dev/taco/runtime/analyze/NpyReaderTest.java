package dev.taco.runtime.analyze;

import static dev.taco.runtime.analyze.TestFiles.f32;
import static dev.taco.runtime.analyze.TestFiles.npy;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link NpyReader} on numpy-written files and on every malformed or unsupported case. */
class NpyReaderTest {
  @TempDir
  Path tmp;

  static String dict(String descr, String fortran, String shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  }

  @Test
  void readsNumpyWrittenFilesOfEveryVersionAndDtype() throws Exception {
    Path d = TestFiles.fixtures();
    assertThat(NpyReader.read(d.resolve("f4_2d.npy")).get(0)).satisfies(t -> {
      assertThat(t.shape()).containsExactly(64, 256);
      assertThat(t.dtype()).isEqualTo("<f4");
      assertThat(t.rows()).isEqualTo(64);
      assertThat(t.cols()).isEqualTo(256);
    });
    assertThat(NpyReader.read(d.resolve("f2_3d.npy")).get(0).shape()).containsExactly(4, 16, 96);
    assertThat(NpyReader.read(d.resolve("f2_3d.npy")).get(0).rows()).isEqualTo(64);
    NamedTensor v = NpyReader.read(d.resolve("f4_1d.npy")).get(0);
    assertThat(v.shape()).containsExactly(1000);
    assertThat(v.rows()).isEqualTo(1);
    assertThat(NpyReader.read(d.resolve("f8_2d.npy")).get(0).dtype()).isEqualTo("<f8");
    // the same array layout through format versions 2.0 and 3.0 (u32 header length)
    assertThat(NpyReader.read(d.resolve("f4_v2.npy")).get(0).size()).isEqualTo(16 * 128);
    assertThat(NpyReader.read(d.resolve("f4_v3.npy")).get(0).size()).isEqualTo(16 * 128);
  }

  @Test
  void widensHalfExactlyAndRoundsDouble() throws Exception {
    ByteBuffer h = ByteBuffer.allocate(6).order(ByteOrder.LITTLE_ENDIAN);
    h.putShort((short) 0x3c00).putShort((short) 0x0001).putShort((short) 0xfbff); // 1, smallest subnormal, -65504
    NamedTensor t = NpyReader.read(npy(tmp.resolve("h.npy"), 1, dict("<f2", "False", "(3,)"), h.array())).get(0);
    assertThat(t.data()).containsExactly(1f, 0x1p-24f, -65504f);
    ByteBuffer dd = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putDouble(0.1).putDouble(1e300);
    NamedTensor d = NpyReader.read(npy(tmp.resolve("d.npy"), 2, dict("<f8", "False", "(2,)"), dd.array())).get(0);
    assertThat(d.data()).containsExactly(0.1f, Float.POSITIVE_INFINITY);
  }

  @Test
  void warnsOnceWhenFloat64ValuesLeaveFloat32sRange() throws Exception {
    ByteBuffer dd = ByteBuffer.allocate(48).order(ByteOrder.LITTLE_ENDIAN);
    dd.putDouble(1e-300).putDouble(-1e-50).putDouble(1e300).putDouble(0.0).putDouble(1e-45).putDouble(2.5);
    Path f = npy(tmp.resolve("ranges.npy"), 1, dict("<f8", "False", "(6,)"), dd.array());
    PrintStream old = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    NamedTensor t;
    try {
      t = NpyReader.read(f).get(0);
    } finally {
      System.setErr(old);
    }
    assertThat(t.data()).containsExactly(0f, -0f, Float.POSITIVE_INFINITY, 0f, 0x1p-149f, 2.5f);
    // 1e-45 rounds to the smallest subnormal and is not lost; a true 0.0 is not counted
    assertThat(err.toString(StandardCharsets.UTF_8)).contains("ranges.npy: 1 float64 values are infinite in float32")
        .contains("2 nonzero float64 values are 0 in float32");
    assertThat(ElementType.narrowingLoss(0, 0)).isNull();
    assertThat(ElementType.narrowingLoss(0, 3)).startsWith("3 nonzero float64 values are 0");
  }

  @Test
  void acceptsScalarsEmptyArraysAndTrivialFortranOrder() throws Exception {
    NamedTensor s = NpyReader.read(npy(tmp.resolve("s.npy"), 1, dict("<f4", "False", "()"), f32(7f))).get(0);
    assertThat(s.shape()).isEmpty();
    assertThat(s.data()).containsExactly(7f);
    NamedTensor e = NpyReader.read(npy(tmp.resolve("e.npy"), 1, dict("<f4", "False", "(0, 5)"), new byte[0])).get(0);
    assertThat(e.size()).isZero();
    NamedTensor f = NpyReader.read(npy(tmp.resolve("f.npy"), 1, dict("<f4", "True", "(1, 3)"), f32(1, 2, 3))).get(0);
    assertThat(f.data()).containsExactly(1, 2, 3);
  }

  @Test
  void refusesNumpyWrittenInvalidFiles() {
    Path d = TestFiles.fixtures();
    assertThatThrownBy(() -> NpyReader.read(d.resolve("bad_be_f4.npy"))).isInstanceOf(TensorFileException.class)
        .hasMessageContaining("big-endian dtype '>f4'");
    assertThatThrownBy(() -> NpyReader.read(d.resolve("bad_fortran.npy"))).hasMessageContaining("Fortran-order");
    assertThatThrownBy(() -> NpyReader.read(d.resolve("bad_int32.npy"))).hasMessageContaining("'<i4' (integer)");
  }

  void refused(String expected, int major, String dict, byte[] data) throws Exception {
    Path f = npy(tmp.resolve("x.npy"), major, dict, data);
    assertThatThrownBy(() -> NpyReader.read(f)).isInstanceOf(TensorFileException.class)
        .hasMessageStartingWith(f + ": ").hasMessageContaining(expected).message().doesNotContain("\n");
  }

  @Test
  void refusesOtherDtypes() throws Exception {
    refused("'|b1' (bool)", 1, dict("|b1", "False", "(4,)"), new byte[4]);
    refused("'<c8' (complex)", 1, dict("<c8", "False", "(1,)"), new byte[8]);
    refused("'|O' (object)", 1, dict("|O", "False", "(1,)"), new byte[8]);
    refused("'<u2' (integer)", 1, dict("<u2", "False", "(1,)"), new byte[2]);
    refused("'<f16'", 1, dict("<f16", "False", "(1,)"), new byte[16]);
    refused("'|f1'", 1, dict("|f1", "False", "(1,)"), new byte[1]);
    refused("structured dtype", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", f32(1));
  }

  @Test
  void refusesHeaderThatLiesAboutTheData() throws Exception {
    refused("(truncated)", 1, dict("<f4", "False", "(2, 3)"), f32(1, 2, 3, 4, 5));
    refused("(trailing bytes)", 1, dict("<f4", "False", "(2, 2)"), f32(1, 2, 3, 4, 5));
    refused("too large", 1, dict("<f4", "False", "(100000, 100000)"), f32(1));
    refused("keys are", 1, "{'descr': '<f4', 'shape': (1,), }", f32(1));
    refused("keys are", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", f32(1));
    refused("duplicate key", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", f32(1));
    refused("not a non-negative integer", 1, dict("<f4", "False", "(-1,)"), f32(1));
    refused("not a tuple", 1, dict("<f4", "False", "'1'"), f32(1));
    refused("malformed .npy header", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,", f32(1));
    refused("malformed .npy header", 1, "['descr']", f32(1));
    refused("unsupported .npy format version 4.0", 4, dict("<f4", "False", "(1,)"), f32(1));
  }

  /** A crafted header nested thousands deep is one short error, not a stack overflow or a 4000-character echo. */
  @Test
  void refusesDeeplyNestedHeadersInOneShortLine() throws Exception {
    for (int levels : new int[] {33, 3000}) {
      String shape = "(".repeat(levels) + "1" + ",)".repeat(levels);
      Path f = npy(tmp.resolve("deep" + levels + ".npy"), 2, dict("<f4", "False", shape), f32(1));
      assertThatThrownBy(() -> NpyReader.read(f)).as("%d levels", levels).isInstanceOf(TensorFileException.class)
          .hasMessageContaining("nested deeper than 32 levels").message().hasSizeLessThan(f.toString().length() + 100);
    }
    Path f = npy(tmp.resolve("deep16.npy"), 2, dict("<f4", "False", "(".repeat(16) + "1" + ",)".repeat(16)), f32(1));
    assertThatThrownBy(() -> NpyReader.read(f)).hasMessageContaining("'shape' holds [[[[[[[[[[[[[[")
        .message().hasSizeLessThan(f.toString().length() + 100);
  }

  /** A named pipe (a tensor piped in) is refused in words, not read as an empty file. */
  @Test
  void refusesAPipeInWords() throws Exception {
    Path fifo = tmp.resolve("t.npy");
    Process p = new ProcessBuilder("mkfifo", fifo.toString()).start();
    org.junit.jupiter.api.Assumptions.assumeTrue(p.waitFor() == 0, "mkfifo is not available here");
    assertThatThrownBy(() -> TensorFiles.read(fifo)).isInstanceOf(TensorFileException.class)
        .hasMessage(fifo + ": not a regular file (a pipe or a device?): save the tensor to a file");
  }

  @Test
  void refusesBadMagicAndTruncatedHeaders() throws Exception {
    Path f = Files.write(tmp.resolve("a.npy"), "PK\3\4 not numpy".getBytes());
    assertThatThrownBy(() -> NpyReader.read(f)).hasMessageContaining("bad magic");
    Path good = TestFiles.npyF32(tmp.resolve("g.npy"), "(2,)", 1, 2);
    byte[] all = Files.readAllBytes(good);
    for (int len : new int[] {0, 5, 8, 9, 40}) {
      Path t = Files.write(tmp.resolve("t" + len + ".npy"), Arrays.copyOf(all, len));
      assertThatThrownBy(() -> NpyReader.read(t)).isInstanceOf(TensorFileException.class)
          .hasMessageContaining(len == 0 ? "empty file (0 bytes)" : len < 6 ? "bad magic" : "truncated");
    }
    // a header length far beyond the file
    byte[] lie = all.clone();
    lie[8] = (byte) 0xff;
    lie[9] = (byte) 0xff;
    Path l = Files.write(tmp.resolve("lie.npy"), lie);
    assertThatThrownBy(() -> NpyReader.read(l)).hasMessageContaining("truncated .npy header: it claims 65535 bytes");
  }
}
