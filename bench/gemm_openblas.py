#!/usr/bin/env python3
"""OpenBLAS SGEMM on the training's GEMM shapes, and the merge of its figures with GemmShapesBench's.

  gemm_openblas.py measure SHAPES.tsv [KEY...]        one JSON object per shape (all, or those named) and mode
  gemm_openblas.py merge SHAPES.tsv OPENBLAS JAVA     the results list (JSON) on stdout, a markdown table on stderr
  gemm_openblas.py lib                                the library's path (GemmShapesBench openblas=LIB calls it itself)

SHAPES.tsv is what `GemmShapesBench shapes` prints (key, model, m, k, n, op, accumulate, calls, uses).

The library is numpy's own OpenBLAS (numpy.libs/libscipy_openblas64_*.so), called through ctypes as
cblas_sgemm(RowMajor, transA, transB, m, n, k, 1, A, lda, B, ldb, beta, C, ldc): the same row-major operands,
transposes and accumulate flag (beta = 1) as the Java call, with no copy and no Python-level temporaries. ctypes
releases the GIL during the call, so two Python threads multiply at the same time.

Modes, as in GemmShapesBench (MODES, default pair,solo):
  pair  two callers at once, each with its own operands, OpenBLAS set to one thread (what two tensor-parallel
        ranks sharing a 2-core machine get); GFLOP/s count both products
  solo  one caller, OpenBLAS with as many threads as CPUs (numpy's default)
  core  one caller, OpenBLAS set to one thread (the single-core kernels compared)
  cpu   core timed by the calling thread's CPU time (time.thread_time) instead of the wall clock: on a machine shared
        with other work, the time others hold the core does not count
Each mode: calls for about 0.25 s untimed, then ROUNDS rounds of about 0.25 s; the best round counts (as the Java side
takes its best JMH iteration). Modes pair, solo and core are no longer measured here by bench/run-gemm-shapes.sh: Java
alternates Gemm with this library in its own JVM (GemmShapesBench openblas=LIB), whose records carry both sides and the
ratio, and merge takes them as they are.
"""
import ctypes
import glob
import json
import os
import sys
import threading
import time

try:
    import numpy as np
except ImportError:
    sys.exit(f'gemm_openblas.py: the OpenBLAS baseline is numpy\'s own OpenBLAS, and {sys.executable} has no numpy'
             ' (pip install numpy: its wheel bundles scipy-openblas64; or put a python3 that has it first on PATH)')

ROUNDS = 5
ROUND_S = 0.25
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def library_path():
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), '..', 'numpy.libs', 'libscipy_openblas64_*.so'))
    if not libs:
        sys.exit('gemm_openblas.py: numpy does not bundle scipy-openblas64 (numpy.libs/libscipy_openblas64_*.so)')
    return os.path.realpath(libs[0])


def openblas():
    lib = ctypes.CDLL(library_path())
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.scipy_cblas_sgemm64_.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, ctypes.c_float,
                                         ptr, i64, ptr, i64, ctypes.c_float, ptr, i64]
    lib.scipy_cblas_sgemm64_.restype = None
    lib.scipy_openblas_set_num_threads64_.argtypes = [ctypes.c_int]
    lib.scipy_openblas_get_corename64_.restype = ctypes.c_char_p
    lib.scipy_openblas_get_config64_.restype = ctypes.c_char_p
    return lib


def read_shapes(path):
    shapes = []
    with open(path, encoding='utf-8') as f:
        for line in f:
            key, model, m, k, n, op, acc, calls, uses = line.rstrip('\n').split('\t')
            shapes.append(dict(key=key, model=model, m=int(m), k=int(k), n=int(n), op=op, accumulate=acc == 'true',
                               calls=int(calls), uses=uses))
    return shapes


def product(lib, s, seed):
    """A closure that makes one product of shape s on its own operands (A·B, A·Bᵀ or Aᵀ·B as stored by Java)."""
    m, k, n = s['m'], s['k'], s['n']
    rng = np.random.default_rng(seed)
    trans_a, trans_b = s['op'] == 'Aᵀ·B', s['op'] == 'A·Bᵀ'
    a = (rng.random((k, m) if trans_a else (m, k), dtype=np.float32) - 0.5)
    b = (rng.random((n, k) if trans_b else (k, n), dtype=np.float32) - 0.5)
    c = (rng.random((m, n), dtype=np.float32) - 0.5)
    args = (ROW_MAJOR, TRANS if trans_a else NO_TRANS, TRANS if trans_b else NO_TRANS, m, n, k, 1.0,
            a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], 1.0 if s['accumulate'] else 0.0, c.ctypes.data, n)
    f = lib.scipy_cblas_sgemm64_

    def run(times):
        for _ in range(times):
            f(*args)
    run.keep = (a, b, c)  # the operands live as long as the closure
    return run


def timed(callers, times, clock=time.perf_counter):
    """Seconds (of `clock`) for every caller to make `times` products, all starting together."""
    if len(callers) == 1:
        t = clock()
        callers[0](times)
        return clock() - t
    start = threading.Barrier(len(callers) + 1)
    threads = [threading.Thread(target=lambda c=c: (start.wait(), c(times))) for c in callers]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


MODES = {'pair': (2, 1), 'solo': (1, os.cpu_count()), 'core': (1, 1), 'cpu': (1, 1)}  # (callers, OpenBLAS threads)


def measure(shapes_path, keys):
    lib = openblas()
    print(f"# OpenBLAS {lib.scipy_openblas_get_config64_().decode()} core {lib.scipy_openblas_get_corename64_().decode()}"
          f", numpy {np.__version__}", file=sys.stderr)
    modes = os.environ.get('MODES', 'pair,solo').split(',')
    for s in read_shapes(shapes_path):
        if keys and s['key'] not in keys:
            continue
        flops = 2 * s['m'] * s['k'] * s['n']
        for mode in modes:
            callers, threads = MODES[mode]
            lib.scipy_openblas_set_num_threads64_(threads)
            clock = time.thread_time if mode == 'cpu' else time.perf_counter
            runs = [product(lib, s, seed) for seed in range(callers)]
            one = max(timed(runs, 3, clock) / 3, 1e-7)
            times = max(1, int(ROUND_S / one))
            timed(runs, times, clock)  # warmup
            best = min(timed(runs, times, clock) for _ in range(ROUNDS))
            print(json.dumps(dict(key=s['key'], mode=mode, threads=threads, us_best=round(best / times * 1e6, 2),
                                  gflops=round(callers * times * flops / best / 1e9, 2),
                                  load=open('/proc/loadavg').read().split()[0])), flush=True)


def merge(shapes_path, openblas_path, java_path):
    def load(path):
        with open(path, encoding='utf-8') as f:
            return {(r['key'], r['mode']): r for r in map(json.loads, (l for l in f if l.startswith('{')))}
    ob, jv = load(openblas_path), load(java_path)
    cpus = os.cpu_count()
    threads = {'pair': f'two callers at once (the TP=2 ranks), each with its own operands: Gemm with its {cpus - 1} '
                       f'helper(s) (they join only while a core is free); OpenBLAS 1 thread each; alternated in '
                       f'slices in one JVM when the record has ratio_q1',
               'solo': f'one caller: Gemm with its {cpus - 1} helper(s); OpenBLAS {cpus} threads '
                       f'(OPENBLAS_THREAD_TIMEOUT=21); alternated in slices in one JVM when the record has ratio_q1',
               'core': 'one caller on one core: Gemm without helpers (-Dtaco.gemm.threads=1); OpenBLAS 1 thread; '
                       'alternated in slices in one JVM when the record has ratio_q1',
               'cpu': 'as core, timed by the thread\'s CPU time instead of the wall clock'}
    out, table = [], []
    for mode in MODES:
        step = {}
        for s in read_shapes(shapes_path):
            j = jv.get((s['key'], mode))
            if j is None:
                continue
            if 'openblas_gflops' in j:  # alternated in one JVM: both sides and the ratio
                o = dict(gflops=j['openblas_gflops'], us_best=j['openblas_us'], load=j['load'])
                ratio = dict(ratio=j['ratio'], ratio_q1=j['ratio_q1'], ratio_q3=j['ratio_q3'], rounds=j['rounds'],
                             slice_ms=j['slice_ms'])
            else:
                o = ob.get((s['key'], mode))
                if o is None:
                    continue
                ratio = dict(ratio=round(j['gflops'] / o['gflops'], 3))
            e = dict(m=s['m'], k=s['k'], n=s['n'], op=s['op'], model=s['model'], mode=mode, gflops=j['gflops'],
                     openblas_gflops=o['gflops'], **ratio, accumulate=s['accumulate'], calls=s['calls'],
                     uses=s['uses'], threads=threads[mode], load=o['load'])
            out.append(e)
            table.append(f"| {mode} | {s['model']} | {s['m']} | {s['k']} | {s['n']} | {s['op']} | {s['uses']} "
                         f"| {j['us_best']:.0f} | {j['gflops']:.1f} | {o['gflops']:.1f} | {e['ratio']:.2f} "
                         f"| {o['load']} |")
            t = step.setdefault(s['model'], [0.0, 0.0])
            t[0] += s['calls'] * j['us_best']
            t[1] += s['calls'] * o['us_best']
        for model, (tj, to) in step.items():
            if model != 'square':
                whole = all((s['key'], mode) in jv for s in read_shapes(shapes_path) if s['model'] == model)
                what = 'all GEMMs of one step' if whole else 'the GEMMs measured (KEYS), not a whole step'
                table.append(f"| {mode} | {model} | | | | | {what} | {tj:.0f} | OpenBLAS {to:.0f} us "
                             f"| | {to / tj:.2f} | |")
    print('| mode | model | m | k | n | op | uses per step | Gemm us | Gemm GFLOP/s | OpenBLAS GFLOP/s | ratio | load |',
          file=sys.stderr)
    print('|---|---|---|---|---|---|---|---|---|---|---|---|', file=sys.stderr)
    print('\n'.join(table), file=sys.stderr)
    sys.stdout.reconfigure(encoding='utf-8')
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == '__main__':
    if sys.argv[1:] == ['lib']:
        print(library_path())
    elif len(sys.argv) >= 3 and sys.argv[1] == 'measure':
        measure(sys.argv[2], set(sys.argv[3:]))
    elif len(sys.argv) == 5 and sys.argv[1] == 'merge':
        merge(*sys.argv[2:])
    else:
        sys.exit(__doc__)
