package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.jna.Structure;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The JNA structs against the layouts written down from nccl.h (2.19 {@code ncclConfig_v21700}, the prefix of 2.28's
 * {@code ncclConfig_v22800}; {@code ncclUniqueId}), on LP64.
 */
class NcclLayoutTest {

  @Test
  void configIsThe219PrefixOfNcclConfigT() {
    NcclConfig c = NcclConfig.nonBlocking();
    assertThat(c.size()).isEqualTo(48);
    Map<String, Integer> offsets = Map.of("size", 0, "magic", 8, "version", 12, "blocking", 16, "cgaClusterSize", 20,
        "minCTAs", 24, "maxCTAs", 28, "netName", 32, "splitShare", 40);
    offsets.forEach((field, offset) -> assertThat(c.offsetOf(field)).as(field).isEqualTo(offset));
  }

  @Test
  void configValuesAreWhatNcclChecks() {
    NcclConfig c = NcclConfig.nonBlocking();
    assertThat(c.size).isEqualTo(48);
    assertThat(Integer.toUnsignedLong(c.magic)).isEqualTo(0xcafebeefL);
    assertThat(c.version).isEqualTo(21900);
    assertThat(c.blocking).isZero();
    assertThat(new int[] {c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.splitShare}).containsOnly(Integer.MIN_VALUE);
    assertThat(c.netName).isNull();
    assertThat(new NcclConfig().blocking).as("the default config leaves blocking to NCCL")
        .isEqualTo(Integer.MIN_VALUE);
  }

  @Test
  void configBytesInNativeMemory() {
    NcclConfig c = NcclConfig.nonBlocking();
    c.write();
    assertThat(c.getPointer().getLong(0)).isEqualTo(48);
    assertThat(c.getPointer().getInt(8)).isEqualTo(0xcafebeef);
    assertThat(c.getPointer().getInt(12)).isEqualTo(21900);
    assertThat(c.getPointer().getInt(16)).isZero();
    assertThat(c.getPointer().getInt(20)).isEqualTo(Integer.MIN_VALUE);
    assertThat(c.getPointer().getLong(32)).isZero();
    assertThat(c.getPointer().getInt(40)).isEqualTo(Integer.MIN_VALUE);
  }

  @Test
  void uniqueIdIs128BytesPassedByValue() {
    long seed = System.nanoTime();
    System.out.println("NcclLayoutTest id seed = " + seed);
    byte[] bytes = new byte[128];
    new Random(seed).nextBytes(bytes);
    NcclUniqueIdStruct.ByValue s = new NcclUniqueIdStruct.ByValue(UniqueId.of(bytes));
    assertThat(s.size()).isEqualTo(128);
    assertThat(s.offsetOf("internal")).isZero();
    assertThat(s).isInstanceOf(Structure.ByValue.class);
    s.write();
    assertThat(s.getPointer().getByteArray(0, 128)).isEqualTo(bytes);
  }

  @Test
  void uniqueIdIsAnImmutableCopyOfExactly128Bytes() {
    byte[] bytes = new byte[128];
    bytes[5] = 42;
    UniqueId id = UniqueId.of(bytes);
    bytes[5] = 0;
    assertThat(id.bytes()[5]).isEqualTo((byte) 42);
    id.bytes()[5] = 7;
    assertThat(id.bytes()[5]).isEqualTo((byte) 42);
    assertThat(id).isEqualTo(UniqueId.of(id.bytes())).hasSameHashCodeAs(UniqueId.of(id.bytes()));
    assertThat(id.toString()).startsWith("UniqueId[").hasSizeLessThan(20);
    assertThatThrownBy(() -> UniqueId.of(new byte[127])).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("an ncclUniqueId has 128 bytes, got 127");
  }

  @Test
  void dataTypeCodesAreNcclsEnum() {
    assertThat(NcclDataType.UINT8.code()).isEqualTo(1);
    assertThat(NcclDataType.FLOAT32.code()).isEqualTo(7);
    assertThat(NcclDataType.BFLOAT16.code()).isEqualTo(9);
    assertThat(NcclDataType.BFLOAT16.bytes()).isEqualTo(2);
    assertThat(NcclDataType.FLOAT32.label()).isEqualTo("fp32");
  }
}
