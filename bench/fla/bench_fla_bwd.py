#!/usr/bin/env python3
"""FLA (fla-core, Triton kernels) side of the H200 GDN / KDA backward benchmark.

Prints PERFORMANCE.md section 6 JSON lines ("pass": "fwd", "bwd" and "fwdbwd", backend "fla") for
the configs of `linattn bench-cuda-bwd` (GDN: chunk_gated_delta_rule; `--op kda`: chunk_kda), with
the same inputs and options (bf16 q/k/v, raw gates with A_log / dt_bias, beta logits, in-kernel
l2norm / gate / sigmoid, fp32 state in and out, d_final_state; GDN V-first state; KDA per-channel
gates [T, HV, K], dt_bias [HV * K], lower_bound = -5 with safe_gate, K-first state). Forward = no
autograd; backward = autograd backward of one forward (retain_graph, timed alone); forward +
backward = both, timed together. A config FLA refuses (its Triton backward raises on Hopper with
3.4 <= Triton < 3.7.1, FLA issue #640) is reported as a "kind": "error" line. Usage:
  bench_fla_bwd.py [--op gdn|kda] [hqk:hv:lengths ...]
Run with FLA_DISABLE_BACKEND_DISPATCH=1 so FLA uses its Triton kernels; give each config its own
process and timeout (scripts/gpu-kdabwd) so that one slow JIT cannot hide the others.
"""
import json
import os
import sys
import time

import torch
from cuda_events import event_times  # this folder (the script's own directory is on sys.path)

CONFIGS = {"gdn": [(16, 32, "512x16"), (16, 32, "1x8192"), (16, 32, "1x32768"), (16, 32, "4096x8"), (2, 4, "1x32768")],
           "kda": [(32, 32, "512x16"), (32, 32, "1x4096"), (32, 32, "4096x8"), (32, 32, "1x32768")]}


def parse_lengths(s):
    if "x" in s:
        a, b = (int(x) for x in s.split("x"))
        return [b] if a == 1 else [a] * b
    return [int(x) for x in s.split(",")]


def events_time(fn, iters):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ms = sorted(event_times(fn, iters))
    return ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 95 // 100)]


def run(op, hqk, hv, lengths, iters, fla_fn):
    lens = parse_lengths(lengths)
    N, T, K, V = len(lens), sum(lens), 128, 128
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1)
    leaf = lambda t: t.requires_grad_(True)
    q = leaf(torch.randn(1, T, hqk, K, device=dev, dtype=torch.bfloat16, generator=g))
    k = leaf(torch.randn(1, T, hqk, K, device=dev, dtype=torch.bfloat16, generator=g))
    v = leaf(torch.randn(1, T, hv, V, device=dev, dtype=torch.bfloat16, generator=g))
    gw = K if op == "kda" else 1
    gshape = (1, T, hv, K) if op == "kda" else (1, T, hv)
    graw = leaf(torch.randn(*gshape, device=dev, dtype=torch.float32, generator=g))
    beta = leaf(torch.randn(1, T, hv, device=dev, dtype=torch.float32, generator=g))
    A_log = leaf(torch.rand(hv, device=dev, generator=g) * 2.7)
    dt_bias = leaf(torch.randn(hv * gw, device=dev, generator=g) - 2.0)
    sshape = (N, hv, K, V) if op == "kda" else (N, hv, V, K)
    h0 = leaf(0.1 * torch.randn(*sshape, device=dev, dtype=torch.float32, generator=g))
    do = torch.randn(1, T, hv, V, device=dev, dtype=torch.bfloat16, generator=g)
    dht = 0.1 * torch.randn(*sshape, device=dev, dtype=torch.float32, generator=g)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), device=dev, dtype=torch.long)
    kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
              use_beta_sigmoid_in_kernel=True, state_v_first=op != "kda", use_gate_in_kernel=True,
              A_log=A_log, dt_bias=dt_bias)
    if op == "kda":
        kw.update(safe_gate=True, lower_bound=-5.0)
    if N > 1:
        kw["cu_seqlens"] = cu

    def fwd():
        return fla_fn(q, k, v, graw, beta, **kw)

    def fwdbwd():
        o, ht = fwd()
        torch.autograd.backward((o, ht), (do, dht))

    fwdbwd()  # raises here when FLA refuses the backward
    torch.cuda.synchronize()
    o, ht = fwd()

    def bwd():
        torch.autograd.backward((o, ht), (do, dht), retain_graph=True)

    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    bwd()
    torch.cuda.synchronize()
    peak_extra = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    def fwd_only():
        with torch.no_grad():
            fwd()

    rows = []
    for pas, fn in (("fwd", fwd_only), ("bwd", bwd), ("fwdbwd", fwdbwd)):
        p50, p95 = events_time(fn, iters)
        rows.append(dict(kind="case", op=op, **{"pass": pas}, backend="fla", mode="eager-live", dtype="bf16",
                         hqk=hqk, hv=hv, k=K, v=V, bt=64, lengths=lengths, p50_ms=round(p50, 5),
                         p95_ms=round(p95, 5), peak_extra_mib=round(peak_extra, 1)))
    return rows


def main():
    iters = int(os.environ.get("ITERS", "20"))
    args = sys.argv[1:]
    op = "gdn"
    if args[:1] == ["--op"]:
        op, args = args[1], args[2:]
    if op == "kda":
        from fla.ops.kda import chunk_kda as fla_fn
    else:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_fn
    import fla
    import triton
    env = dict(kind="env", device=torch.cuda.get_device_name(), backend="fla", fla=fla.__version__,
               torch=torch.__version__, triton=triton.__version__,
               dispatch_disabled=os.environ.get("FLA_DISABLE_BACKEND_DISPATCH", "0"), date=time.strftime("%Y-%m-%d"))
    print(json.dumps(env), flush=True)
    configs = CONFIGS[op] if not args else [tuple(a.split(":")) for a in args]
    for hqk, hv, lengths in configs:
        try:
            for r in run(op, int(hqk), int(hv), lengths, iters, fla_fn):
                print(json.dumps(r), flush=True)
        except Exception as e:  # report and continue: a refusal must not hide the other configs
            print(json.dumps(dict(kind="error", op=op, backend="fla", hqk=int(hqk), hv=int(hv), lengths=lengths,
                                  error=repr(e)[:400])), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
