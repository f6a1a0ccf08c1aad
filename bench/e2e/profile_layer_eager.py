#!/usr/bin/env python3
"""Where an eager-live CUDA layer call spends its time (docs/perf-notes.md, Layers: eager-live
4.6 ms vs eager-fixed 0.7 ms in `linattn layer-demo --backend cuda`, cause not found by timing).

One linattn GatedDeltaNet layer (Qwen3.5 size, bf16), a varlen batch of about 1500 tokens in 8
sequences. Times, host wall per call with a stream synchronize after each (as the demo does):
  eager-live   exact-size tensors, use_graph = False (fresh cu_seqlens each call, as in serving)
  eager-fixed  the same rows inside reserved capacity (T_max 2048, N_max 16), use_graph = True
  eager-vary   eager-live with a new batch layout and new tensors every call (256..2048 tokens,
               1..16 sequences), as `linattn layer-demo` and a serving loop do
then profiles 5 calls of each with torch.profiler (CPU + CUDA
activities: CUDA runtime calls such as cudaMalloc / cudaStreamSynchronize / cudaMemcpy of the C++
library show up as CPU events, its kernels as CUDA events) and prints the top events of each.
Usage: python3 bench/e2e/profile_layer_eager.py [--calls 20] [--tokens 1500] [--seqs 8]
"""
import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from linattn.nn import GatedDeltaNet


def lens_of(tokens, n):
    lens = [tokens * (i + 1) // (n * (n + 1) // 2) for i in range(n)]
    lens[-1] += tokens - sum(lens)
    return lens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=1500)
    ap.add_argument("--seqs", type=int, default=8)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    hid, T, N, T_max, N_max = 2048, a.tokens, a.seqs, 2048, 16
    layer = GatedDeltaNet(hidden_size=hid, dtype=torch.bfloat16, device=dev)
    layer.reserve(T_max, N_max)
    cu = torch.tensor([0] + list(torch.tensor(lens_of(T, N)).cumsum(0)), dtype=torch.int32, device=dev)
    x = torch.randn(1, T, hid, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    xs = torch.zeros(1, T_max, hid, device=dev, dtype=torch.bfloat16)
    ys = torch.empty_like(xs)
    cus = torch.full((N_max + 1,), T, dtype=torch.int32, device=dev)
    cus[: N + 1] = cu
    xs[:, :T] = x

    def live():
        layer.use_graph = False
        layer.forward_into(x, cu, y)

    def fixed():
        layer.use_graph = True
        layer.forward_into(xs, cus, ys)

    gen = torch.Generator().manual_seed(1)
    vary_batches = []
    for _ in range(64):
        n = int(torch.randint(1, N_max + 1, (1,), generator=gen))
        t = int(torch.randint(max(256, n), T_max + 1, (1,), generator=gen))
        lens = lens_of(t, n)
        vary_batches.append((torch.randn(1, t, hid, device=dev, dtype=torch.bfloat16),
                             torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=dev)))
    vary_i = [0]

    def vary():
        layer.use_graph = False
        xv, cv = vary_batches[vary_i[0] % len(vary_batches)]
        vary_i[0] += 1
        layer.forward_into(xv, cv, torch.empty_like(xv))

    def timed(fn, n):
        out = []
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    with torch.no_grad():
        for fn in (live, fixed, vary):
            timed(fn, 3)
        for name, fn in (("eager-live", live), ("eager-fixed", fixed), ("eager-vary", vary), ("eager-live", live)):
            t = timed(fn, a.calls)
            print(f"{name:12s} p50 {statistics.median(t):.3f} ms  min {min(t):.3f}  max {max(t):.3f}  ({a.calls} calls,"
                  f" {T} tokens in {N} seqs)", flush=True)
        print(f"max |y_live - y_fixed| = {(y.float() - ys[:, :T].float()).abs().max().item():.3g}", flush=True)
        for name, fn in (("eager-live", live), ("eager-fixed", fixed), ("eager-vary", vary)):
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                timed(fn, 5)
            ka = prof.key_averages()
            print(f"\n### {name}: 5 calls, top by CPU total", flush=True)
            print(ka.table(sort_by="cpu_time_total", row_limit=25, max_name_column_width=60), flush=True)
            if name != "eager-fixed":
                print(f"### {name}: 5 calls, top by device time", flush=True)
                print(ka.table(sort_by="self_device_time_total", row_limit=25, max_name_column_width=60), flush=True)


if __name__ == "__main__":
    main()
