package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.jna.Pointer;
import dev.taco.kernels.cuda.TaskGraph.DataTransferMode;
import org.junit.jupiter.api.Test;

/**
 * TaskGraph construction rules, KernelArgs packing and buffer range checks, with fake buffers and kernels
 * (never dereferenced): all of this runs without a GPU.
 */
class TaskGraphTest {
    private static DeviceBuffer fake(long bytes) { return new DeviceBuffer(null, 0x7000_0000L, bytes, false); }

    private static CudaFunction kernel() { return new CudaFunction(null, 0x1234L, "k"); }

    private static TaskGraph valid() {
        float[] a = new float[16];
        DeviceBuffer da = fake(64);
        return new TaskGraph("g")
                .transferToDevice(DataTransferMode.FIRST_EXECUTION, a, da)
                .task("k", kernel(), Dim3.of(1), Dim3.of(16), 0, da, 16)
                .transferToHost(DataTransferMode.EVERY_EXECUTION, da, a);
    }

    @Test
    void executeBeforeSnapshotIsRejected() {
        TaskGraph g = valid();
        assertThatThrownBy(g::execute).isInstanceOf(IllegalStateException.class).hasMessageContaining("snapshot()");
        assertThat(g.isFrozen()).isFalse();
    }

    @Test
    void snapshotFreezes() {
        TaskGraph g = valid().snapshot();
        assertThat(g.isFrozen()).isTrue();
        assertThat(g.snapshot()).isSameAs(g);
        assertThatThrownBy(() -> g.task("k2", kernel(), Dim3.of(1), Dim3.of(1), 0)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("frozen");
        assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new float[1], fake(4)))
                .isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> g.taskMillis("k")).isInstanceOf(IllegalStateException.class).hasMessageContaining("not been executed");
        assertThatThrownBy(g::stream).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void mismatchedSizesAreRejected() {
        TaskGraph g = new TaskGraph("g");
        assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new float[17], fake(64)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mismatched sizes").hasMessageContaining("17 elements");
        assertThatThrownBy(() -> g.transferToHost(DataTransferMode.EVERY_EXECUTION, fake(63), new short[32]))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mismatched sizes");
        // smaller host arrays are fine (the start of the buffer)
        g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new byte[10], fake(64));
        assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new float[0], fake(64)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("empty");
    }

    @Test
    void unsupportedHostArraysAndArgumentsAreRejected() {
        TaskGraph g = new TaskGraph("g");
        assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new char[4], fake(64)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unsupported host array type");
        assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, "text", fake(64)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> g.task("k", kernel(), Dim3.of(1), Dim3.of(1), 0, fake(4), new float[3]))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kernel argument 1");
        assertThatThrownBy(() -> g.task("k", kernel(), Dim3.of(1), Dim3.of(1), 0, (Object) null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("null");
        assertThatThrownBy(() -> g.task("k", kernel(), Dim3.of(1), Dim3.of(1), -1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void duplicateNamesAndEmptyGraphsAreRejected() {
        TaskGraph g = new TaskGraph("g").task("k", kernel(), Dim3.of(1), Dim3.of(1), 0);
        assertThatThrownBy(() -> g.task("k", kernel(), Dim3.of(1), Dim3.of(1), 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("duplicate");
        assertThatThrownBy(() -> g.step(new NamedStep("k"))).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new TaskGraph("empty").snapshot()).isInstanceOf(IllegalStateException.class).hasMessageContaining("empty");
    }

    @Test
    void customStepsAreTheExtensionPoint() {
        TaskGraph g = valid().step(new NamedStep("all-reduce")).snapshot();
        assertThat(g.isFrozen()).isTrue();
        // a graph of only custom steps has no context to run in
        TaskGraph only = new TaskGraph("c").step(new NamedStep("x")).snapshot();
        assertThatThrownBy(only::execute).isInstanceOf(IllegalStateException.class).hasMessageContaining("context");
    }

    @Test
    void closedGraphRejectsUse() {
        TaskGraph g = valid().snapshot();
        g.close();
        g.close(); // idempotent
        assertThatThrownBy(g::execute).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void dim3Validation() {
        assertThatThrownBy(() -> Dim3.of(0)).isInstanceOf(IllegalArgumentException.class);
        assertThat(Dim3.cover(1000, 256)).isEqualTo(new Dim3(4, 1, 1));
        assertThat(Dim3.cover(1024, 256)).isEqualTo(new Dim3(4, 1, 1));
        assertThat(new Dim3(2, 3, 4).volume()).isEqualTo(24);
        assertThatThrownBy(() -> Dim3.cover(1L << 40, 1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void kernelArgsPackPointersToValues() {
        DeviceBuffer b = new DeviceBuffer(null, 0xABCD_0000_1000L, 64, false);
        KernelArgs args = new KernelArgs(b, 7, -3L, 1.5f, 2.25, (short) -2, (byte) 5, true);
        assertThat(args.count()).isEqualTo(8);
        Pointer p = args.pointer();
        assertThat(Pointer.nativeValue(p)).isEqualTo(args.address());
        assertThat(p.getPointer(0).getLong(0)).isEqualTo(0xABCD_0000_1000L);
        assertThat(p.getPointer(8).getInt(0)).isEqualTo(7);
        assertThat(p.getPointer(16).getLong(0)).isEqualTo(-3L);
        assertThat(p.getPointer(24).getFloat(0)).isEqualTo(1.5f);
        assertThat(p.getPointer(32).getDouble(0)).isEqualTo(2.25);
        assertThat(p.getPointer(40).getShort(0)).isEqualTo((short) -2);
        assertThat(p.getPointer(48).getByte(0)).isEqualTo((byte) 5);
        assertThat(p.getPointer(56).getByte(0)).isEqualTo((byte) 1);
        args.set(1, 42);
        assertThat(p.getPointer(8).getInt(0)).isEqualTo(42);
        assertThat(new KernelArgs().address()).isZero();
        assertThatThrownBy(() -> args.set(8, 1)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void deviceBufferRangesAreChecked() {
        DeviceBuffer b = fake(100);
        DeviceBuffer s = b.slice(10, 20);
        assertThat(s.pointer()).isEqualTo(b.pointer() + 10);
        assertThat(s.bytes()).isEqualTo(20);
        assertThat(s.isOwner()).isFalse();
        assertThatThrownBy(() -> b.slice(90, 11)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> b.copyFromHost(new float[26], 0, 26, 0)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> b.copyToHost(new float[10], 5, 10, 0)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> b.copyFrom(fake(10), 11)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThat(HostArrays.byteSize(new double[3])).isEqualTo(24);
        assertThat(HostArrays.byteSize(new short[3])).isEqualTo(6);
    }

    private record NamedStep(String name) implements TaskGraph.Step {
        @Override
        public void enqueue(CudaStream stream, boolean first) {}
    }
}
