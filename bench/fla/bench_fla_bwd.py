#!/usr/bin/env python3
"""FLA (fla-core, Triton kernels) side of the H200 GDN backward benchmark.

Prints PERFORMANCE.md section 6 JSON lines ("pass": "bwd" and "fwdbwd", backend "fla") for the
configs of `linattn bench-cuda-bwd`, with the same inputs and options (bf16 q/k/v, raw gates with
A_log / dt_bias, beta logits, in-kernel l2norm / gate / sigmoid, V-first fp32 state in and out,
d_final_state). Backward = autograd backward of one forward (retain_graph, timed alone);
forward + backward = both, timed together. A config FLA refuses (its Triton backward raises on
Hopper with 3.4 <= Triton < 3.7.1, FLA issue #640) is reported as a "kind": "error" line.
Run with FLA_DISABLE_BACKEND_DISPATCH=1 so FLA uses its Triton kernels.
"""
import json
import os
import sys
import time

import torch

CONFIGS = [(16, 32, "512x16"), (16, 32, "1x8192"), (16, 32, "1x32768"), (16, 32, "4096x8"), (2, 4, "1x32768")]


def parse_lengths(s):
    if "x" in s:
        a, b = (int(x) for x in s.split("x"))
        return [b] if a == 1 else [a] * b
    return [int(x) for x in s.split(",")]


def events_time(fn, iters):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in ev)
    return ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 95 // 100)]


def run(hqk, hv, lengths, iters, fla_gdn):
    lens = parse_lengths(lengths)
    N, T, K, V = len(lens), sum(lens), 128, 128
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1)
    leaf = lambda t: t.requires_grad_(True)
    q = leaf(torch.randn(1, T, hqk, K, device=dev, dtype=torch.bfloat16, generator=g))
    k = leaf(torch.randn(1, T, hqk, K, device=dev, dtype=torch.bfloat16, generator=g))
    v = leaf(torch.randn(1, T, hv, V, device=dev, dtype=torch.bfloat16, generator=g))
    graw = leaf(torch.randn(1, T, hv, device=dev, dtype=torch.float32, generator=g))
    beta = leaf(torch.randn(1, T, hv, device=dev, dtype=torch.float32, generator=g))
    A_log = leaf(torch.rand(hv, device=dev, generator=g) * 2.7)
    dt_bias = leaf(torch.randn(hv, device=dev, generator=g) - 2.0)
    h0 = leaf(0.1 * torch.randn(N, hv, V, K, device=dev, dtype=torch.float32, generator=g))
    do = torch.randn(1, T, hv, V, device=dev, dtype=torch.bfloat16, generator=g)
    dht = 0.1 * torch.randn(N, hv, V, K, device=dev, dtype=torch.float32, generator=g)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), device=dev, dtype=torch.long)
    kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
              use_beta_sigmoid_in_kernel=True, state_v_first=True, use_gate_in_kernel=True,
              A_log=A_log, dt_bias=dt_bias)
    if N > 1:
        kw["cu_seqlens"] = cu

    def fwd():
        return fla_gdn(q, k, v, graw, beta, **kw)

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
    rows = []
    for pas, fn in (("bwd", bwd), ("fwdbwd", fwdbwd)):
        p50, p95 = events_time(fn, iters)
        rows.append(dict(kind="case", op="gdn", **{"pass": pas}, backend="fla", mode="eager-live", dtype="bf16",
                         hqk=hqk, hv=hv, k=K, v=V, bt=64, lengths=lengths, p50_ms=round(p50, 5),
                         p95_ms=round(p95, 5), peak_extra_mib=round(peak_extra, 1)))
    return rows


def main():
    iters = int(os.environ.get("ITERS", "20"))
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    import fla
    import triton
    env = dict(kind="env", device=torch.cuda.get_device_name(), backend="fla", fla=fla.__version__,
               torch=torch.__version__, triton=triton.__version__,
               dispatch_disabled=os.environ.get("FLA_DISABLE_BACKEND_DISPATCH", "0"), date=time.strftime("%Y-%m-%d"))
    print(json.dumps(env), flush=True)
    configs = CONFIGS if len(sys.argv) < 2 else [tuple(a.split(":")) for a in sys.argv[1:]]
    for hqk, hv, lengths in configs:
        try:
            for r in run(int(hqk), int(hv), lengths, iters, chunk_gated_delta_rule):
                print(json.dumps(r), flush=True)
        except Exception as e:  # report and continue: a refusal must not hide the other configs
            print(json.dumps(dict(kind="error", backend="fla", hqk=int(hqk), hv=int(hv), lengths=lengths,
                                  error=repr(e)[:400])), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
