package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.collective.Site.Direction;
import org.junit.jupiter.api.Test;

/** {@code --auto-max-error}: one bound or one per direction, read back as written, bad text refused in one line. */
class FidelityGateTest {
  @Test
  void oneBoundOrOnePerDirectionEachSiteTakingItsOwn() {
    FidelityGate both = FidelityGate.parse(" 0.1 ");
    assertThat(both.bound(Direction.FORWARD)).isEqualTo(0.1);
    assertThat(both.bound(Direction.BACKWARD)).isEqualTo(0.1);
    assertThat(both).hasToString("0.1");
    FidelityGate split = FidelityGate.parse("gradients=0.15, activations=0.05");
    assertThat(split.bound(Direction.FORWARD)).isEqualTo(0.05);
    assertThat(split.bound(Direction.BACKWARD)).isEqualTo(0.15);
    assertThat(new Site.Gradient("wte").direction()).as("a data-parallel gradient site is backward").isEqualTo(
        Direction.BACKWARD);
    assertThat(split).hasToString("activations=0.05,gradients=0.15");
    assertThat(FidelityGate.parse(split.toString())).isEqualTo(split);
    assertThat(FidelityGate.parse("gradients=0.2")).as("a key left out takes the default")
        .isEqualTo(new FidelityGate(FidelityGate.DEFAULT, 0.2));
    assertThat(FidelityGate.parse("activations=1,gradients=1")).isEqualTo(FidelityGate.of(1));
  }

  @Test
  void badGatesAreRefusedInOneLineNamingTheOption() {
    String[][] bad = {{"0", "--auto-max-error must be in (0, 1], got 0.0"},
        {"1.5", "--auto-max-error must be in (0, 1], got 1.5"},
        {"activations=0.05,gradients=0", "--auto-max-error gradients must be in (0, 1], got 0.0"},
        {"activations=-0.1", "--auto-max-error activations must be in (0, 1], got -0.1"},
        {"weights=0.1", "--auto-max-error: unknown key 'weights'"},
        {"activations=0.1,0.2", "--auto-max-error: unknown key '0.2'"},
        {"activations=", "--auto-max-error: activations has no value"},
        {"activations=0.1,gradients", "--auto-max-error: gradients has no value"},
        {"gradients=0.1,gradients=0.2", "--auto-max-error: gradients is given twice"},
        {"activations=abc", "--auto-max-error: 'abc' is not a number"}, {"0x1p-3", "'0x1p-3' is not a number"},
        {"NaN", "'NaN' is not a number"}, {"", "--auto-max-error needs a bound"}};
    for (String[] b : bad) {
      assertThatThrownBy(() -> FidelityGate.parse(b[0])).as(b[0]).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining(b[1]).satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
    }
  }
}
