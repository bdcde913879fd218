"""Assembles bench/results/cpu-perf.json (issue G's figures) from the outputs of the three CPU benchmarks.

Usage: python3 bench/cpu_perf.py CODEC_SIMD.txt[,...] CODEC_REFERENCE.txt[,...] GEMM.json[,GEMM2.json...] \
           TRAIN_STEP.txt[,TRAIN_STEP2.txt...] "COMMAND" > cpu-perf.json

CODEC_*.txt: bench/run-codec.sh's output (its markdown table and copy line), of this build and of the reference:
the same script in the tree of the build before issue G (2f8c3ff), or this build's with simd=false (the scalar
reference kernels), from the same session, one pair per run (the n-th of each list together), a codec's figures per direction from the run with the median gain (copy_gbps
is the encode run's copy, decode_copy_gbps the decode run's);
GEMM.json: bench/run-gemm-shapes.sh's stdout (a list, one entry per shape and mode), one file per run; only mode
"pair" (the two TP ranks of ./taco train on two cores; records alternated with OpenBLAS keep their ratio quartiles) and, for the square shape, mode "solo" go into "gemm", every
entry of the first run into "gemm_all_modes". With several runs a shape's entry is the run with the median ratio
(the lower middle one for an even count), and "runs" lists every run's ratio, GFLOP/s and load: on a shared 2-core
machine one run's ratios scatter by 0.1-0.3. TRAIN_STEP.txt: bench/run-train-step.sh's output (its last JSON line:
per codec ms, baseline_ms, speedup), one file per run, chosen the same way. Every ratio is to a baseline measured
in the same run as the figure.
"""
import json
import platform
import re
import sys


def codec_table(path):
    text = open(path).read()
    copy = float(re.search(r"copy \(System\.arraycopy\) ([0-9.]+) GB/s", text).group(1))
    loads = re.findall(r"load(?: after)?: ([0-9. ]+)", text)
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and re.fullmatch(r"[0-9.]+", cells[1] or "x") and not line.startswith("|---"):
            rows[cells[0]] = (float(cells[1]), float(cells[2]))
    return copy, rows, [l.strip() for l in loads]


def median_entry(entries, ratio):
    """The entry whose ratio is the median (the lower middle one of an even count)."""
    ranked = sorted(entries, key=ratio)
    return ranked[(len(ranked) - 1) // 2]


def gemm_entries(paths):
    runs = [json.load(open(p)) for p in paths]
    keep = lambda g: g["mode"] == "pair" or (g["model"] == "square" and g["mode"] == "solo")
    by_shape = {}
    for run in runs:
        for g in filter(keep, run):
            key = (g["model"], g["mode"], g["m"], g["k"], g["n"], g["op"], g["accumulate"])
            by_shape.setdefault(key, []).append(g)
    out = []
    for entries in by_shape.values():
        g = dict(median_entry(entries, lambda e: e["ratio"]))
        if len(entries) > 1:
            g["runs"] = [{"ratio": e["ratio"], "gflops": e["gflops"], "openblas_gflops": e["openblas_gflops"],
                          "load": e["load"]} for e in entries]
        out.append(g)
    return out, runs[0]


def train_step(paths):
    runs = []
    for path in paths:
        lines = [line for line in open(path) if line.startswith("{")]
        if not lines:
            sys.exit(f"{path}: no JSON line (is it bench/run-train-step.sh's output?)")
        runs.append(json.loads(lines[-1]))
    chosen = median_entry(runs, lambda s: s["taco"]["speedup"])
    by_codec = {c: dict(chosen[c]) | ({"runs": [r[c] for r in runs]} if len(runs) > 1 else {}) for c in chosen}
    return by_codec


def codec_entries(simd_paths, ref_paths):
    """Per codec and direction, the run (a SIMD table and the reference table of the same session) with the median
    gain over the reference's fraction; "runs" lists every run's fractions and gains."""
    runs = []
    for simd_path, ref_path in zip(simd_paths, ref_paths):
        copy, simd, simd_load = codec_table(simd_path)
        ref_copy, ref, ref_load = codec_table(ref_path)
        run = {}
        for name, (enc, dec) in simd.items():
            r_enc, r_dec = ref[name]
            run[name] = {"encode_gbps": enc, "decode_gbps": dec, "copy_gbps": copy,
                         "encode_fraction": round(enc / copy, 4), "decode_fraction": round(dec / copy, 4),
                         "reference_encode_fraction": round(r_enc / ref_copy, 4),
                         "reference_decode_fraction": round(r_dec / ref_copy, 4),
                         "encode_fraction_gain": round(enc / copy / (r_enc / ref_copy), 1),
                         "decode_fraction_gain": round(dec / copy / (r_dec / ref_copy), 1),
                         "load": simd_load + ref_load}
        runs.append(run)
    codecs = []
    for name in runs[0]:
        entry = {"codec": name}
        for way in ("encode", "decode"):
            chosen = median_entry([r[name] for r in runs], lambda e: e[f"{way}_fraction_gain"])
            entry |= {k: v for k, v in chosen.items() if k.startswith(way) or k == f"reference_{way}_fraction"}
            entry["copy_gbps" if way == "encode" else "decode_copy_gbps"] = chosen["copy_gbps"]
        if len(runs) > 1:
            entry["runs"] = [{k: r[name][k] for k in ("encode_fraction", "decode_fraction", "encode_fraction_gain",
                                                      "decode_fraction_gain", "load")} for r in runs]
        codecs.append(entry)
    return codecs


def main(simd_paths, ref_paths, gemm_paths, step_paths, command):
    codecs = codec_entries(simd_paths.split(","), ref_paths.split(","))
    gemm, gemm_all = gemm_entries(gemm_paths.split(","))
    step = train_step(step_paths.split(","))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    out = {"machine": f"{cpu}, {len(open('/proc/cpuinfo').read().split('processor')) - 1} CPUs, {platform.system()}",
           "command": command,
           "codecs": codecs, "gemm": gemm,
           "train_step": step["taco"] | {"codec": "taco"},
           "train_step_by_codec": step, "gemm_all_modes": gemm_all}
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:6])
