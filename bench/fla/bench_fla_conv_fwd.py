#!/usr/bin/env python3
"""FLA (fla-core, Triton) causal_conv1d forward only, for the same-run A/B of the CUDA conv
forward (scripts/gpu-convfwd7): W = 4, bias, silu, bf16, one sequence [1, T, D], the inputs and
timing of bench_fla_conv.py (its shape order too: FLA autotunes per D on the first shape of that D),
repeated over --rounds rounds; p50 / p95 over every round. Prints one JSON line per shape (backend
"fla") after an environment line. Run with FLA_DISABLE_BACKEND_DISPATCH=1 (FLA's Triton kernels).
Usage: bench_fla_conv_fwd.py [--rounds R] [T,D ...]
"""
import json
import sys

import torch
from cuda_events import event_times  # this folder (the script's own directory is on sys.path)

SHAPES = [(512, 6144), (4096, 6144), (16384, 6144), (512, 8192), (4096, 8192), (16384, 8192),
          (65536, 8192)]




def main():
    from fla.modules.causal_conv1d import causal_conv1d

    args = sys.argv[1:]
    rounds = 3
    if args[:1] == ["--rounds"]:
        rounds, args = int(args[1]), args[2:]
    shapes = [tuple(int(v) for v in s.split(",")) for s in args] or SHAPES
    print(json.dumps({"kind": "env", "device": torch.cuda.get_device_name(), "backend": "fla",
                      "torch": torch.__version__}), flush=True)
    torch.manual_seed(0)
    fns, times = [], []
    for T, D in shapes:
        x = torch.randn(1, T, D, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(D, 4, device="cuda", dtype=torch.bfloat16) * 0.5
        b = torch.randn(D, device="cuda", dtype=torch.bfloat16) * 0.5

        def fwd(x=x, w=w, b=b):
            with torch.no_grad():
                causal_conv1d(x, w, b, activation="silu")

        for _ in range(3):  # the first call of a D autotunes
            fwd()
        torch.cuda.synchronize()
        fns.append(fwd)
        times.append([])
    for _ in range(rounds):
        for i, (T, D) in enumerate(shapes):
            iters = 50 if T * D <= (1 << 26) else 20
            fns[i]()
            torch.cuda.synchronize()
            times[i] += event_times(fns[i], iters)
    for (T, D), ms in zip(shapes, times):
        ms.sort()
        p50, p95 = ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 95 // 100)]
        print(json.dumps({"kind": "case", "op": "conv", "pass": "fwd", "backend": "fla", "mode": "eager-live",
                          "dtype": "bf16", "d": D, "w": 4, "lengths": [T], "bias": True, "act": "silu",
                          "n": len(ms), "p50_ms": round(p50, 5), "p95_ms": round(p95, 5),
                          "gbps": round(2 * T * D * 2 / (p50 * 1e-3) * 1e-9, 1)}), flush=True)


if __name__ == "__main__":
    main()
