package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** torchrun's variables, parsed, defaulted and checked with messages naming the variable. */
class LaunchEnvTest {

  private static Map<String, String> torchrun() {
    Map<String, String> env = new HashMap<>();
    env.put("RANK", "5");
    env.put("WORLD_SIZE", "8");
    env.put("LOCAL_RANK", "1");
    env.put("MASTER_ADDR", "10.0.0.7");
    env.put("MASTER_PORT", "12345");
    env.put("PATH", "/usr/bin");
    return env;
  }

  private static Map<String, String> with(String name, String value) {
    Map<String, String> env = torchrun();
    if (value == null) env.remove(name);
    else env.put(name, value);
    return env;
  }

  @Test
  void parsesTorchrunsVariables() {
    LaunchEnv e = LaunchEnv.parse(torchrun());
    assertThat(e).isEqualTo(new LaunchEnv(5, 8, 1, "10.0.0.7", 12345));
    assertThat(e.endpoint()).isEqualTo("10.0.0.7:12345");
  }

  @Test
  void defaultsLocalRankMasterAddrAndPort() {
    LaunchEnv e = LaunchEnv.parse(Map.of("RANK", "0", "WORLD_SIZE", "1"));
    assertThat(e).isEqualTo(new LaunchEnv(0, 1, 0, "127.0.0.1", 29500));
    assertThat(LaunchEnv.parse(Map.of("RANK", "3", "WORLD_SIZE", "4")).localRank()).isEqualTo(3);
  }

  @Test
  void trimsValues() {
    assertThat(LaunchEnv.parse(Map.of("RANK", " 1 ", "WORLD_SIZE", "2\n", "MASTER_ADDR", " localhost "))
        .masterAddr()).isEqualTo("localhost");
  }

  @Test
  void missingVariablesAreNamed() {
    assertThatThrownBy(() -> LaunchEnv.parse(with("RANK", null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("RANK is not set");
    assertThatThrownBy(() -> LaunchEnv.parse(with("WORLD_SIZE", null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("WORLD_SIZE is not set");
    assertThatThrownBy(() -> LaunchEnv.parse(with("MASTER_PORT", "  ")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("MASTER_PORT is empty");
    assertThatThrownBy(() -> LaunchEnv.parse(with("MASTER_ADDR", "")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("MASTER_ADDR is empty");
  }

  @Test
  void nonIntegersAreNamed() {
    assertThatThrownBy(() -> LaunchEnv.parse(with("LOCAL_RANK", "one")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("LOCAL_RANK='one' is not an integer");
    assertThatThrownBy(() -> LaunchEnv.parse(with("MASTER_PORT", "80.5")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("MASTER_PORT='80.5' is not an integer");
  }

  @Test
  void outOfRangeAndInconsistentValuesAreNamed() {
    assertThatThrownBy(() -> LaunchEnv.parse(with("RANK", "8")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("RANK=8 must be in [0, WORLD_SIZE=8)");
    assertThatThrownBy(() -> LaunchEnv.parse(with("RANK", "-1")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("RANK=-1 must be in");
    assertThatThrownBy(() -> LaunchEnv.parse(with("WORLD_SIZE", "0")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("WORLD_SIZE=0 must be >= 1");
    assertThatThrownBy(() -> LaunchEnv.parse(with("LOCAL_RANK", "6")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("LOCAL_RANK=6 must be in [0, RANK=5]");
    assertThatThrownBy(() -> LaunchEnv.parse(with("MASTER_PORT", "65536")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("MASTER_PORT=65536 must be in [1, 65535]");
    assertThatThrownBy(() -> LaunchEnv.parse(with("MASTER_PORT", "0")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("MASTER_PORT=0 must be in [1, 65535]");
  }

  @Test
  void ipv6EndpointIsBracketed() {
    assertThat(new LaunchEnv(0, 2, 0, "::1", 29500).endpoint()).isEqualTo("[::1]:29500");
  }
}
