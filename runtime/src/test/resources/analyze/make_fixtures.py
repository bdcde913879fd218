#!/usr/bin/env python3
"""Writes the `taco analyze` test fixtures with the REAL numpy (and, when importable, safetensors + torch)
libraries, and an independent numpy computation of the `int8-group` relative L2 error of every tensor.

Usage (from this folder, or pass --out DIR):
    python3 make_fixtures.py                  # .npy fixtures; plus safetensors ones if `safetensors` imports
    python3 make_fixtures.py --only safetensors   # only the safetensors fixtures, merged into expected.json

Outputs (all small, < 100 KB each):
    *.npy            valid:   f4_2d (64x256, format 1.0), f2_2d (64x256), f8_2d (32x256), f4_1d (1000,),
                              f2_3d (4x16x96), f4_v2 (16x128, format 2.0), f4_v3 (16x128, format 3.0)
                     invalid: bad_be_f4 ('>f4'), bad_fortran (Fortran order), bad_int32 ('<i4')
    *.safetensors    (only with safetensors importable) bf16_torch.safetensors (torch BF16 + one F32),
                     mixed_numpy.safetensors (F16, F32, F64 via safetensors.numpy)
    expected.json    per valid tensor: file, tensor name ("" for .npy), shape, source dtype and the int8-group
                     relative L2 error; per invalid file the word its error message must contain.

The int8-group definition is the one of dev.taco.kernels.Int8Kernels (Java), reproduced here operation by
operation in float32:
    groups of G = 128 contiguous values along each row (rows = all leading dims, cols = last dim; 1-D = one row);
    the last group of a row may be short -- equivalent to zero padding, since zeros change neither the absmax
    nor the error;
    a = float32 absmax of the group (the stored scale is a, i.e. scale = a/127 implicitly);
    q = rint(float32(float32(x / a) * 127)), round half to even, clipped to [-127, 127]; q = 0 when a == 0;
    x^ = float32(float32(q / 127) * a);
    rel = ||x^ - x||_2 / ||x||_2 accumulated in float64 from the float32 values.
Inputs are first converted to float32 as the Java readers do: f2 and bf16 widen exactly, f8 rounds to nearest.
"""
import argparse
import json
import os
import sys

import numpy as np

G = 128


def realistic(rng, shape, outlier_channels=3, outlier_scale=60.0):
    """Gaussian activations with a few loud outlier channels (last axis) and one all-zero channel."""
    x = rng.standard_normal(shape) * 0.5
    cols = shape[-1]
    for c in rng.choice(cols, size=min(outlier_channels, cols), replace=False):
        x[..., c] *= outlier_scale * (1 + rng.random())
    x[..., cols // 2] = 0.0
    return x


def int8_group_rel_l2(x):
    """The int8-group relative L2 error of x (any float dtype), as dev.taco.kernels.Int8Kernels computes it."""
    x = np.asarray(x, dtype=np.float32)
    x2 = x.reshape(1, -1) if x.ndim <= 1 else x.reshape(-1, x.shape[-1])
    rows, cols = x2.shape
    xp = np.pad(x2, ((0, 0), (0, (-cols) % G)))
    g = xp.reshape(rows, -1, G)
    a = np.max(np.abs(g), axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((g / a) * np.float32(127))
    q = np.where(a == 0, np.float32(0), q)
    q = np.clip(q, np.float32(-127), np.float32(127)).astype(np.float32)
    y = (q / np.float32(127)) * a
    assert y.dtype == np.float32
    y = y.reshape(rows, -1)[:, :cols]
    d = y.astype(np.float64) - x2.astype(np.float64)
    return float(np.sqrt(np.sum(d * d) / np.sum(x2.astype(np.float64) ** 2)))


def entry(file, tensor, arr, dtype):
    return {"file": file, "tensor": tensor, "shape": list(arr.shape), "dtype": dtype,
            "int8_group_rel_l2": int8_group_rel_l2(arr)}


def write_npy(out):
    rng = np.random.default_rng(20240424)
    valid, invalid = [], []

    def save(name, arr, version=None):
        path = os.path.join(out, name)
        if version is None:
            np.save(path, arr, allow_pickle=False)
        else:
            with open(path, "wb") as f:
                np.lib.format.write_array(f, arr, version=version, allow_pickle=False)
        return name

    for name, arr, version in [
        ("f4_2d.npy", realistic(rng, (64, 256)).astype("<f4"), None),
        ("f2_2d.npy", realistic(rng, (64, 256), outlier_scale=20.0).astype("<f2"), None),
        ("f8_2d.npy", realistic(rng, (32, 256)).astype("<f8"), None),
        ("f4_1d.npy", realistic(rng, (1000,)).astype("<f4"), None),
        ("f2_3d.npy", realistic(rng, (4, 16, 96), outlier_scale=20.0).astype("<f2"), None),
        ("f4_v2.npy", realistic(rng, (16, 128)).astype("<f4"), (2, 0)),
        ("f4_v3.npy", realistic(rng, (16, 128)).astype("<f4"), (3, 0)),
    ]:
        save(name, arr, version)
        valid.append(entry(name, "", arr, arr.dtype.str))

    base = realistic(rng, (8, 16))
    save("bad_be_f4.npy", base.astype(">f4"))
    invalid.append({"file": "bad_be_f4.npy", "error_contains": "big-endian"})
    save("bad_fortran.npy", np.asfortranarray(base.astype("<f4")))
    invalid.append({"file": "bad_fortran.npy", "error_contains": "Fortran"})
    save("bad_int32.npy", (base * 100).astype("<i4"))
    invalid.append({"file": "bad_int32.npy", "error_contains": "integer"})
    return valid, invalid


def write_safetensors(out):
    """Library-written safetensors fixtures; needs `safetensors` (and torch for BF16)."""
    import safetensors
    from safetensors.numpy import save_file as save_numpy
    rng = np.random.default_rng(77)
    valid = []
    try:
        import torch
        from safetensors.torch import save_file as save_torch
        t = {
            "layers.0.mlp.out": torch.from_numpy(realistic(rng, (64, 256)).astype(np.float32)).to(torch.bfloat16),
            "layers.0.attn.out": torch.from_numpy(realistic(rng, (32, 384)).astype(np.float32)).to(torch.bfloat16),
            "norm.weight": torch.from_numpy(realistic(rng, (200,)).astype(np.float32)),
        }
        save_torch(t, os.path.join(out, "bf16_torch.safetensors"), metadata={"format": "pt"})
        for k, v in t.items():
            arr = v.float().numpy()  # bf16 -> f32 is exact
            valid.append(entry("bf16_torch.safetensors", k, arr, "BF16" if v.dtype == torch.bfloat16 else "F32"))
    except ImportError as e:
        print(f"torch not importable ({e}); skipping the BF16 fixture", file=sys.stderr)
    n = {
        "f16": realistic(rng, (32, 256), outlier_scale=20.0).astype(np.float16),
        "f32": realistic(rng, (16, 256)).astype(np.float32),
        "f64": realistic(rng, (8, 256)).astype(np.float64),
    }
    save_numpy(n, os.path.join(out, "mixed_numpy.safetensors"), metadata={"writer": "safetensors.numpy"})
    names = {np.float16: "F16", np.float32: "F32", np.float64: "F64"}
    for k, v in n.items():
        valid.append(entry("mixed_numpy.safetensors", k, v, names[v.dtype.type]))
    return valid, safetensors.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", choices=["npy", "safetensors"])
    args = ap.parse_args()
    path = os.path.join(args.out, "expected.json")
    old = json.load(open(path)) if os.path.exists(path) else {"tensors": [], "invalid": [], "generator": {}}
    gen = dict(old.get("generator", {}))
    tensors, invalid = old.get("tensors", []), old.get("invalid", [])
    gen["numpy"] = np.__version__
    if args.only != "safetensors":
        v, invalid = write_npy(args.out)
        tensors = [t for t in tensors if not t["file"].endswith(".npy")] + v
    if args.only != "npy":
        try:
            v, gen["safetensors"] = write_safetensors(args.out)
            try:
                import torch
                gen["torch"] = torch.__version__
            except ImportError:
                pass
            tensors = [t for t in tensors if not t["file"].endswith(".safetensors")] + v
        except ImportError as e:
            print(f"safetensors not importable ({e}); safetensors fixtures not written", file=sys.stderr)
            if args.only == "safetensors":
                sys.exit(1)
    doc = {"generator": gen, "group_size": G,
           "definition": "int8-group as dev.taco.kernels.Int8Kernels; see make_fixtures.py",
           "tensors": tensors, "invalid": invalid}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {len(tensors)} tensors, {len(invalid)} invalid files to {args.out}")


if __name__ == "__main__":
    main()
