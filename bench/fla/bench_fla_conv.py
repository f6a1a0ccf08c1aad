#!/usr/bin/env python3
"""FLA (fla-core, Triton) side of the short-conv benchmark: causal_conv1d with W = 4, bias and
silu, bf16, one sequence [1, T, D], forward (no grad) and forward + backward (autograd, dy given),
for the shapes `linattn bench --op conv` times. Prints PERFORMANCE.md section 6 JSON lines
(backend "fla"). Run with FLA_DISABLE_BACKEND_DISPATCH=1 so FLA uses its Triton kernels.
Usage: bench_fla_conv.py [T,D ...]   (default: the conv shapes of issue 8)
"""
import json
import sys

import torch
from cuda_events import event_times  # this folder (the script's own directory is on sys.path)

SHAPES = [(512, 6144), (4096, 6144), (16384, 6144), (512, 8192), (4096, 8192), (16384, 8192),
          (65536, 8192)]


def events_time(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = sorted(event_times(fn, iters))
    return ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 95 // 100)]


def main():
    from fla.modules.causal_conv1d import causal_conv1d

    shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[1:]] or SHAPES
    print(json.dumps({"kind": "env", "device": torch.cuda.get_device_name(), "backend": "fla",
                      "torch": torch.__version__}), flush=True)
    torch.manual_seed(0)
    for T, D in shapes:
        x = torch.randn(1, T, D, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(D, 4, device="cuda", dtype=torch.bfloat16) * 0.5
        b = torch.randn(D, device="cuda", dtype=torch.bfloat16) * 0.5
        dy = torch.randn(1, T, D, device="cuda", dtype=torch.bfloat16)
        iters = 50 if T * D <= (1 << 26) else 20

        def fwd():
            with torch.no_grad():
                causal_conv1d(x, w, b, activation="silu")

        xg = x.clone().requires_grad_(True)
        wg = w.clone().requires_grad_(True)
        bg = b.clone().requires_grad_(True)

        def fwdbwd():
            y, _ = causal_conv1d(xg, wg, bg, activation="silu")
            y.backward(dy)

        for name, fn in (("fwd", fwd), ("fwdbwd", fwdbwd)):
            p50, p95 = events_time(fn, iters)
            rows = 2 if name == "fwd" else 5
            gbps = rows * T * D * 2 / (p50 * 1e-3) * 1e-9
            print(json.dumps({"kind": "case", "op": "conv", "pass": name, "backend": "fla", "mode": "eager-live",
                              "dtype": "bf16", "d": D, "w": 4, "lengths": [T], "bias": True, "act": "silu",
                              "p50_ms": round(p50, 5), "p95_ms": round(p95, 5), "gbps": round(gbps, 1)}),
                  flush=True)


if __name__ == "__main__":
    main()
