#!/usr/bin/env python3
"""Loads a checkpoint's unsharded weights with the safetensors library (numpy) and prints every tensor's name, shape
and dtype, then the count. Usage: python3 bench/check-safetensors.py DIR/iter_0000010/model.safetensors"""
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    sys.exit(f"check-safetensors.py needs numpy and the safetensors library ({e}): pip install numpy safetensors")

tensors = load_file(sys.argv[1])
for name, t in tensors.items():
    if not np.isfinite(t).all():
        sys.exit(f"{name}: not finite")
    print(name, tuple(t.shape), t.dtype)
print(len(tensors), "tensors")
