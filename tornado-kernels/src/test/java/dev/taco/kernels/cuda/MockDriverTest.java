package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Exercises the JNA marshalling of the whole backend without a GPU: a C mock of libcuda (host memory
 * for device memory, kernels run on the CPU by name) and of libnvrtc (PTX with one {@code .entry} per
 * {@code __global__} function) is built with {@code cc}, and {@link GpuSelfCheck} runs against them in a
 * child JVM (so this JVM's {@link Cuda} stays the real answer). It checks argument passing (handles as
 * 64-bit values, {@code size_t}, out-parameters, string arrays, kernel parameter packing), status checking
 * and error strings, not CUDA itself. Skipped where there is no C compiler.
 */
class MockDriverTest {
    @TempDir Path dir;

    static final String MOCK_C = """
            #include <stdlib.h>
            #include <string.h>
            #include <stdio.h>
            #include <time.h>
            typedef unsigned long long u64;
            static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
            static int inited = 0;
            int cuInit(unsigned f) { if (f != 0) return 1; inited = 1; return 0; }
            int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
            int cuDeviceGetCount(int* c) { if (!inited) return 3; *c = 1; return 0; }
            int cuDeviceGet(int* d, int ord) { if (ord != 0) return 101; *d = 0; return 0; }
            int cuDeviceGetName(char* name, int len, int dev) { snprintf(name, len, "Mock GPU"); return dev == 0 ? 0 : 101; }
            int cuDeviceGetAttribute(int* v, int a, int dev) {
              switch (a) { case 1: *v = 1024; return 0; case 16: *v = 132; return 0; case 75: *v = 9; return 0;
                           case 76: *v = 0; return 0; case 97: *v = 232448; return 0; default: return 1; } }
            int cuDeviceTotalMem_v2(size_t* b, int dev) { *b = (size_t) 141 << 30; return 0; }
            static int ctx_token;
            int cuDevicePrimaryCtxRetain(void** c, int dev) { *c = &ctx_token; return 0; }
            int cuDevicePrimaryCtxRelease_v2(int dev) { return 0; }
            int cuCtxSetCurrent(void* c) { return (c == &ctx_token || c == 0) ? 0 : 201; }
            int cuCtxSynchronize(void) { return 0; }
            int cuMemGetInfo_v2(size_t* f, size_t* t) { *f = 1; *t = 2; return 0; }
            int cuMemAlloc_v2(u64* p, size_t n) { if (n == 0) return 1; void* m = malloc(n); if (!m) return 2; *p = (u64) m; return 0; }
            int cuMemFree_v2(u64 p) { free((void*) p); return 0; }
            int cuMemAllocHost_v2(void** p, size_t n) { *p = malloc(n); return *p ? 0 : 2; }
            int cuMemFreeHost(void* p) { free(p); return 0; }
            int cuMemcpyHtoD_v2(u64 d, const void* s, size_t n) { memcpy((void*) d, s, n); return 0; }
            int cuMemcpyDtoH_v2(void* d, u64 s, size_t n) { memcpy(d, (void*) s, n); return 0; }
            int cuMemcpyDtoD_v2(u64 d, u64 s, size_t n) { memmove((void*) d, (void*) s, n); return 0; }
            int cuMemcpyHtoDAsync_v2(u64 d, const void* s, size_t n, void* st) { memcpy((void*) d, s, n); return 0; }
            int cuMemcpyDtoHAsync_v2(void* d, u64 s, size_t n, void* st) { memcpy(d, (void*) s, n); return 0; }
            int cuMemcpyDtoDAsync_v2(u64 d, u64 s, size_t n, void* st) { memmove((void*) d, (void*) s, n); return 0; }
            int cuMemsetD8_v2(u64 d, unsigned char v, size_t n) { memset((void*) d, v, n); return 0; }
            int cuMemsetD8Async(u64 d, unsigned char v, size_t n, void* st) { memset((void*) d, v, n); return 0; }
            typedef struct { char names[16][64]; int count; } module_t;
            typedef struct { char name[64]; } func_t;
            int cuModuleLoadData(void** m, const void* image) {
              const char* s = (const char*) image; if (strncmp(s, "//", 2) != 0 && strncmp(s, ".version", 8) != 0) return 218;
              module_t* mod = calloc(1, sizeof(module_t));
              for (const char* p = strstr(s, ".entry "); p && mod->count < 16; p = strstr(p + 1, ".entry ")) {
                sscanf(p + 7, "%63[A-Za-z0-9_]", mod->names[mod->count++]); }
              *m = mod; return 0; }
            int cuModuleGetFunction(void** f, void* m, const char* name) {
              module_t* mod = m; for (int i = 0; i < mod->count; i++) if (strcmp(mod->names[i], name) == 0) {
                func_t* fn = calloc(1, sizeof(func_t)); strcpy(fn->name, name); *f = fn; return 0; }
              return 500; }
            int cuModuleUnload(void* m) { free(m); return 0; }
            int cuFuncSetAttribute(void* f, int a, int v) { return (a == 8 && v <= 232448) ? 0 : 1; }
            int cuFuncGetAttribute(int* v, int a, void* f) { *v = a == 0 ? 1024 : 16; return 0; }
            int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shm, void* st, void** params, void** extra) {
              if (bx * by * bz > 1024 || gx == 0 || bx == 0) return 1;
              func_t* fn = f;
              if (strcmp(fn->name, "vector_add") == 0) {
                const float* a = *(float**) params[0]; const float* b = *(float**) params[1]; float* c = *(float**) params[2];
                int n = *(int*) params[3]; long total = (long) gx * bx;
                for (long i = 0; i < total && i < n; i++) c[i] = a[i] + b[i];
              }
              return 0; }
            int cuStreamCreate(void** s, unsigned f) { *s = malloc(8); return 0; }
            int cuStreamSynchronize(void* s) { return 0; }
            int cuStreamWaitEvent(void* s, void* e, unsigned f) { return 0; }
            int cuStreamQuery(void* s) { return 0; }
            int cuEventQuery(void* e) { return 0; }
            int cuStreamDestroy_v2(void* s) { free(s); return 0; }
            int cuEventCreate(void** e, unsigned f) { *e = calloc(1, sizeof(double)); return 0; }
            int cuEventRecord(void* e, void* s) { *(double*) e = now_ms(); return 0; }
            int cuEventSynchronize(void* e) { return 0; }
            int cuEventElapsedTime_v2(float* ms, void* a, void* b) { *ms = (float) (*(double*) b - *(double*) a); if (*ms <= 0) *ms = 1e-4f; return 0; }
            int cuEventDestroy_v2(void* e) { free(e); return 0; }
            int cuGetErrorName(int e, const char** s) {
              switch (e) { case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0; case 500: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
                           case 218: *s = "CUDA_ERROR_INVALID_PTX"; return 0; default: *s = 0; return 1; } }
            int cuGetErrorString(int e, const char** s) {
              switch (e) { case 1: *s = "invalid argument"; return 0; case 500: *s = "named symbol not found"; return 0;
                           case 218: *s = "a PTX JIT compilation failed"; return 0; default: *s = 0; return 1; } }

            /* ---- libnvrtc ---- */
            typedef struct { char* src; char* ptx; char log[512]; } prog_t;
            int nvrtcVersion(int* ma, int* mi) { *ma = 13; *mi = 0; return 0; }
            int nvrtcCreateProgram(void** p, const char* src, const char* name, int nh, const char* const* h, const char* const* in) {
              prog_t* pr = calloc(1, sizeof(prog_t)); pr->src = strdup(src); *p = pr; return 0; }
            int nvrtcCompileProgram(void* p, int n, const char* const* opts) {
              prog_t* pr = p; const char* arch = 0; int std = 0;
              for (int i = 0; i < n; i++) { if (strncmp(opts[i], "--gpu-architecture=compute_", 27) == 0) arch = opts[i] + 27;
                                            if (strcmp(opts[i], "--std=c++17") == 0) std = 1; }
              if (!arch || !std) return 5;
              const char* bad = strstr(pr->src, "undefined_name") ? "undefined_name" : strstr(pr->src, "nope") ? "nope" : 0;
              if (bad) { snprintf(pr->log, sizeof pr->log, "prog.cu(1): error: identifier \\"%s\\" is undefined\\n", bad); return 6; }
              size_t cap = 4096; pr->ptx = malloc(cap);
              int len = snprintf(pr->ptx, cap, "//\\n.version 9.0\\n.target sm_%s\\n", arch);
              for (const char* s = strstr(pr->src, "__global__ void "); s; s = strstr(s + 1, "__global__ void ")) {
                char name[64]; sscanf(s + 16, "%63[A-Za-z0-9_]", name);
                len += snprintf(pr->ptx + len, cap - len, ".visible .entry %s()\\n{\\n}\\n", name); }
              return 0; }
            int nvrtcGetProgramLogSize(void* p, size_t* n) { *n = strlen(((prog_t*) p)->log) + 1; return 0; }
            int nvrtcGetProgramLog(void* p, char* log) { strcpy(log, ((prog_t*) p)->log); return 0; }
            int nvrtcGetPTXSize(void* p, size_t* n) { prog_t* pr = p; if (!pr->ptx) return 4; *n = strlen(pr->ptx) + 1; return 0; }
            int nvrtcGetPTX(void* p, char* out) { strcpy(out, ((prog_t*) p)->ptx); return 0; }
            int nvrtcDestroyProgram(void** p) { prog_t* pr = *p; free(pr->src); free(pr->ptx); free(pr); *p = 0; return 0; }
            const char* nvrtcGetErrorString(int r) { return r == 6 ? "NVRTC_ERROR_COMPILATION" : r == 5 ? "NVRTC_ERROR_INVALID_OPTION" : "NVRTC_ERROR other"; }
            """;

    private static Path cc() {
        for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            for (String n : new String[] {"cc", "gcc", "clang"}) {
                Path p = Path.of(d, n);
                if (Files.isExecutable(p)) return p;
            }
        }
        return null;
    }

    @Test
    void selfCheckRunsAgainstMockDriver() throws Exception {
        Path cc = cc();
        assumeTrue(cc != null, "no C compiler (cc/gcc/clang) on PATH to build the mock driver");
        Path src = dir.resolve("mock_cuda.c");
        Files.writeString(src, MOCK_C);
        Path so = dir.resolve("libmockcuda.so");
        Process build = new ProcessBuilder(cc.toString(), "-O1", "-shared", "-fPIC", "-o", so.toString(), src.toString())
                .redirectErrorStream(true).start();
        String buildOut = new String(build.getInputStream().readAllBytes());
        assertThat(build.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(build.exitValue()).as(buildOut).isZero();

        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "-Dtaco.libcuda=" + so, "-Dtaco.libnvrtc=" + so, "-Dtaco.cache=" + dir.resolve("cache"),
                "dev.taco.kernels.cuda.GpuSelfCheck", "--only",
                "device,round-trip,nvrtc-cache,nvrtc-error,vector-add,task-graph,launch-overhead,launch-error"));
        Process run = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(run.getInputStream().readAllBytes());
        assertThat(run.waitFor(120, TimeUnit.SECONDS)).isTrue();
        System.out.println(out.lines().filter(l -> l.startsWith("PASS") || l.startsWith("FAIL") || l.contains("passed,"))
                .reduce("", (a, b) -> a + "[mock] " + b + "\n"));
        assertThat(out).as(out).contains("8 passed, 0 failed");
        assertThat(run.exitValue()).as(out).isZero();
        assertThat(out).contains("PASS device: Mock GPU, sm_90, 132 SMs")
                .contains("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument");
    }
}
