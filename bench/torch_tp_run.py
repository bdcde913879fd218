"""PyTorch's Megatron-style TP training step on chosen shapes and a chosen TP size, for bench/gpu-h.sh and
bench/gpu-scaling.sh.

The baseline itself is ../shared/tools/torch_tp_step.py (bench/gpu-prepare.sh copies it into .device/torch/). It
takes no arguments: its __main__ runs D=1024/2048/4096 at TP=2 over NVLink and then with NCCL_P2P_DISABLE=1, through
mp.spawn on fixed ports. This wrapper imports it and spawns its worker(rank, ws, cfgs, out, port) the way that
__main__ does, with our shapes, our world size and a free port, on the link the caller's environment sets
(NCCL_P2P_DISABLE=1 or not). Each row is the worker's: D, L, H, T, B, ms_comm, ms_nocomm (median of 10 steps by CUDA
events after 3 warm-ups), comm_fraction, ceiling_speedup_2x, tokens_per_s.

  python3 bench/torch_tp_run.py --tp 2 [--world-size N] [--link nvlink] [--smoke false] --out FILE D,L,H,T,B ...

--world-size below --tp (a smoke run on one GPU) runs the worker at that size: its blocks are then split --world-size
ways, not --tp ways, which the output says. Writes {"tp", "world_size", "link", "smoke", "rows": [...]}.
"""
import argparse
import json
import os
import socket
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tp", type=int, required=True)
    ap.add_argument("--world-size", type=int, default=None)
    ap.add_argument("--link", default="no-p2p" if os.environ.get("NCCL_P2P_DISABLE") == "1" else "nvlink")
    ap.add_argument("--smoke", default="false")
    ap.add_argument("--module-dir", default=os.path.join(os.getcwd(), ".device", "torch"))
    ap.add_argument("--out", required=True)
    ap.add_argument("shapes", nargs="+", help="D,L,H,T,B")
    a = ap.parse_args()
    ws = a.world_size or a.tp
    cfgs = []
    for s in a.shapes:
        d, l, h, t, b = (int(x) for x in s.split(","))
        if h % ws or d % h:
            sys.exit(f"shape {s}: heads {h} must be divisible by the world size {ws} and divide D")
        cfgs.append(dict(D=d, L=l, H=h, T=t, B=b))
    sys.path.insert(0, a.module_dir)  # the spawned workers inherit sys.path, so they import the module too
    import torch
    import torch.multiprocessing as mp
    import torch_tp_step as m
    if torch.cuda.device_count() < ws:
        sys.exit(f"world size {ws} needs {ws} GPUs, {torch.cuda.device_count()} visible")
    raw = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    mp.spawn(m.worker, args=(ws, cfgs, raw, free_port()), nprocs=ws, join=True)
    rows = json.load(open(raw))
    os.unlink(raw)
    smoke = a.smoke == "true" or ws != a.tp
    out = {"tp": a.tp, "world_size": ws, "link": a.link, "smoke": smoke,
           "nccl_p2p_disable": os.environ.get("NCCL_P2P_DISABLE", ""), "gpu": torch.cuda.get_device_name(0),
           "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    for r in rows:
        print(f"{a.link:7s} TP={ws} D={r['D']} L={r['L']} H={r['H']} T={r['T']} B={r['B']}: step {r['ms_comm']:.1f} ms"
              f" (compute only {r['ms_nocomm']:.1f}) comm frac {r['comm_fraction']:.2f} ceiling(2x)"
              f" {r['ceiling_speedup_2x']:.2f}x tokens/s {r['tokens_per_s']:.0f}{' SMOKE' if smoke else ''}")


if __name__ == "__main__":
    main()
