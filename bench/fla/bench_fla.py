#!/usr/bin/env python3
"""FLA (fla-core, Triton kernels) side of the H200 GDN / KDA forward benchmark (PERFORMANCE.md section 4).

Prints PERFORMANCE.md section 6 JSON lines: one env line with the measured ceilings (bf16 8192^3
matmul on random data, device-to-device copy), then per config an eager and a CUDA-graph line.
Inputs and options match `linattn bench-cuda`: bf16 q/k/v, raw gates with A_log / dt_bias, beta
logits, in-kernel l2norm / gate / sigmoid, V-first fp32 state in and out, inference mode.
Run with FLA_DISABLE_BACKEND_DISPATCH=1 so FLA uses its Triton kernels.
usage: bench_fla.py [--op gdn|kda] [hqk:hv:lengths ...]   (--op kda: chunk_kda, per-channel raw gates
[T, HV, K] with dt_bias [HV*K], KDA_CONFIGS by default; the same options otherwise)
"""
import json
import os
import sys
import time

import torch
from cuda_events import event_times  # this folder (the script's own directory is on sys.path)

CONFIGS = [(16, 64, "1x2048"), (16, 64, "1x8192"), (16, 64, "1x32768"), (16, 64, "4096x8"),
           (2, 8, "1x2048"), (2, 8, "1x32768"), (16, 32, "1x4096"), (16, 32, "128,96,200,88"),
           (16, 32, "64x16")]
KDA_CONFIGS = [(32, 32, "1x4096"), (32, 32, "1x32768"), (32, 32, "4096x8"), (32, 32, "128,96,200,88"),
               (32, 32, "64x16")]


def parse_lengths(s):
    if "x" in s:
        a, b = (int(x) for x in s.split("x"))
        return [b] if a == 1 else [a] * b
    return [int(x) for x in s.split(",")]


def events_time(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = sorted(event_times(fn, iters))
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t0) * 1e3 / iters
    return ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 95 // 100)], host


def ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        a @ b
    e.record()
    torch.cuda.synchronize()
    tflops = 2 * 8192 ** 3 * 10 / (s.elapsed_time(e) * 1e-3) / 1e12
    x = torch.randn(1 << 30, device="cuda", dtype=torch.bfloat16)  # 2 GiB
    y = torch.empty_like(x)
    for _ in range(2):
        y.copy_(x)
    torch.cuda.synchronize()
    s.record()
    for _ in range(5):
        y.copy_(x)
    e.record()
    torch.cuda.synchronize()
    tbps = 2 * x.numel() * 2 * 5 / (s.elapsed_time(e) * 1e-3) / 1e12
    del a, b, x, y
    torch.cuda.empty_cache()
    return tflops, tbps


def run(hqk, hv, lengths, iters, fla_fn, peak_tflops, op="gdn"):
    lens = parse_lengths(lengths)
    N, T, K, V = len(lens), sum(lens), 128, 128
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1)
    q = torch.randn(1, T, hqk, K, device=dev, dtype=torch.bfloat16, generator=g)
    k = torch.randn(1, T, hqk, K, device=dev, dtype=torch.bfloat16, generator=g)
    v = torch.randn(1, T, hv, V, device=dev, dtype=torch.bfloat16, generator=g)
    gw = K if op == "kda" else 1
    graw = torch.randn(1, T, hv, *([K] if op == "kda" else []), device=dev, dtype=torch.float32, generator=g)
    beta = torch.randn(1, T, hv, device=dev, dtype=torch.float32, generator=g)
    A_log = torch.rand(hv, device=dev, generator=g) * 2.7
    dt_bias = torch.randn(hv * gw, device=dev, generator=g) - 2.0
    h0 = 0.1 * torch.randn(N, hv, V, K, device=dev, dtype=torch.float32, generator=g)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), device=dev, dtype=torch.long)
    kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
              use_beta_sigmoid_in_kernel=True, state_v_first=True, use_gate_in_kernel=True,
              A_log=A_log, dt_bias=dt_bias)
    if N > 1:
        kw["cu_seqlens"] = cu

    def call():
        return fla_fn(q, k, v, graw, beta, **kw)

    with torch.inference_mode():
        o, ht = call()
        torch.cuda.synchronize()
        out_bytes = o.numel() * o.element_size() + ht.numel() * ht.element_size()
        del o, ht
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        o, ht = call()
        torch.cuda.synchronize()
        peak_extra = (torch.cuda.max_memory_allocated() - base - out_bytes) / 2 ** 20
        del o, ht
        eager = events_time(call, iters)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        gr = events_time(graph.replay, iters)
    flops = T * hv * (6.0 * K * V + 2.0 * 64 * (3 * K + 2 * V))
    rows = []
    for mode, (p50, p95, host) in (("eager-live", eager), ("graph-replay", gr)):
        rows.append(dict(kind="case", op=op, **{"pass": "fwd"}, backend="fla", mode=mode, dtype="bf16",
                         hqk=hqk, hv=hv, k=K, v=V, bt=64, lengths=lengths, p50_ms=round(p50, 5),
                         p95_ms=round(p95, 5), host_ms=round(host, 5), tflops=round(flops / (p50 * 1e9), 2),
                         pct_of_peak=round(100 * flops / (p50 * 1e9) / peak_tflops, 2),
                         peak_extra_mib=round(peak_extra, 1)))
    return rows


def main():
    iters = int(os.environ.get("ITERS", "50"))
    args = sys.argv[1:]
    op = "gdn"
    if args[:1] == ["--op"]:
        op, args = args[1], args[2:]
    if op == "kda":
        from fla.ops.kda import chunk_kda as fla_fn
    else:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_fn
    import fla
    tflops, tbps = ceilings()
    env = dict(kind="env", device=torch.cuda.get_device_name(), backend="fla", fla=fla.__version__,
               torch=torch.__version__, peak_tflops=round(tflops, 1), copy_tbps=round(tbps, 3),
               dispatch_disabled=os.environ.get("FLA_DISABLE_BACKEND_DISPATCH", "0"),
               date=time.strftime("%Y-%m-%d"))
    print(json.dumps(env), flush=True)
    configs = (KDA_CONFIGS if op == "kda" else CONFIGS) if not args else [tuple(a.split(":")) for a in args]
    for hqk, hv, lengths in configs:
        try:
            for r in run(int(hqk), int(hv), lengths, iters, fla_fn, tflops, op):
                print(json.dumps(r), flush=True)
        except Exception as e:  # report and continue: one failing config must not hide the rest
            print(json.dumps(dict(kind="error", backend="fla", op=op, hqk=hqk, hv=hv, lengths=lengths, error=repr(e))),
                  flush=True)


if __name__ == "__main__":
    main()
