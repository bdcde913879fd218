/*
 * A mock of libcuda and libnvrtc for MockDriverTest: host memory stands in for device memory, kernels run on the CPU
 * by name (vector_add, add, scale), and the stream-ordered calls are written to a log that the Java side reads with
 * mock_log() (streams and events are named s<id> and e<id>; mock_id() gives a handle's id). It checks the JNA
 * marshalling and the order of calls, not CUDA itself.
 *
 * Stream capture follows the CUDA rules that matter here: work on a capturing stream is recorded, not run; a stream
 * joins a capture by waiting on an event recorded in it; waiting on an event recorded outside the capture fails
 * (CUDA_ERROR_STREAM_CAPTURE_ISOLATION); cuStreamEndCapture fails with CUDA_ERROR_STREAM_CAPTURE_UNJOINED unless the
 * origin stream waited on an event recorded on every other joined stream after its last work; synchronising a
 * capturing stream fails. cuGraphLaunch replays the recorded work in capture order.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned long long u64;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- call log ---- */
static char logbuf[1 << 20];
static size_t loglen;

static void note(const char* fmt, ...) {
  if (loglen + 256 > sizeof logbuf) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(logbuf + loglen, 255, fmt, ap);
  va_end(ap);
  loglen += n > 254 ? 254 : n;
  logbuf[loglen++] = '\n';
  logbuf[loglen] = 0;
}

const char* mock_log(void) { return logbuf; }
void mock_log_clear(void) { loglen = 0; logbuf[0] = 0; }
int mock_id(void* handle) { return handle ? *(int*) handle : 0; }

/* ---- device, context, memory ---- */
static int inited = 0;
int cuInit(unsigned f) { if (f != 0) return 1; inited = 1; return 0; }
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
int cuDeviceGetCount(int* c) { if (!inited) return 3; *c = 1; return 0; }
int cuDeviceGet(int* d, int ord) { if (ord != 0) return 101; *d = 0; return 0; }
int cuDeviceGetName(char* name, int len, int dev) { snprintf(name, len, "Mock GPU"); return dev == 0 ? 0 : 101; }
int cuDeviceGetAttribute(int* v, int a, int dev) {
  switch (a) {
    case 1: *v = 1024; return 0;
    case 16: *v = 132; return 0;
    case 75: *v = 9; return 0;
    case 76: *v = 0; return 0;
    case 97: *v = 232448; return 0;
    default: return 1;
  }
}
int cuDeviceTotalMem_v2(size_t* b, int dev) { *b = (size_t) 141 << 30; return 0; }
static int ctx_token;
int cuDevicePrimaryCtxRetain(void** c, int dev) { *c = &ctx_token; return 0; }
int cuDevicePrimaryCtxRelease_v2(int dev) { return 0; }
int cuCtxSetCurrent(void* c) { return (c == &ctx_token || c == 0) ? 0 : 201; }
int cuMemGetInfo_v2(size_t* f, size_t* t) { *f = 1; *t = 2; return 0; }
/* 256-byte aligned like cuMemAlloc (cuBLASLt's heuristic cares about alignment) */
int cuMemAlloc_v2(u64* p, size_t n) {
  void* m;
  if (n == 0) return 1;
  if (posix_memalign(&m, 256, n)) return 2;
  *p = (u64) m;
  return 0;
}
int cuMemFree_v2(u64 p) { free((void*) p); return 0; }
int cuMemAllocHost_v2(void** p, size_t n) { *p = malloc(n); return *p ? 0 : 2; }
int cuMemFreeHost(void* p) { free(p); return 0; }
int cuMemcpyHtoD_v2(u64 d, const void* s, size_t n) { memcpy((void*) d, s, n); return 0; }
int cuMemcpyDtoH_v2(void* d, u64 s, size_t n) { memcpy(d, (void*) s, n); return 0; }
int cuMemcpyDtoD_v2(u64 d, u64 s, size_t n) { memmove((void*) d, (void*) s, n); return 0; }
int cuMemsetD8_v2(u64 d, unsigned char v, size_t n) { memset((void*) d, v, n); return 0; }

/* ---- modules and kernels ---- */
typedef struct { char names[16][64]; int count; } module_t;
typedef struct { char name[64]; } func_t;
int cuModuleLoadData(void** m, const void* image) {
  const char* s = (const char*) image;
  if (strncmp(s, "//", 2) != 0 && strncmp(s, ".version", 8) != 0) return 218;
  module_t* mod = calloc(1, sizeof(module_t));
  for (const char* p = strstr(s, ".entry "); p && mod->count < 16; p = strstr(p + 1, ".entry ")) {
    sscanf(p + 7, "%63[A-Za-z0-9_]", mod->names[mod->count++]);
  }
  note("module-load %s", mod->count > 0 ? mod->names[0] : "-");
  *m = mod;
  return 0;
}
int cuModuleGetFunction(void** f, void* m, const char* name) {
  module_t* mod = m;
  for (int i = 0; i < mod->count; i++) {
    if (strcmp(mod->names[i], name) == 0) {
      func_t* fn = calloc(1, sizeof(func_t));
      strcpy(fn->name, name);
      *f = fn;
      return 0;
    }
  }
  return 500;
}
int cuModuleUnload(void* m) { free(m); return 0; }
int cuFuncSetAttribute(void* f, int a, int v) { return (a == 8 && v <= 232448) ? 0 : 1; }
int cuFuncGetAttribute(int* v, int a, void* f) { *v = a == 0 ? 1024 : 16; return 0; }

/* the kernels the mock can run: every parameter in its own 8-byte slot (KernelArgs) */
static int param_count(const char* name) {
  return strcmp(name, "vector_add") == 0 || strcmp(name, "add") == 0 || strcmp(name, "scale") == 0 ? 4 : 0;
}
static void run_kernel(const char* name, long threads, const u64* p) {
  int n = (int) p[3];
  if (strcmp(name, "vector_add") == 0 || strcmp(name, "add") == 0) {
    const float* a = (const float*) p[0];
    const float* b = (const float*) p[1];
    float* c = (float*) p[2];
    for (long i = 0; i < threads && i < n; i++) c[i] = a[i] + b[i];
  } else if (strcmp(name, "scale") == 0) {
    const float* x = (const float*) p[0];
    float* y = (float*) p[1];
    float s;
    memcpy(&s, &p[2], sizeof s);
    for (long i = 0; i < threads && i < n; i++) y[i] = x[i] * s;
  }
}

/* ---- streams, events, capture ---- */
static int next_id = 1;
typedef struct { int id; int capturing; int ops; int joined; } stream_t;
typedef struct { int id; unsigned flags; double t; int captured; stream_t* on; int ops; } event_t;
enum { OP_LAUNCH, OP_COPY, OP_MEMSET };
typedef struct { int kind; func_t* f; long threads; u64 p[8]; u64 dst, src; size_t n; } op_t;
#define MAX_OPS 256
typedef struct { op_t ops[MAX_OPS]; int count; } graph_t;
static graph_t* capture;
static stream_t* origin;
static stream_t* members[16];
static int nmembers;

static void run_op(const op_t* op) {
  switch (op->kind) {
    case OP_LAUNCH: run_kernel(op->f->name, op->threads, op->p); break;
    case OP_COPY: memmove((void*) op->dst, (const void*) op->src, op->n); break;
    case OP_MEMSET: memset((void*) op->dst, (int) op->src, op->n); break;
  }
}

/* runs the op, or records it if the stream is capturing */
static int stream_op(void* st, const op_t* op, const char* what) {
  stream_t* s = st;
  if (s && s->capturing) {
    if (capture->count == MAX_OPS) return 2;
    capture->ops[capture->count++] = *op;
    s->ops++;
    note("capture %s s%d", what, s->id);
    return 0;
  }
  note("%s s%d", what, mock_id(st));
  run_op(op);
  return 0;
}

int cuMemcpyHtoDAsync_v2(u64 d, const void* s, size_t n, void* st) {
  op_t op = {.kind = OP_COPY, .dst = d, .src = (u64) s, .n = n};
  return stream_op(st, &op, "htod");
}
int cuMemcpyDtoHAsync_v2(void* d, u64 s, size_t n, void* st) {
  op_t op = {.kind = OP_COPY, .dst = (u64) d, .src = s, .n = n};
  return stream_op(st, &op, "dtoh");
}
int cuMemcpyDtoDAsync_v2(u64 d, u64 s, size_t n, void* st) {
  op_t op = {.kind = OP_COPY, .dst = d, .src = s, .n = n};
  return stream_op(st, &op, "dtod");
}
int cuMemsetD8Async(u64 d, unsigned char v, size_t n, void* st) {
  op_t op = {.kind = OP_MEMSET, .dst = d, .src = v, .n = n};
  return stream_op(st, &op, "memset");
}
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shm, void* st, void** params, void** extra) {
  if (bx * by * bz > 1024 || gx == 0 || bx == 0) return 1;
  op_t op = {.kind = OP_LAUNCH, .f = f, .threads = (long) gx * bx};
  for (int i = 0; i < param_count(op.f->name); i++) op.p[i] = *(u64*) params[i];
  char what[128];
  snprintf(what, sizeof what, "launch %s g=%u b=%u", op.f->name, gx, bx);
  return stream_op(st, &op, what);
}

int cuStreamCreate(void** s, unsigned f) {
  stream_t* st = calloc(1, sizeof(stream_t));
  st->id = next_id++;
  *s = st;
  return 0;
}
int cuStreamSynchronize(void* s) {
  if (s && ((stream_t*) s)->capturing) return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
  note("sync s%d", mock_id(s));
  return 0;
}
int cuCtxSynchronize(void) { return capture ? 900 : 0; }
int cuStreamQuery(void* s) { return 0; }
int cuStreamDestroy_v2(void* s) { free(s); return 0; }
int cuEventCreate(void** e, unsigned f) {
  event_t* ev = calloc(1, sizeof(event_t));
  ev->id = next_id++;
  ev->flags = f;
  *e = ev;
  return 0;
}
/* "record" for events without timing (ordering), "time" for timing events */
int cuEventRecord(void* e, void* st) {
  event_t* ev = e;
  stream_t* s = st;
  const char* kind = (ev->flags & 2) ? "record" : "time";
  if (s && s->capturing) {
    ev->captured = 1;
    ev->on = s;
    ev->ops = s->ops;
    note("capture %s e%d s%d", kind, ev->id, s->id);
    return 0;
  }
  ev->captured = 0;
  ev->t = now_ms();
  note("%s e%d s%d", kind, ev->id, mock_id(st));
  return 0;
}
int cuStreamWaitEvent(void* st, void* e, unsigned f) {
  stream_t* s = st;
  event_t* ev = e;
  if (capture && ev->captured) {
    if (!s->capturing) { /* the stream joins the capture */
      s->capturing = 1;
      s->ops = 0;
      s->joined = -1;
      members[nmembers++] = s;
    }
    if (s == origin && ev->on != origin) ev->on->joined = ev->ops;
    note("capture wait s%d e%d", s->id, ev->id);
    return 0;
  }
  if (s && s->capturing) return 905; /* CUDA_ERROR_STREAM_CAPTURE_ISOLATION: an event from outside the capture */
  note("wait s%d e%d", mock_id(st), ev->id);
  return 0;
}
int cuEventQuery(void* e) { return 0; }
int cuEventSynchronize(void* e) { return 0; }
int cuEventElapsedTime_v2(float* ms, void* a, void* b) {
  event_t* ea = a;
  event_t* eb = b;
  if ((ea->flags & 2) || (eb->flags & 2)) return 400; /* CUDA_ERROR_INVALID_HANDLE: no timing */
  *ms = (float) (eb->t - ea->t);
  if (*ms <= 0) *ms = 1e-4f;
  return 0;
}
int cuEventDestroy_v2(void* e) { free(e); return 0; }

int cuStreamBeginCapture_v2(void* st, int mode) {
  stream_t* s = st;
  if (!s || s->capturing || capture) return 1;
  capture = calloc(1, sizeof(graph_t));
  origin = s;
  nmembers = 0;
  members[nmembers++] = s;
  s->capturing = 1;
  s->ops = 0;
  note("begin-capture s%d mode=%d", s->id, mode);
  return 0;
}
int cuStreamEndCapture(void* st, void** g) {
  stream_t* s = st;
  if (!capture || s != origin) return 903; /* CUDA_ERROR_STREAM_CAPTURE_UNMATCHED */
  int unjoined = 0;
  for (int i = 1; i < nmembers; i++) {
    if (members[i]->joined != members[i]->ops) unjoined = members[i]->id;
  }
  for (int i = 0; i < nmembers; i++) members[i]->capturing = 0;
  graph_t* graph = capture;
  capture = 0;
  origin = 0;
  if (unjoined) {
    free(graph);
    *g = 0;
    note("end-capture s%d unjoined s%d", s->id, unjoined);
    return 904; /* CUDA_ERROR_STREAM_CAPTURE_UNJOINED */
  }
  *g = graph;
  note("end-capture s%d nodes=%d", s->id, graph->count);
  return 0;
}
int cuStreamIsCapturing(void* st, int* status) { *status = st && ((stream_t*) st)->capturing ? 1 : 0; return 0; }
int cuGraphInstantiateWithFlags(void** exec, void* g, u64 flags) {
  graph_t* e = malloc(sizeof(graph_t));
  memcpy(e, g, sizeof(graph_t));
  *exec = e;
  note("instantiate nodes=%d", e->count);
  return 0;
}
int cuGraphGetNodes(void* g, void** nodes, size_t* n) {
  graph_t* graph = g;
  if (nodes) {
    for (size_t i = 0; i < *n && i < (size_t) graph->count; i++) nodes[i] = &graph->ops[i];
  }
  *n = graph->count;
  return 0;
}
int cuGraphLaunch(void* exec, void* st) {
  graph_t* e = exec;
  if (st && ((stream_t*) st)->capturing) return 900;
  note("graph-launch s%d nodes=%d", mock_id(st), e->count);
  for (int i = 0; i < e->count; i++) run_op(&e->ops[i]);
  return 0;
}
int cuGraphExecDestroy(void* e) { note("graph-exec-destroy"); free(e); return 0; }
int cuGraphDestroy(void* g) { note("graph-destroy"); free(g); return 0; }

int cuGetErrorName(int e, const char** s) {
  switch (e) {
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 500: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
    case 218: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
    default: *s = 0; return 1;
  }
}
int cuGetErrorString(int e, const char** s) {
  switch (e) {
    case 1: *s = "invalid argument"; return 0;
    case 500: *s = "named symbol not found"; return 0;
    case 218: *s = "a PTX JIT compilation failed"; return 0;
    case 904: *s = "the capture sequence contains a fork that was not joined to the primary stream"; return 0;
    default: *s = 0; return 1;
  }
}

/* ---- libnvrtc: PTX with one .entry per __global__ function ---- */
typedef struct { char* src; char* ptx; char log[512]; } prog_t;
int nvrtcVersion(int* ma, int* mi) { *ma = 13; *mi = 0; return 0; }
int nvrtcCreateProgram(void** p, const char* src, const char* name, int nh, const char* const* h,
                       const char* const* in) {
  prog_t* pr = calloc(1, sizeof(prog_t));
  pr->src = strdup(src);
  *p = pr;
  return 0;
}
int nvrtcCompileProgram(void* p, int n, const char* const* opts) {
  prog_t* pr = p;
  const char* arch = 0;
  int std = 0;
  for (int i = 0; i < n; i++) {
    if (strncmp(opts[i], "--gpu-architecture=compute_", 27) == 0) arch = opts[i] + 27;
    if (strcmp(opts[i], "--std=c++17") == 0) std = 1;
  }
  if (!arch || !std) return 5;
  const char* bad = strstr(pr->src, "undefined_name") ? "undefined_name" : strstr(pr->src, "nope") ? "nope" : 0;
  if (bad) {
    snprintf(pr->log, sizeof pr->log, "prog.cu(1): error: identifier \"%s\" is undefined\n", bad);
    return 6;
  }
  size_t cap = 4096;
  pr->ptx = malloc(cap);
  int len = snprintf(pr->ptx, cap, "//\n.version 9.0\n.target sm_%s\n", arch);
  for (const char* s = strstr(pr->src, "__global__ void "); s; s = strstr(s + 1, "__global__ void ")) {
    char name[64];
    sscanf(s + 16, "%63[A-Za-z0-9_]", name);
    len += snprintf(pr->ptx + len, cap - len, ".visible .entry %s()\n{\n}\n", name);
  }
  return 0;
}
int nvrtcGetProgramLogSize(void* p, size_t* n) { *n = strlen(((prog_t*) p)->log) + 1; return 0; }
int nvrtcGetProgramLog(void* p, char* log) { strcpy(log, ((prog_t*) p)->log); return 0; }
int nvrtcGetPTXSize(void* p, size_t* n) { prog_t* pr = p; if (!pr->ptx) return 4; *n = strlen(pr->ptx) + 1; return 0; }
int nvrtcGetPTX(void* p, char* out) { strcpy(out, ((prog_t*) p)->ptx); return 0; }
int nvrtcDestroyProgram(void** p) { prog_t* pr = *p; free(pr->src); free(pr->ptx); free(pr); *p = 0; return 0; }
const char* nvrtcGetErrorString(int r) {
  return r == 6 ? "NVRTC_ERROR_COMPILATION" : r == 5 ? "NVRTC_ERROR_INVALID_OPTION" : "NVRTC_ERROR other";
}
