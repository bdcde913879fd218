// Host shim for the gpu-semantics harness programs (tests only): lets g++ compile the *translated* CUDA C of a
// @Parallel kernel and run it on the CPU, one simulated thread after another. It checks the translator's Java
// semantics (wrap-around, shifts, conversions, NaN rules) against the JVM on a machine without a GPU. It does NOT
// check CUDA's own intrinsics (those are replaced by their IEEE definitions here); gpu-semantics.sh does, on a GPU.
// Build: g++ -std=c++17 -O1 -ffp-contract=off -DHOST_SHIM -include host_shim.h -x c++ kernel.cu
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#define __device__
#define __global__
#define __forceinline__ inline
struct HostDim { unsigned x = 0, y = 0, z = 0; };
static HostDim threadIdx, blockIdx, blockDim, gridDim;
static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline long long __double_as_longlong(double d) { long long i; std::memcpy(&i, &d, 8); return i; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
static inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __popc(int x) { return __builtin_popcount((unsigned)x); }
static inline int __popcll(long long x) { return __builtin_popcountll((unsigned long long)x); }
template <typename T> static inline T __shfl_xor_sync(unsigned, T, int) { std::abort(); }  // SIMT: not shimmed
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
typedef int cudaError_t;
static const int cudaSuccess = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2;
static inline cudaError_t cudaMalloc(void** p, size_t n) { *p = std::malloc(n); return 0; }
static inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, int) { std::memcpy(d, s, n); return 0; }
static inline cudaError_t cudaDeviceSynchronize() { return 0; }
static inline const char* cudaGetErrorString(cudaError_t) { return "host shim"; }
// Runs a @Parallel kernel's grid sequentially: every (block, thread) pair once.
#define HOST_LAUNCH(kernel, grid, block, ...)                                            \
  do {                                                                                   \
    gridDim.x = (grid); blockDim.x = (block);                                            \
    for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)                           \
      for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++) kernel(__VA_ARGS__); \
  } while (0)
