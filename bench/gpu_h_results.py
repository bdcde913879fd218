"""Assembles issue H's OUT/gpu-train.json from bench/gpu-h.sh's folders (one call's OUT, or several calls' OUT folders
when the stages were split over device calls):

  python3 bench/gpu_h_results.py [--out FILE] [--command TEXT] OUT_DIR [OUT_DIR ...]

FILE defaults to the first OUT_DIR's gpu-train.json. One row per (link, shape, sequence parallelism), TP = 2:
{"link", "hidden", ..., "tokens_per_s_none", "tokens_per_s_taco", "tokens_per_s_nocomm", "speedup" (none's step time
over taco's), "ceiling_speedup" (t / (t_nocomm + (t - t_nocomm) / 2) from our own step times), "final_loss_none",
"final_loss_taco" (the loss curve's final validation losses where one ran for that link, shape and sequence
parallelism, else the N2-step timed run's), "torch_ms" (PyTorch's TP step, torch_tp_step.py, same link and shape;
null with sequence parallelism, which it lacks), "smoke", "notes", ...}; "curves" holds the loss curves.
"""
import sys

import gpu_runs as g


def assemble(roots, command=None):
    timed = g.configs(roots, "timing")
    curves = [g.curve(f, m) for f, m in g.configs(roots, "curve")]
    torch = g.torch_rows(roots)
    by_key = {}
    for f, m in timed:
        by_key[g.key(m)] = g.timing(f, m)  # a later root's run of the same config replaces an earlier one
    rows = list(by_key.values())
    for row in rows:
        g.add_torch(row, torch)
        c = next((c for c in curves if (c["link"], c["hidden"], c["layers"], c["heads"], c["seq"], c["micro_batch"],
                                        c["tp"], c["dp"], c["sequence_parallel"]) ==
                  (row["link"], row["hidden"], row["layers"], row["heads"], row["seq"], row["micro_batch"], row["tp"],
                   row["dp"], row["sequence_parallel"])), None)
        if c and c["final_loss_none"] is not None and c["final_loss_taco"] is not None:
            row.update(final_loss_none=c["final_loss_none"], final_loss_taco=c["final_loss_taco"],
                       loss_steps=c["steps"], loss_source="loss curve")
        row["loss_gap"] = g.rnd(None if row["final_loss_none"] is None or row["final_loss_taco"] is None
                                else row["final_loss_taco"] / row["final_loss_none"] - 1, 5)
    rows.sort(key=lambda r: (r["link"] != "nvlink", r["sequence_parallel"], r["hidden"] != 1024, r["hidden"]))
    metas = [m for _, m in timed] + [m for _, m in g.configs(roots, "curve")]
    smoke = any(r["smoke"] for r in rows) or any(c["smoke"] for c in curves)
    return {"command": g.merged_command(metas, command), "issue": "H", "smoke": smoke,
            "note": "SMOKE: ranks sharing one GPU or tiny step counts; not a link measurement" if smoke else None,
            "method": g.METHOD,
            "collective_files": g.collective_files(roots), "results": rows, "curves": curves}


def main(argv):
    out, command, roots = g.parse_args(argv, "gpu-train.json")
    res = assemble(roots, command)
    g.write(out, res)
    for r in res["results"]:
        print(f"{r['link']:7s} D={r['hidden']:<5d} SP={'on ' if r['sequence_parallel'] else 'off'} tokens/s none"
              f" {r['tokens_per_s_none']} taco {r['tokens_per_s_taco']} nocomm {r['tokens_per_s_nocomm']} speed-up"
              f" {r['speedup']} ceiling {r['ceiling_speedup']} loss {r['final_loss_none']} / {r['final_loss_taco']}"
              f" torch {r['torch_ms']} ms{' SMOKE' if r['smoke'] else ''}")
    for c in res["curves"]:
        print(f"curve {c['link']:7s} D={c['hidden']} SP={'on ' if c['sequence_parallel'] else 'off'} {c['steps']} steps:"
              f" final val none {c['final_loss_none']} taco {c['final_loss_taco']} gap {c['loss_gap']}"
              f"{' SMOKE' if c['smoke'] else ''}")
    print(f"wrote {out} ({len(res['results'])} rows, {len(res['curves'])} curves)")


if __name__ == "__main__":
    main(sys.argv[1:])
