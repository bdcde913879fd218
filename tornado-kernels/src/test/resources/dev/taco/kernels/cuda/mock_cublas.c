/*
 * A mock of libcublas and libcublasLt for CublasMockTest, loaded next to mock_cuda.c (whose "device memory" is host
 * memory, so these GEMMs read and write the buffers directly). It checks the JNA marshalling and the row-major mapping,
 * not cuBLAS: a column-major reference cublasGemmEx / cublasGemmStridedBatchedEx for fp32 and bf16 (fp32 accumulation
 * in k order, bf16 stored round-to-nearest-even), a cublasLtMatmul with the BIAS and GELU_BIAS epilogues (GELU in the
 * tanh form), argument validation in the spirit of cuBLAS (a leading dimension below the rows gives
 * CUBLAS_STATUS_INVALID_VALUE), the status names and strings of the real library (cuBLAS 13.1), and a log of the calls
 * (mock_cublas_log) with their arguments as received. mock_cublas_fail(name, status) makes the next call of that entry
 * point return the status. Streams are mock_cuda's (their first int is the id, logged as s<id>).
 *
 * cublasSetStream_v2 forgets the workspace (as cuBLAS resets it to its default pool); GEMMs log the workspace size
 * they would use. cublasLtMatmulAlgoGetHeuristic finds no algorithm (count 0) when the workspace allowed is below
 * MOCK_LT_WORKSPACE.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long u64;

/* ---- log and fault injection ---- */
static char logbuf[1 << 18];
static size_t loglen;

static void note(const char* fmt, ...) {
  if (loglen + 512 > sizeof logbuf) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(logbuf + loglen, 511, fmt, ap);
  va_end(ap);
  loglen += n > 510 ? 510 : n;
  logbuf[loglen++] = '\n';
  logbuf[loglen] = 0;
}

const char* mock_cublas_log(void) { return logbuf; }
void mock_cublas_log_clear(void) { loglen = 0; logbuf[0] = 0; }

static char fail_name[64];
static int fail_status;
void mock_cublas_fail(const char* name, int status) {
  snprintf(fail_name, sizeof fail_name, "%s", name);
  fail_status = status;
}
static int injected(const char* name) {
  if (fail_status && strcmp(name, fail_name) == 0) {
    int s = fail_status;
    fail_status = 0;
    note("fail %s %d", name, s);
    return s;
  }
  return 0;
}

static int sid(void* stream) { return stream ? *(int*) stream : 0; }

enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, EXECUTION_FAILED = 13, NOT_SUPPORTED = 15 };
enum { R_32F = 0, R_16BF = 14 };

/* ---- status names and strings, as libcublas.so.13 answers ---- */
const char* cublasGetStatusName(int s) {
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unrecognized status";
  }
}
const char* cublasGetStatusString(int s) {
  switch (s) {
    case 0: return "success";
    case 1: return "the library was not initialized";
    case 3: return "the resource allocation failed";
    case 7: return "an unsupported value or parameter was passed to the function";
    case 8: return "the function requires an architectural feature absent from the device";
    case 11: return "an access to GPU memory space failed";
    case 13: return "the function failed to launch on the GPU";
    case 14: return "an internal operation failed";
    case 15: return "the requested functionality is not supported";
    case 16: return "the license check failed";
    default: return "unrecognized status";
  }
}
const char* cublasLtGetStatusName(int s) { return cublasGetStatusName(s); }
const char* cublasLtGetStatusString(int s) { return cublasGetStatusString(s); }

int cublasGetProperty(int type, int* v) {
  if (!v || type < 0 || type > 2) return INVALID_VALUE;
  *v = type == 0 ? 13 : 0;
  return OK;
}
size_t cublasLtGetVersion(void) { return 130000; }

/* ---- bf16 and element access ---- */
static float bf16_to_f(uint16_t b) {
  uint32_t u = (uint32_t) b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t) ((u >> 16) | 0x40);
  return (uint16_t) ((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
static float load(int type, const void* p, long long i) {
  return type == R_16BF ? bf16_to_f(((const uint16_t*) p)[i]) : ((const float*) p)[i];
}
static void store(int type, void* p, long long i, float v) {
  if (type == R_16BF) ((uint16_t*) p)[i] = f_to_bf16(v);
  else ((float*) p)[i] = v;
}
static const char* tname(int t) { return t == R_32F ? "f32" : t == R_16BF ? "bf16" : "?"; }
static char op(int t) { return t == 0 ? 'N' : t == 1 ? 'T' : '?'; }
static int imax(int a, int b) { return a > b ? a : b; }

/* ---- cuBLAS handle ---- */
typedef struct { int magic; void* stream; void* ws; size_t ws_bytes; int math; } handle_t;
#define MAGIC 0x7ac0b1a5

int cublasCreate_v2(handle_t** h) {
  int s = injected("cublasCreate_v2");
  if (s) return s;
  handle_t* hd = calloc(1, sizeof(handle_t));
  hd->magic = MAGIC;
  *h = hd;
  note("create");
  return OK;
}
int cublasDestroy_v2(handle_t* h) {
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  h->magic = 0;
  free(h);
  note("destroy");
  return OK;
}
int cublasSetMathMode(handle_t* h, int mode) {
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  h->math = mode;
  note("math-mode %d", mode);
  return OK;
}
int cublasSetWorkspace_v2(handle_t* h, void* ws, size_t bytes) {
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  h->ws = ws;
  h->ws_bytes = bytes;
  note("set-workspace %zu", bytes);
  return OK;
}
int cublasSetStream_v2(handle_t* h, void* stream) {
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  h->stream = stream;
  h->ws = 0; /* cuBLAS goes back to its default workspace pool */
  h->ws_bytes = 0;
  note("set-stream s%d", sid(stream));
  return OK;
}

/* column-major C = alpha op(A) op(B) + beta C, batch by batch */
static int gemm(const char* what, handle_t* h, int ta, int tb, int m, int n, int k, const float* alpha,
                const void* A, int at, int lda, long long sa, const void* B, int bt, int ldb, long long sb,
                const float* beta, void* C, int ct, int ldc, long long sc, int batch, int compute, int algo) {
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  note("%s s%d transa=%c transb=%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d A=%s B=%s C=%s compute=%d algo=%d "
       "alpha=%g beta=%g ws=%zu batch=%d strides=%lld,%lld,%lld",
       what, sid(h->stream), op(ta), op(tb), m, n, k, lda, ldb, ldc, tname(at), tname(bt), tname(ct), compute, algo,
       alpha ? *alpha : NAN, beta ? *beta : NAN, h->ws_bytes, batch, sa, sb, sc);
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ta < 0 || ta > 1 || tb < 0 || tb > 1 || !alpha || !beta) {
    return INVALID_VALUE;
  }
  if (lda < imax(1, ta == 0 ? m : k) || ldb < imax(1, tb == 0 ? k : n) || ldc < imax(1, m)) return INVALID_VALUE;
  if (at != bt || !((at == R_32F && ct == R_32F) || (at == R_16BF && (ct == R_16BF || ct == R_32F)))) {
    return NOT_SUPPORTED;
  }
  if (compute != 68 && compute != 75 && compute != 77) return NOT_SUPPORTED; // 32F, 32F_FAST_16BF, 32F_FAST_TF32
  for (int q = 0; q < batch; q++) {
    const char* a = (const char*) A + (size_t) (q * sa) * (at == R_16BF ? 2 : 4);
    const char* b = (const char*) B + (size_t) (q * sb) * (bt == R_16BF ? 2 : 4);
    char* c = (char*) C + (size_t) (q * sc) * (ct == R_16BF ? 2 : 4);
    for (int j = 0; j < n; j++) {
      for (int i = 0; i < m; i++) {
        float acc = 0;
        for (int p = 0; p < k; p++) {
          float x = load(at, a, ta == 0 ? i + (long long) p * lda : p + (long long) i * lda);
          float y = load(bt, b, tb == 0 ? p + (long long) j * ldb : j + (long long) p * ldb);
          acc += x * y;
        }
        long long ci = i + (long long) j * ldc;
        float v = *alpha * acc + (*beta == 0 ? 0 : *beta * load(ct, c, ci));
        store(ct, c, ci, v);
      }
    }
  }
  return OK;
}

int cublasGemmEx(handle_t* h, int ta, int tb, int m, int n, int k, const float* alpha, const void* A, int at, int lda,
                 const void* B, int bt, int ldb, const float* beta, void* C, int ct, int ldc, int compute, int algo) {
  int s = injected("cublasGemmEx");
  if (s) return s;
  return gemm("gemm", h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, compute, algo);
}

int cublasGemmStridedBatchedEx(handle_t* h, int ta, int tb, int m, int n, int k, const float* alpha, const void* A,
                               int at, int lda, long long sa, const void* B, int bt, int ldb, long long sb,
                               const float* beta, void* C, int ct, int ldc, long long sc, int batch, int compute,
                               int algo) {
  int s = injected("cublasGemmStridedBatchedEx");
  if (s) return s;
  return gemm("gemm-batched", h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch,
              compute, algo);
}

/* ---- cuBLASLt ---- */
#define MOCK_LT_WORKSPACE ((u64) 1 << 20)
#define ALGO_MAGIC 0x4d4f434bULL
typedef struct { int magic; } lt_t;
typedef struct { int compute, scale, transa, transb, epilogue; const void* bias; } desc_t;
typedef struct { int type; u64 rows, cols; long long ld; } layout_t;
typedef struct { u64 max_ws; unsigned align[4]; } pref_t;
typedef struct { u64 data[8]; } algo_t;
typedef struct { algo_t algo; size_t ws; int state; float waves; int reserved[4]; } heuristic_t;

int cublasLtCreate(lt_t** h) {
  int s = injected("cublasLtCreate");
  if (s) return s;
  *h = calloc(1, sizeof(lt_t));
  (*h)->magic = MAGIC;
  note("lt-create");
  return OK;
}
int cublasLtDestroy(lt_t* h) {
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  free(h);
  note("lt-destroy");
  return OK;
}
int cublasLtMatmulDescCreate(desc_t** d, int compute, int scale) {
  if (compute != 68 || scale != R_32F) return INVALID_VALUE;
  *d = calloc(1, sizeof(desc_t));
  (*d)->compute = compute;
  (*d)->scale = scale;
  (*d)->epilogue = 1;
  return OK;
}
int cublasLtMatmulDescDestroy(desc_t* d) { free(d); return OK; }
int cublasLtMatmulDescSetAttribute(desc_t* d, int attr, const void* buf, size_t size) {
  switch (attr) {
    case 3: if (size != 4) return INVALID_VALUE; memcpy(&d->transa, buf, 4); return OK;
    case 4: if (size != 4) return INVALID_VALUE; memcpy(&d->transb, buf, 4); return OK;
    case 7: if (size != 4) return INVALID_VALUE; memcpy(&d->epilogue, buf, 4); return OK;
    case 8: if (size != 8) return INVALID_VALUE; memcpy(&d->bias, buf, 8); return OK;
    default: return INVALID_VALUE;
  }
}
int cublasLtMatrixLayoutCreate(layout_t** l, int type, u64 rows, u64 cols, long long ld) {
  if (ld < (long long) rows) return INVALID_VALUE;
  *l = calloc(1, sizeof(layout_t));
  **l = (layout_t) {type, rows, cols, ld};
  return OK;
}
int cublasLtMatrixLayoutDestroy(layout_t* l) { free(l); return OK; }
int cublasLtMatmulPreferenceCreate(pref_t** p) {
  *p = calloc(1, sizeof(pref_t));
  for (int i = 0; i < 4; i++) (*p)->align[i] = 256;
  return OK;
}
int cublasLtMatmulPreferenceDestroy(pref_t* p) { free(p); return OK; }
int cublasLtMatmulPreferenceSetAttribute(pref_t* p, int attr, const void* buf, size_t size) {
  if (attr == 1 && size == 8) { memcpy(&p->max_ws, buf, 8); return OK; }
  if (attr >= 5 && attr <= 8 && size == 4) { memcpy(&p->align[attr - 5], buf, 4); return OK; }
  return INVALID_VALUE;
}

/* the column-major problem (m x n x k) the descriptors describe, or INVALID_VALUE */
static int shape(const desc_t* d, const layout_t* a, const layout_t* b, const layout_t* c, const layout_t* dd,
                 int* m, int* n, int* k) {
  *m = (int) (d->transa == 0 ? a->rows : a->cols);
  *k = (int) (d->transa == 0 ? a->cols : a->rows);
  int kb = (int) (d->transb == 0 ? b->rows : b->cols);
  *n = (int) (d->transb == 0 ? b->cols : b->rows);
  if (kb != *k || c->rows != (u64) *m || c->cols != (u64) *n || dd->rows != (u64) *m || dd->cols != (u64) *n) {
    return INVALID_VALUE;
  }
  if (a->type != R_16BF || b->type != R_16BF || c->type != dd->type || (dd->type != R_16BF && dd->type != R_32F)) {
    return NOT_SUPPORTED;
  }
  if ((d->epilogue & 4) && !d->bias) return INVALID_VALUE;
  return OK;
}

static int alignment(const void* p) {
  uintptr_t u = (uintptr_t) p;
  uintptr_t low = u & (~u + 1);
  return u == 0 || low > 256 ? 256 : (int) low;
}

int cublasLtMatmulAlgoGetHeuristic(lt_t* h, desc_t* d, layout_t* a, layout_t* b, layout_t* c, layout_t* dd,
                                   pref_t* p, int requested, heuristic_t* results, int* returned) {
  int s = injected("cublasLtMatmulAlgoGetHeuristic");
  if (s) return s;
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  if (requested < 1) return INVALID_VALUE;
  int m, n, k;
  s = shape(d, a, b, c, dd, &m, &n, &k);
  note("lt-heuristic m=%d n=%d k=%d transa=%c transb=%c epilogue=%d D=%s max-ws=%llu align=%u/%u/%u/%u bias-align=%d",
       m, n, k, op(d->transa), op(d->transb), d->epilogue, tname(dd->type), p->max_ws, p->align[0], p->align[1],
       p->align[2], p->align[3], alignment(d->bias));
  if (s) return s;
  if (p->max_ws < MOCK_LT_WORKSPACE) {
    *returned = 0;
    return OK;
  }
  memset(results, 0, sizeof(heuristic_t));
  results[0].algo.data[0] = ALGO_MAGIC;
  results[0].ws = MOCK_LT_WORKSPACE;
  results[0].state = OK;
  results[0].waves = 1.0f;
  *returned = 1;
  return OK;
}

static float gelu_tanh(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }

int cublasLtMatmul(lt_t* h, desc_t* d, const float* alpha, const void* A, layout_t* ad, const void* B, layout_t* bd,
                   const float* beta, const void* C, layout_t* cd, void* D, layout_t* dd, const algo_t* algo,
                   void* ws, size_t ws_bytes, void* stream) {
  int s = injected("cublasLtMatmul");
  if (s) return s;
  if (!h || h->magic != MAGIC) return NOT_INITIALIZED;
  int m, n, k;
  s = shape(d, ad, bd, cd, dd, &m, &n, &k);
  note("lt-matmul s%d m=%d n=%d k=%d transa=%c transb=%c epilogue=%d D=%s alpha=%g beta=%g ws=%zu", sid(stream), m, n,
       k, op(d->transa), op(d->transb), d->epilogue, tname(dd->type), alpha ? *alpha : NAN, beta ? *beta : NAN,
       ws_bytes);
  if (s) return s;
  if (!algo || algo->data[0] != ALGO_MAGIC || !ws || ws_bytes < MOCK_LT_WORKSPACE || !alpha || !beta) {
    return INVALID_VALUE;
  }
  int ty = dd->type;
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < m; i++) {
      float acc = 0;
      for (int p = 0; p < k; p++) {
        float x = load(R_16BF, A, d->transa == 0 ? i + (long long) p * ad->ld : p + (long long) i * ad->ld);
        float y = load(R_16BF, B, d->transb == 0 ? p + (long long) j * bd->ld : j + (long long) p * bd->ld);
        acc += x * y;
      }
      float v = *alpha * acc + (*beta == 0 ? 0 : *beta * load(ty, C, i + (long long) j * cd->ld));
      if (d->epilogue & 4) v += load(ty, d->bias, i);
      if (d->epilogue & 32) v = gelu_tanh(v);
      store(ty, D, i + (long long) j * dd->ld, v);
    }
  }
  return OK;
}
