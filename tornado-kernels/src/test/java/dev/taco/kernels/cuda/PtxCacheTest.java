package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** PtxCache keying, atomic writes, hits and misses; runs without a GPU or NVRTC. */
class PtxCacheTest {
  @TempDir
  Path dir;

  private static final String SRC = "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }";
  private static final List<String> OPTS = List.of("--gpu-architecture=compute_90", "--std=c++17");

  @Test
  void keyDependsOnEveryInput() {
    String k = PtxCache.key(SRC, "compute_90", OPTS, "nvrtc 13.0");
    assertThat(k).hasSize(64).matches("[0-9a-f]+");
    assertThat(PtxCache.key(SRC, "compute_90", OPTS, "nvrtc 13.0")).isEqualTo(k);
    assertThat(PtxCache.key(SRC + " ", "compute_90", OPTS, "nvrtc 13.0")).isNotEqualTo(k);
    assertThat(PtxCache.key(SRC, "compute_100", OPTS, "nvrtc 13.0")).isNotEqualTo(k);
    assertThat(PtxCache.key(SRC, "compute_90", List.of("--std=c++17"), "nvrtc 13.0")).isNotEqualTo(k);
    assertThat(PtxCache.key(SRC, "compute_90", OPTS.reversed(), "nvrtc 13.0")).isNotEqualTo(k);
    assertThat(PtxCache.key(SRC, "compute_90", OPTS, "nvrtc 13.1")).isNotEqualTo(k);
    // field boundaries are unambiguous
    assertThat(PtxCache.key("ab", "c", List.of(), "v")).isNotEqualTo(PtxCache.key("a", "bc", List.of(), "v"));
    assertThat(PtxCache.key("s", "a", List.of("x", "y"), "v")).isNotEqualTo(PtxCache.key("s", "a", List.of("xy"), "v"));
  }

  @Test
  void hitSkipsTheCompiler() {
    PtxCache cache = new PtxCache(dir.resolve("ptx"));
    AtomicInteger compiles = new AtomicInteger();
    String first = cache.getOrCompile(SRC, "compute_90", OPTS, "nvrtc 13.0", () -> "PTX#" + compiles.incrementAndGet());
    String second = cache.getOrCompile(SRC, "compute_90", OPTS, "nvrtc 13.0",
        () -> "PTX#" + compiles.incrementAndGet());
    assertThat(first).isEqualTo("PTX#1");
    assertThat(second).isEqualTo("PTX#1");
    assertThat(compiles).hasValue(1);
    assertThat(cache.misses()).isEqualTo(1);
    assertThat(cache.hits()).isEqualTo(1);
    // a new cache object on the same directory (a later process) also hits
    PtxCache later = new PtxCache(dir.resolve("ptx"));
    assertThat(later.getOrCompile(SRC, "compute_90", OPTS, "nvrtc 13.0", () -> "PTX#" + compiles.incrementAndGet()))
        .isEqualTo("PTX#1");
    assertThat(compiles).hasValue(1);
    // another architecture misses
    assertThat(later.getOrCompile(SRC, "compute_100", OPTS, "nvrtc 13.0", () -> "PTX#" + compiles.incrementAndGet()))
        .isEqualTo("PTX#2");
    assertThat(later.hits()).isEqualTo(1);
    assertThat(later.misses()).isEqualTo(1);
  }

  @Test
  void writesAtomicallyAndLeavesNoTemporaryFiles() throws Exception {
    PtxCache cache = new PtxCache(dir);
    String key = PtxCache.key(SRC, "compute_90", OPTS, "v");
    // a stale temporary file from a crashed writer is never read as an entry
    Files.writeString(dir.resolve(key + ".123.tmp"), "half an entr");
    assertThat(cache.get(key)).isEmpty();
    cache.put(key, ".version 9.0\n.entry k\n");
    assertThat(cache.get(key)).contains(".version 9.0\n.entry k\n");
    cache.put(key, ".version 9.0\n.entry k2\n"); // replace
    assertThat(cache.get(key)).contains(".version 9.0\n.entry k2\n");
    try (Stream<Path> files = Files.list(dir)) {
      assertThat(files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".tmp") && !n.contains(".123.")))
          .isEmpty();
    }
    assertThat(Files.readString(cache.file(key))).startsWith("// taco-ptx-cache " + key + "\n");
  }

  @Test
  void entryWithWrongHeaderIsAMissAndIsReplaced() throws Exception {
    PtxCache cache = new PtxCache(dir);
    String key = PtxCache.key(SRC, "compute_90", OPTS, "v");
    Files.writeString(cache.file(key), "garbage");
    AtomicInteger compiles = new AtomicInteger();
    assertThat(cache.getOrCompile(SRC, "compute_90", OPTS, "v", () -> "PTX" + compiles.incrementAndGet()))
        .isEqualTo("PTX1");
    assertThat(cache.get(key)).contains("PTX1");
  }

  @Test
  void compileFailureIsNotCached() {
    PtxCache cache = new PtxCache(dir);
    assertThatThrownBy(() -> cache.getOrCompile(SRC, "compute_90", OPTS, "v", () -> {
      throw new NvrtcException("nvrtcCompileProgram", 6, "NVRTC_ERROR_COMPILATION", "k.cu", "error");
    })).isInstanceOf(NvrtcException.class);
    assertThat(cache.get(PtxCache.key(SRC, "compute_90", OPTS, "v"))).isEmpty();
  }

  @Test
  void unwritableDirectoryStillCompiles() throws Exception {
    Path file = dir.resolve("not-a-dir");
    Files.writeString(file, "x");
    PtxCache cache = new PtxCache(file.resolve("ptx"));
    assertThat(cache.getOrCompile(SRC, "compute_90", OPTS, "v", () -> "PTX")).isEqualTo("PTX");
    assertThat(cache.misses()).isEqualTo(1);
  }

  @Test
  void defaultDirectoryHonoursTacoCacheProperty() {
    String old = System.getProperty("taco.cache");
    try {
      System.setProperty("taco.cache", dir.toString());
      assertThat(PtxCache.defaultDirectory()).isEqualTo(dir.resolve("ptx"));
    } finally {
      if (old == null) System.clearProperty("taco.cache");
      else System.setProperty("taco.cache", old);
    }
  }
}
