#!/usr/bin/env python3
"""linattn's Python package vs FLA (fla-core, Triton) on the same PyTorch CUDA tensors (issue 11):
chunk_gated_delta_rule forward (and forward + backward through torch autograd) per config: max
and relative RMS difference of o (and of the gradients), CUDA-event p50 time of each, and energy
per call from NVML's total-energy counter when nvidia-ml-py is importable. One JSON line per
config and side. Inputs as bench_fla.py: bf16 q/k/v, raw gates with A_log / dt_bias, beta logits,
in-kernel l2norm / gate / sigmoid, varlen cu_seqlens.
Usage: FLA_DISABLE_BACKEND_DISPATCH=1 python3 bench/fla/py_vs_fla.py [CONFIG ...] (CONFIG hqk:hv:lengths)
"""
import json
import os
import sys
import time

import torch

DEFAULT = ["16:32:1x4096", "16:32:128,96,200,88", "16:32:1x32768"]


def parse_lengths(s):
    if "x" in s:
        a, b = (int(x) for x in s.split("x"))
        return [b] if a == 1 else [a] * b
    return [int(x) for x in s.split(",")]


def nvml_handle():
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    except Exception:  # no nvidia-ml-py, or no NVML: energy is left out
        return None, None


def timed(fn, iters, nvml):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    mod, h = nvml
    e0 = mod.nvmlDeviceGetTotalEnergyConsumption(h) if mod else None
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    e1 = mod.nvmlDeviceGetTotalEnergyConsumption(h) if mod else None
    ms = sorted(a.elapsed_time(b) for a, b in ev)
    mj = (e1 - e0) / iters if mod else None  # millijoules per call
    return ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 95 // 100)], mj


def diff(a, b):
    a, b = a.float(), b.float()
    return (a - b).abs().max().item(), ((a - b).norm() / (b.norm() + 1e-30)).item()


def run(cfg, iters, nvml, fla_gdn, la_gdn):
    hqk, hv, lengths = cfg.split(":")
    hqk, hv, lens = int(hqk), int(hv), parse_lengths(lengths)
    T, K, V = sum(lens), 128, 128
    g = torch.Generator(device="cuda").manual_seed(1)
    mk = lambda *s, dt=torch.bfloat16: torch.randn(*s, device="cuda", dtype=dt, generator=g)  # noqa: E731
    q, k, v = mk(1, T, hqk, K), mk(1, T, hqk, K), mk(1, T, hv, V)
    graw, beta = mk(1, T, hv, dt=torch.float32), mk(1, T, hv, dt=torch.float32)
    A_log = torch.rand(hv, device="cuda", generator=g) * 2.7
    dt_bias = torch.randn(hv, device="cuda", generator=g) - 2.0
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device="cuda", dtype=torch.long)
    kw = dict(use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, use_gate_in_kernel=True, A_log=A_log,
              dt_bias=dt_bias, cu_seqlens=cu)
    with torch.no_grad():  # not inference_mode: FLA caches chunk tables per cu_seqlens, and the
        # autograd pass below must not meet inference tensors from that cache
        o_f, _ = fla_gdn(q, k, v, graw, beta, **kw)
        o_l, _ = la_gdn(q, k, v, graw, beta, **kw)
        mx, rr = diff(o_l, o_f)
        for side, fn in (("fla", fla_gdn), ("linattn", la_gdn)):
            p50, p95, mj = timed(lambda: fn(q, k, v, graw, beta, **kw), iters, nvml)
            yield dict(kind="case", op="gdn", **{"pass": "fwd"}, backend=side, dtype="bf16", hqk=hqk, hv=hv,
                       lengths=lengths, p50_ms=round(p50, 5), p95_ms=round(p95, 5), energy_mj=mj,
                       o_max_abs_diff_vs_fla=mx, o_rel_rms_vs_fla=rr)
    # forward + backward through torch autograd
    do = mk(1, T, hv, V)
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v, graw, beta)]

    def fwdbwd(fn):
        for t in leaves:
            t.grad = None
        o, _ = fn(*leaves, **kw)
        o.backward(do)

    grads = {}
    for side, fn in (("linattn", la_gdn), ("fla", fla_gdn)):
        fwdbwd(fn)
        grads[side] = [t.grad.clone() for t in leaves]
        p50, p95, mj = timed(lambda: fwdbwd(fn), max(iters // 2, 5), nvml)
        row = dict(kind="case", op="gdn", **{"pass": "fwdbwd"}, backend=side, dtype="bf16", hqk=hqk, hv=hv,
                   lengths=lengths, p50_ms=round(p50, 5), p95_ms=round(p95, 5), energy_mj=mj)
        if side == "fla":
            row["grad_rel_rms_linattn_vs_fla"] = {n: diff(a, b)[1] for n, a, b in
                                                  zip(("dq", "dk", "dv", "dg", "dbeta"), grads["linattn"], grads["fla"])}
        yield row


def main():
    import fla
    import linattn
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_gdn
    iters = int(os.environ.get("ITERS", "20"))
    nvml = nvml_handle()
    print(json.dumps(dict(kind="env", device=torch.cuda.get_device_name(), fla=fla.__version__,
                          linattn=linattn.__version__, torch=torch.__version__, nvml=nvml[0] is not None,
                          commit=os.environ.get("COMMIT", "unknown"))), flush=True)
    for cfg in sys.argv[1:] or DEFAULT:
        t0 = time.time()
        try:
            for r in run(cfg, iters, nvml, fla_gdn, linattn.chunk_gated_delta_rule):
                print(json.dumps(r), flush=True)
        except Exception as e:  # report and go on: one config must not hide the others
            print(json.dumps(dict(kind="error", config=cfg, error=f"{type(e).__name__}: {e}")), flush=True)
        print(f"# {cfg}: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
