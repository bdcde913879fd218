# Baseline for bench/gpu-collectives.sh, measured in the same device session: ONE rank's kernels of a TACO-style
# compressed two-shot all-reduce written in PyTorch ops (docs/design.md §7 anchor), bf16 rows x 4096, G = 64, Hadamard by a
# 64 x 64 matmul, per-group absmax scales, float8_e4m3fn codes: compress the R-1 peers' chunks, decompress-reduce the
# own chunk (peers' payloads faked by this rank's own, as the Java benchmark does) and re-compress it, decompress all R
# chunks. Eager and torch.compile; median of 20 CUDA-event samples after warm-up.
#   python3 bench/torch/taco_rank_step.py [--mib 64] [--ranks 2]      (prints one JSON line per mode)
import argparse, json, torch

p = argparse.ArgumentParser()
p.add_argument("--mib", type=int, default=64)
p.add_argument("--ranks", type=int, default=2)
a = p.parse_args()
G, COLS = 64, 4096
rows = a.mib * 128
dev = "cuda"
H = torch.tensor([[1.0]], device=dev)
while H.shape[0] < G:
    H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
H = (H / G ** 0.5).to(torch.float32)
FP8MAX = 448.0

def compress(x):  # x: (r, COLS) bf16 -> codes (r, COLS) fp8, scales (r, COLS/G) fp32
    g = x.float().view(-1, G) @ H
    s = g.abs().amax(1, keepdim=True).clamp_min(1e-30) / FP8MAX
    return (g / s).to(torch.float8_e4m3fn).view(x.shape), s.view(x.shape[0], -1)

def decompress_rot(c, s):  # dequantise without the inverse transform
    return c.float().view(-1, G) * s.view(-1, 1)

def step(x, R):
    n = x.shape[0] // R
    chunks = [compress(x[p * n:(p + 1) * n]) for p in range(1, R)]           # the R-1 peers' chunks
    acc = sum(decompress_rot(c, s) for c, s in chunks)                        # peers' payloads (faked: our own)
    y = (acc @ H).view(n, COLS) + x[:n].float()                                # inverse transform once, + own
    mine = compress(y.to(torch.bfloat16))
    out = [(decompress_rot(*mine) @ H).view(n, COLS).to(torch.bfloat16) for _ in range(R)]  # all R chunks
    return torch.cat(out)

x = torch.randn(rows, COLS, device=dev).to(torch.bfloat16)
for mode, fn in (("eager", step), ("compile", torch.compile(step))):
    for _ in range(5):
        fn(x, a.ranks)
    torch.cuda.synchronize()
    ms = []
    for _ in range(20):
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        st.record(); fn(x, a.ranks); en.record(); en.synchronize()
        ms.append(st.elapsed_time(en))
    ms.sort()
    print(json.dumps({"baseline": "pytorch-ops per-rank compressed all-reduce kernels", "mode": mode, "mib": a.mib,
                      "ranks": a.ranks, "median_ms": round((ms[9] + ms[10]) / 2, 4), "torch": torch.__version__,
                      "device": torch.cuda.get_device_name()}))
