"""Assembles bench/results/cpu-perf.json (issue G's figures) from the outputs of the three CPU benchmarks.

Usage: python3 bench/cpu_perf.py CODEC_ALT.txt[,...] GEMM.json[,GEMM2.json...] TRAIN_STEP.txt[,TRAIN_STEP2.txt...] \
           "COMMAND" > cpu-perf.json

CODEC_ALT.txt: bench/run-codec-alt.sh's output (its last JSON list: per codec, this build's and the earlier build's
fractions of a copy, alternated in one JVM, and the gain), one file per run; a codec's figures per direction come from
the run with the median gain, and "runs" lists every run's. GEMM.json: bench/run-gemm-shapes.sh's stdout (a list, one
entry per shape and mode), one file per run; modes "pair" (the two TP ranks of ./taco train on two cores) and "solo"
(one product on both cores) go into "gemm" (records alternated with OpenBLAS keep their ratio quartiles), every
entry of the first run into "gemm_all_modes". With several runs a shape's entry is the run with the median ratio
(the lower middle one for an even count), and "runs" lists every run's ratio, GFLOP/s and load: on a shared 2-core
machine one run's ratios scatter by 0.1-0.3. TRAIN_STEP.txt: bench/run-train-step.sh's output (its last JSON line:
per codec ms, baseline_ms, speedup: the two builds' steps taking turns in one JVM), one file per run, chosen the same
way. Every ratio is to a baseline measured in the same run as the figure.
"""
import json
import platform
import sys


def median_entry(entries, ratio):
    """The entry whose ratio is the median (the lower middle one of an even count)."""
    ranked = sorted(entries, key=ratio)
    return ranked[(len(ranked) - 1) // 2]


def gemm_entries(paths):
    runs = [json.load(open(p)) for p in paths]
    keep = lambda g: g["mode"] in ("pair", "solo")
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


def codec_entries(paths):
    """Per codec and direction, the run with the median gain over the earlier build's fraction; "runs" lists every
    run's fractions and gains."""
    runs = []
    for path in paths:
        lines = [line for line in open(path) if line.startswith("[")]
        if not lines:
            sys.exit(f"{path}: no JSON list (is it bench/run-codec-alt.sh's output?)")
        runs.append({e["codec"]: e for e in json.loads(lines[-1])})
    codecs = []
    for name in runs[0]:
        entry = {"codec": name}
        for way in ("encode", "decode"):
            chosen = median_entry([r[name] for r in runs], lambda e: e[f"{way}_fraction_gain"])
            entry |= {k: v for k, v in chosen.items() if way in k or (way == "encode" and k == "copy_gbps")}
        if len(runs) > 1:
            entry["runs"] = [{k: r[name][k] for k in ("encode_fraction", "decode_fraction", "encode_fraction_gain",
                                                      "decode_fraction_gain", "encode_load", "decode_load")}
                             for r in runs]
        codecs.append(entry)
    return codecs


def main(codec_paths, gemm_paths, step_paths, command):
    codecs = codec_entries(codec_paths.split(","))
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
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:5])
