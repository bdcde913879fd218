"""Reads the training runs of bench/gpu-h.sh and bench/gpu-scaling.sh (bench/gpu-multi-lib.sh's folders) and turns them
into results rows; bench/gpu_h_results.py and bench/gpu_scaling_results.py write the JSON files from them.

A timed config's folder holds meta.json (written by the script) and four `taco train` outputs, n1/ n2/ (none,taco at
N1 and N2 steps) and nc1/ nc2/ (none --no-tp-comm), each with report.json as dev.taco.runtime.train.Report writes it:
{"machine", "config": {..., "tensor_model_parallel_size", "sequence_parallel", "device", "gpu", "tp_comm",
"tp_transport", "global_batch_size", "data_parallel_size", ...}, "data", "runs": [RunResult: {"compression", "tp",
"steps", "first_step", "stopped", "initial_val_loss", "final_val_loss", "tp_bytes_per_step", "wall_seconds",
"tokens_per_second", "history": [{"step", "train_loss", "val_loss", "lr"}], "gpu_step_ms": {..., "total"}, ...}]}.
wall_seconds covers the whole Trainer.run (NCCL init, allocation, calibration, evaluations): the step time is
(wall(N2) - wall(N1)) / (steps(N2) - steps(N1)), the same prefix cancelling. A curve's folder holds meta.json and run/.

  python3 bench/gpu_runs.py summary DIR            one line for a timed config (the scripts print it)
  python3 bench/gpu_runs.py compare A B [OUT]      per codec, the train losses of two runs side by side
"""
import glob
import json
import math
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_of(report, codec):
    if not report:
        return None
    for r in report.get("runs", []):
        if r.get("compression") == codec:
            return r
    return None


def num(x):
    """A finite float, or None (JSON has no NaN: Java writes it as a string or null)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def step_ms(short, long):
    """(ms per step, method) from a run at N1 steps and one at N2 of the same config and codec."""
    if long is None:
        return None, None
    w2, s2 = num(long.get("wall_seconds")), long.get("steps") or 0
    if short is not None:
        w1, s1 = num(short.get("wall_seconds")), short.get("steps") or 0
        if w1 is not None and w2 is not None and s2 > s1 and w2 > w1:
            return 1000.0 * (w2 - w1) / (s2 - s1), "difference of N1 and N2 runs"
    if w2 is not None and s2 > 0:  # no usable short run: the whole run, startup included (an upper bound)
        return 1000.0 * w2 / s2, "wall/steps of one run (startup included)"
    return None, None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


# How timing() and ceiling() turn runs into the figures, as the result files state it.
METHOD = ("step time = (wall(N2 steps) - wall(N1 steps)) / (N2 - N1) of two taco train runs per codec;"
          " tokens/s = global batch x seq / step time; ceiling = t / (t_nocomm + (t - t_nocomm) / 2)")


def ceiling(t, t0):
    """t / (t0 + (t - t0) / 2): the step with its TP communication halved (a 2x compression, no overlap)."""
    if t is None or t0 is None:
        return None
    return t / (t0 + (t - t0) / 2)


def rnd(x, n=4):
    return None if x is None else round(x, n)


def configs(roots, kind):
    """(folder, meta) of every config of this kind under the roots, in path order."""
    out = []
    for root in roots:
        for m in sorted(glob.glob(os.path.join(root, "**", "meta.json"), recursive=True)):
            meta = load(m)
            if meta and meta.get("kind") == kind:
                out.append((os.path.dirname(m), meta))
    return out


def key(meta):
    return (meta["link"], meta["hidden"], meta["layers"], meta["heads"], meta["seq"], meta["micro_batch"], meta["tp"],
            meta["dp"], meta["sequence_parallel"])


def timing(folder, meta):
    """The row of one timed config: step times, tokens/s, speed-up, ceiling, losses at N2, sanity flags."""
    rep = {k: load(os.path.join(folder, k, "report.json")) for k in ("n1", "n2", "nc1", "nc2")}
    cfg = next((r["config"] for r in rep.values() if r and "config" in r), {})
    seq = cfg.get("seq_length", meta["seq"])
    gb = cfg.get("global_batch_size", meta["micro_batch"] * meta["dp"])
    row = {k: meta[k] for k in ("link", "hidden", "layers", "heads", "seq", "micro_batch", "tp", "dp",
                                "sequence_parallel", "mode")}
    row["gpus"] = meta["tp"] * meta["dp"]
    row["global_batch"] = gb
    notes = []
    ms = {}
    for name, short, long in (("none", run_of(rep["n1"], "none"), run_of(rep["n2"], "none")),
                              ("taco", run_of(rep["n1"], "taco"), run_of(rep["n2"], "taco")),
                              ("nocomm", run_of(rep["nc1"], "none"), run_of(rep["nc2"], "none"))):
        t, method = step_ms(short, long)
        ms[name] = t
        row[f"ms_{name}"] = rnd(t)
        row[f"tokens_per_s_{name}"] = None if t is None else round(gb * seq / (t / 1000.0), 1)
        if long is None:
            notes.append(f"{name}: no run at N2")
        elif method and method.startswith("wall/steps"):
            notes.append(f"{name}: {method}")
        for r in (short, long):
            if r is not None and r.get("stopped"):
                notes.append(f"{name}: a run stopped early ({r['stopped']}) after {r.get('steps')} steps")
        g = (long or {}).get("gpu_step_ms") or {}
        row[f"gpu_step_ms_{name}"] = rnd(num(g.get("total")))  # rank 0's op-by-op device time (CUDA events)
    # model FLOP/s per GPU (PaLM's count: 6 x parameters + 12 x layers x seq x hidden per token, no recomputation):
    # what the weak-scaling efficiency compares, since the model grows with the GPUs there
    params = cfg.get("parameters")
    row["parameters"] = params
    per_token = None if params is None else 6 * params + 12 * meta["layers"] * seq * meta["hidden"]
    for name in ("none", "taco"):
        tps = row[f"tokens_per_s_{name}"]
        row[f"model_tflops_per_gpu_{name}"] = None if tps is None or per_token is None else \
            round(tps * per_token / row["gpus"] / 1e12, 2)
    row["speedup"] = rnd(ratio(ms["none"], ms["taco"]))
    row["ceiling_speedup"] = rnd(ceiling(ms["none"], ms["nocomm"]))
    row["comm_fraction"] = rnd(None if ms["none"] is None or ms["nocomm"] is None else 1 - ms["nocomm"] / ms["none"])
    n2n, n2t = run_of(rep["n2"], "none"), run_of(rep["n2"], "taco")
    row["final_loss_none"] = rnd(num((n2n or {}).get("final_val_loss")))
    row["final_loss_taco"] = rnd(num((n2t or {}).get("final_val_loss")))
    row["loss_steps"] = (n2n or {}).get("steps")
    row["loss_source"] = "timed run at N2"
    row["tp_bytes_ratio"] = rnd(ratio(num((n2t or {}).get("tp_bytes_per_step")),
                                      num((n2n or {}).get("tp_bytes_per_step"))))
    row["transport"] = cfg.get("tp_transport", meta["transport"])
    row["gpu"] = cfg.get("gpu")
    row["calibration_steps"] = meta.get("calibration_steps")
    row["n1"], row["n2"] = meta.get("n1"), meta.get("n2")
    # a run whose ranks shared one GPU is never a link measurement, whatever the script thought
    row["smoke"] = bool(meta.get("smoke")) or (row["gpus"] > 1 and row["transport"] not in (None, "nccl"))
    if cfg and cfg.get("sequence_parallel") is not None and cfg["sequence_parallel"] != meta["sequence_parallel"]:
        notes.append("report.json's sequence_parallel differs from the script's")
    nc = rep["nc2"] or rep["nc1"]
    if nc and nc.get("config", {}).get("tp_comm") is not False:
        notes.append("the no-comm run's report does not say tp_comm false")
    row["notes"] = notes
    return row


def curve(folder, meta):
    """A loss curve: per codec the validation losses, the training loss every 10 steps, the final losses."""
    rep = load(os.path.join(folder, "run", "report.json"))
    out = {k: meta[k] for k in ("link", "hidden", "layers", "heads", "seq", "micro_batch", "tp", "dp",
                                "sequence_parallel")}
    cfg = (rep or {}).get("config", {})
    out["transport"] = cfg.get("tp_transport", meta["transport"])
    out["smoke"] = bool(meta.get("smoke")) or (meta["tp"] * meta["dp"] > 1 and out["transport"] not in (None, "nccl"))
    out["runs"] = {}
    for codec in ("none", "taco"):
        r = run_of(rep, codec)
        if r is None:
            continue
        h = r.get("history", [])
        out["runs"][codec] = {
            "steps": r.get("steps"), "stopped": r.get("stopped"), "final_val_loss": rnd(num(r.get("final_val_loss")), 5),
            "initial_val_loss": rnd(num(r.get("initial_val_loss")), 5), "wall_seconds": r.get("wall_seconds"),
            "tp_bytes_per_step": r.get("tp_bytes_per_step"),
            "val": [[x["step"], rnd(num(x["val_loss"]), 5)] for x in h if x.get("val_loss") is not None],
            "train": [[x["step"], rnd(num(x["train_loss"]), 5)] for x in h
                      if x.get("train_loss") is not None and x["step"] % 10 == 0]}
    fn, ft = (out["runs"].get(c, {}).get("final_val_loss") for c in ("none", "taco"))
    out["steps"] = out["runs"].get("none", {}).get("steps")
    out["final_loss_none"], out["final_loss_taco"] = fn, ft
    out["loss_gap"] = rnd(None if fn is None or ft is None else ft / fn - 1, 5)
    return out


def torch_rows(roots):
    """{(link, world size, D, L, H, T, B): (row, smoke)} from every torch-tp*.json under the roots."""
    out = {}
    for root in roots:
        for p in sorted(glob.glob(os.path.join(root, "**", "torch-tp*.json"), recursive=True)):
            t = load(p)
            if not t or "rows" not in t:
                continue
            for r in t["rows"]:
                out[(t["link"], t["tp"], r["D"], r["L"], r["H"], r["T"], r["B"])] = (r, t.get("smoke", False) or
                                                                                     t["world_size"] != t["tp"])
    return out


def add_torch(row, torch):
    hit = torch.get((row["link"], row["tp"], row["hidden"], row["layers"], row["heads"], row["seq"], row["micro_batch"]))
    if row["dp"] != 1 or row["sequence_parallel"] or hit is None:  # torch_tp_step.py has neither DP nor SP
        row.update(torch_ms=None, torch_ms_nocomm=None, torch_tokens_per_s=None, torch_ceiling_speedup=None)
        return
    r, smoke = hit
    row.update(torch_ms=rnd(r["ms_comm"]), torch_ms_nocomm=rnd(r["ms_nocomm"]),
               torch_tokens_per_s=round(r["tokens_per_s"], 1), torch_ceiling_speedup=rnd(r["ceiling_speedup_2x"]),
               torch_smoke=smoke)
    # ours against PyTorch's TP step (theirs: the blocks only, random input, no embeddings / LM head / loss)
    row["ms_none_vs_torch"] = rnd(ratio(row.get("ms_none"), r["ms_comm"]))


def collective_files(roots):
    return sorted(os.path.relpath(p, r) for r in roots
                  for p in glob.glob(os.path.join(r, "**", "gpu-collectives-*.json"), recursive=True))


def merged_command(metas, given):
    if given:
        return given
    seen = []
    for m in metas:
        c = m.get("command")
        if c and c not in seen:
            seen.append(c)
    return " ; ".join(seen)


def write(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def parse_args(argv, default_out):
    """[--out FILE] [--command TEXT] ROOT..."""
    out, command, roots = None, None, []
    i = 0
    while i < len(argv):
        if argv[i] == "--out":
            out = argv[i + 1]
            i += 2
        elif argv[i] == "--command":
            command = argv[i + 1]
            i += 2
        else:
            roots.append(argv[i])
            i += 1
    if not roots:
        sys.exit("usage: [--out FILE] [--command TEXT] ROOT... (folders holding the script's outputs)")
    return out or os.path.join(roots[0], default_out), command, roots


def summary(folder):
    meta = load(os.path.join(folder, "meta.json"))
    if not meta:
        print(f"{folder}: no meta.json")
        return
    r = timing(folder, meta)

    def f(x, fmt):
        return "-" if x is None else format(x, fmt)
    print(f"  {os.path.basename(folder)} {r['link']}: ms none {f(r['ms_none'], '.2f')} taco {f(r['ms_taco'], '.2f')}"
          f" nocomm {f(r['ms_nocomm'], '.2f')}; tokens/s none {f(r['tokens_per_s_none'], '.0f')} taco"
          f" {f(r['tokens_per_s_taco'], '.0f')}; speed-up {f(r['speedup'], '.3f')} ceiling"
          f" {f(r['ceiling_speedup'], '.3f')}{' SMOKE' if r['smoke'] else ''}"
          + (f" ({'; '.join(r['notes'])})" if r["notes"] else ""))


def compare(a, b, out=None):
    """Per codec: max |train loss difference| over the steps two runs share, and both final validation losses."""
    ra, rb = load(os.path.join(a, "report.json")), load(os.path.join(b, "report.json"))
    if not ra or not rb:
        print(f"compare: missing report.json in {a if not ra else b}")
        return 1
    res = []
    for x in ra["runs"]:
        y = run_of(rb, x["compression"])
        if y is None:
            continue
        la = {h["step"]: h["train_loss"] for h in x["history"] if h.get("train_loss") is not None}
        lb = {h["step"]: h["train_loss"] for h in y["history"] if h.get("train_loss") is not None}
        common = sorted(set(la) & set(lb))
        same = sum(1 for s in common if la[s] == lb[s])
        worst = max((abs(la[s] - lb[s]) for s in common), default=None)
        res.append({"codec": x["compression"], "steps": len(common), "bit_identical": same, "max_abs_diff": worst,
                    "final_val_a": num(x.get("final_val_loss")), "final_val_b": num(y.get("final_val_loss")),
                    "transport_a": ra["config"].get("tp_transport"), "transport_b": rb["config"].get("tp_transport")})
        print(f"{x['compression']:10s} {same}/{len(common)} train losses bit-identical, max |diff|"
              f" {'-' if worst is None else format(worst, '.3e')}; final val {res[-1]['final_val_a']} vs"
              f" {res[-1]['final_val_b']} ({res[-1]['transport_a']} vs {res[-1]['transport_b']})")
    if out:
        write(out, res)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "summary":
        summary(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
    else:
        sys.exit(__doc__)
