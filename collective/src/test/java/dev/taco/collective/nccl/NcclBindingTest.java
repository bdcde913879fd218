package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import dev.taco.collective.CollectiveException;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The binding where there may be no libnccl (CI, CPU machines): clear reasons, versions, result names, messages. */
class NcclBindingTest {

  @Test
  void availabilityAlwaysExplainsItself() {
    boolean ok = Nccl.available();
    assertThat(Nccl.unavailableReason()).isNotBlank();
    if (ok) {
      assertThat(Nccl.unavailableReason()).startsWith("NCCL available: 2.");
      assertThat(Nccl.get().version()).isGreaterThanOrEqualTo(Nccl.MIN_VERSION);
    }
    assertThat(Nccl.available()).as("memoised").isEqualTo(ok);
  }

  @Test
  void withoutNcclGetThrowsTheReason() {
    assumeFalse(Nccl.available(), "libnccl is present here");
    assertThat(Nccl.unavailableReason()).startsWith("libnccl not loadable (").contains("libnccl.so.2");
    assertThatThrownBy(Nccl::get).isInstanceOf(IllegalStateException.class)
        .hasMessage("NCCL unavailable: " + Nccl.unavailableReason());
  }

  @Test
  void loadingAMissingLibraryNamesEveryCandidate() {
    assertThatThrownBy(() -> Nccl.load(List.of("/nonexistent/taco/libnccl.so.2", "taco-no-such-nccl")))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith("libnccl not loadable (/nonexistent/taco/libnccl.so.2: ")
        .hasMessageContaining("; taco-no-such-nccl")
        .hasMessageContaining("No such file");
  }

  @Test
  void theLoadersReasonIsKeptFromJnasMessage() {
    assertThat(Nccl.why("libnccl.so.2", "Unable to load library 'libnccl.so.2':\nlibnccl.so.2: cannot open shared "
        + "object file: No such file or directory\nNative library (linux-x86-64/libnccl.so.2) not found"))
        .isEqualTo("libnccl.so.2: cannot open shared object file: No such file or directory");
    assertThat(Nccl.why("nccl", "boom")).isEqualTo("nccl: boom");
    assertThat(Nccl.why("nccl", null)).isEqualTo("nccl: unknown error");
  }

  @Test
  void candidatesHonourTheOverride() {
    String old = System.getProperty("taco.libnccl");
    try {
      System.setProperty("taco.libnccl", "/opt/nccl/lib/libnccl.so.2");
      assertThat(Nccl.candidates()).containsExactly("/opt/nccl/lib/libnccl.so.2", "libnccl.so.2", "nccl");
    } finally {
      if (old == null) System.clearProperty("taco.libnccl");
      else System.setProperty("taco.libnccl", old);
    }
  }

  @Test
  void versionCodesDecodeBothSchemes() {
    assertThat(Nccl.versionString(22803)).isEqualTo("2.28.3");
    assertThat(Nccl.versionString(21903)).isEqualTo("2.19.3");
    assertThat(Nccl.versionString(2804)).isEqualTo("2.8.4");
    assertThat(Nccl.versionString(Nccl.MIN_VERSION)).isEqualTo("2.19.0");
  }

  @Test
  void versionsBelow219AreRefusedNamingTheVersion() {
    assertThat(Nccl.versionProblem(21900, "libnccl.so.2")).isNull();
    assertThat(Nccl.versionProblem(22803, "libnccl.so.2")).isNull();
    assertThat(Nccl.versionProblem(21805, "libnccl.so.2"))
        .startsWith("libnccl.so.2 is NCCL 2.18.5 (version code 21805); TACO needs NCCL >= 2.19.0");
  }

  @Test
  void resultNamesFollowNcclH() {
    assertThat(Nccl.resultName(0)).isEqualTo("ncclSuccess");
    assertThat(Nccl.resultName(4)).isEqualTo("ncclInvalidArgument");
    assertThat(Nccl.resultName(6)).isEqualTo("ncclRemoteError");
    assertThat(Nccl.resultName(Nccl.IN_PROGRESS)).isEqualTo("ncclInProgress");
    assertThat(Nccl.resultName(42)).isEqualTo("ncclResult(42)");
  }

  @Test
  void exceptionNamesTheCallTheResultAndBothStrings() {
    NcclException e = new NcclException("rank 0: allReduce(count=16, fp32)", "ncclAllReduce", 4,
        "invalid argument (run with NCCL_DEBUG=WARN for details)", "AllReduce : recvbuff cannot be NULL\n");
    assertThat(e).isInstanceOf(CollectiveException.class).hasMessage("rank 0: allReduce(count=16, fp32): "
        + "ncclAllReduce failed: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details); "
        + "last error: AllReduce : recvbuff cannot be NULL");
    assertThat(e.result()).isEqualTo(4);
    assertThat(e.call()).isEqualTo("ncclAllReduce");
    assertThat(e.detail()).startsWith("ncclAllReduce failed: ");
    assertThat(new NcclException("", "ncclGetUniqueId", 2, "unhandled system error", "")).hasMessage(
        "ncclGetUniqueId failed: ncclSystemError (2): unhandled system error");
    assertThat(e.withContext("rank 3")).hasMessageStartingWith("rank 3: ncclAllReduce failed: ");
  }
}
