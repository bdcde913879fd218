"""Assembles bench/results/cpu-perf.json (issue G's figures) from the outputs of the three CPU benchmarks.

Usage: python3 bench/cpu_perf.py CODEC_SIMD.txt CODEC_REFERENCE.txt GEMM.json TRAIN_STEP.txt "COMMAND" > cpu-perf.json

CODEC_*.txt: bench/run-codec.sh's output (its markdown table and copy line), with the SIMD kernels and with
simd=false (the scalar reference kernels, what the codecs ran before issue G) from the same session;
GEMM.json: bench/run-gemm-shapes.sh's stdout (a list, one entry per shape and mode); only mode "pair" (the two TP
ranks of ./taco train on two cores) and, for the square shape, mode "solo" go into "gemm", every entry into
"gemm_all_modes"; TRAIN_STEP.txt: bench/run-train-step.sh's output (its last JSON line: per codec ms, baseline_ms,
speedup). Every ratio is to a baseline measured in the same run as the figure.
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


def main(simd_path, ref_path, gemm_path, step_path, command):
    copy, simd, simd_load = codec_table(simd_path)
    ref_copy, ref, ref_load = codec_table(ref_path)
    codecs = []
    for name, (enc, dec) in simd.items():
        r_enc, r_dec = ref[name]
        e, d = enc / copy, dec / copy
        re_, rd = r_enc / ref_copy, r_dec / ref_copy
        codecs.append({"codec": name, "encode_gbps": enc, "decode_gbps": dec, "copy_gbps": copy,
                       "encode_fraction": round(e, 4), "decode_fraction": round(d, 4),
                       "reference_encode_fraction": round(re_, 4), "reference_decode_fraction": round(rd, 4),
                       "encode_fraction_gain": round(e / re_, 1), "decode_fraction_gain": round(d / rd, 1)})
    gemm_all = json.load(open(gemm_path))
    gemm = [g for g in gemm_all if g["mode"] == "pair" or (g["model"] == "square" and g["mode"] == "solo")]
    step = None
    for line in open(step_path):
        if line.startswith("{"):
            step = json.loads(line)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    out = {"machine": f"{cpu}, {len(open('/proc/cpuinfo').read().split('processor')) - 1} CPUs, {platform.system()}",
           "command": command,
           "codec_load": {"simd": simd_load, "reference": ref_load},
           "codecs": codecs, "gemm": gemm,
           "train_step": step["taco"] | {"codec": "taco"} if step else None,
           "train_step_by_codec": step, "gemm_all_modes": gemm_all}
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:6])
