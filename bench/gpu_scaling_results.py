"""Assembles issue I's OUT/gpu-scaling.json from bench/gpu-scaling.sh's folders (one call's OUT, or several calls' OUT
folders when the stages were split over device calls):

  python3 bench/gpu_scaling_results.py [--out FILE] [--command TEXT] OUT_DIR [OUT_DIR ...]

FILE defaults to the first OUT_DIR's gpu-scaling.json. One row per (gpus, tp, dp, link, mode, shape, sequence
parallelism): {"gpus", "tp", "dp", "link", "mode" ("strong": the same model at every size; "weak": hidden grown with
TP), "speedup" (none's step time over taco's), "ceiling_speedup" (t / (t_nocomm + (t - t_nocomm) / 2), our own step
times; --no-tp-comm skips the TP collectives only, so the data-parallel gradient all-reduce stays in t_nocomm),
"loss_gap" (final validation loss taco / none - 1 after "loss_steps" steps), "tokens_per_s_none/taco/nocomm",
"model_tflops_per_gpu_none/taco" (tokens/s x (6 x parameters + 12 x layers x seq x
hidden) / GPUs, PaLM's count), "scaling_efficiency_none/taco" (that per-GPU rate over the one of the row with the
fewest GPUs of the same mode, link and sequence parallelism: tokens/s per GPU for the strong mode's fixed model, and
the weak mode's growing model counted by its FLOPs), "torch_ms" (torch_tp_step.py at the same TP, DP = 1 without SP only), "smoke", "notes", ...}.
A config timed in both modes (weak TP=8 is the strong model) gives one row per mode.
"""
import sys

import gpu_runs as g


def assemble(roots, command=None):
    timed = g.configs(roots, "timing")
    torch = g.torch_rows(roots)
    by_key = {}
    for f, m in timed:
        for mode in m["mode"].split("+"):  # "strong+weak": one folder, a row in each mode
            row = g.timing(f, m)
            row["mode"] = mode
            by_key[g.key(m) + (mode,)] = row
    rows = list(by_key.values())
    for row in rows:
        g.add_torch(row, torch)
        row["loss_gap"] = g.rnd(None if row["final_loss_none"] is None or row["final_loss_taco"] is None
                                else row["final_loss_taco"] / row["final_loss_none"] - 1, 5)
    for row in rows:
        base = min((r for r in rows if (r["mode"], r["link"], r["sequence_parallel"]) ==
                    (row["mode"], row["link"], row["sequence_parallel"]) and r["tokens_per_s_none"] is not None),
                   key=lambda r: (r["gpus"], -r["tp"]), default=None)
        for c in ("none", "taco"):
            t, b = row[f"model_tflops_per_gpu_{c}"], None if base is None else base[f"model_tflops_per_gpu_{c}"]
            row[f"scaling_efficiency_{c}"] = g.rnd(None if t is None or not b else t / b)
        row["scaling_base"] = None if base is None else f"{base['gpus']} GPUs, TP={base['tp']} DP={base['dp']}"
    rows.sort(key=lambda r: (r["link"] != "nvlink", r["mode"], r["gpus"], -r["tp"], r["sequence_parallel"]))
    smoke = any(r["smoke"] for r in rows)
    return {"command": g.merged_command([m for _, m in timed], command), "issue": "I", "smoke": smoke,
            "note": "SMOKE: ranks sharing one GPU or tiny step counts; not a scaling measurement" if smoke else None,
            "method": g.METHOD,
            "collective_files": g.collective_files(roots), "results": rows}


def main(argv):
    out, command, roots = g.parse_args(argv, "gpu-scaling.json")
    res = assemble(roots, command)
    g.write(out, res)
    for r in res["results"]:
        print(f"{r['link']:7s} {r['mode']:6s} {r['gpus']} GPUs TP={r['tp']} DP={r['dp']} D={r['hidden']}"
              f" SP={'on ' if r['sequence_parallel'] else 'off'} tokens/s none {r['tokens_per_s_none']} taco"
              f" {r['tokens_per_s_taco']} speed-up {r['speedup']} ceiling {r['ceiling_speedup']} loss gap"
              f" {r['loss_gap']} eff {r['scaling_efficiency_none']}{' SMOKE' if r['smoke'] else ''}")
    print(f"wrote {out} ({len(res['results'])} rows)")


if __name__ == "__main__":
    main(sys.argv[1:])
