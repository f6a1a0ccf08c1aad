#!/usr/bin/env python3
"""linattn's Python package vs FLA 0.6.0 (fla-core, Triton) on the same PyTorch tensors (issue 11).

Ops: chunk_gated_delta_rule (gdn), chunk_kda (kda), causal_conv1d (conv; W = 4, bias, SiLU), each
forward (no grad) and forward + backward (torch autograd; linattn's conv has no autograd wrapper,
so its fwdbwd row is causal_conv1d + causal_conv1d_bwd). One JSON line per (case, pass, backend),
written and flushed as soon as measured: CUDA-event p50 / p95 ms, and for the output and every
gradient [max abs difference, rel RMS ||a - b|| / ||b||] against FLA (vs_fla) and against an fp32
torch recurrence on the same upcast inputs (vs_ref; forward up to T = 8192, gradients up to 1024;
conv always).
Inputs as bench_fla.py: bf16 q/k/v, raw gates with A_log / dt_bias (per channel for KDA), beta
logits, in-kernel l2norm / gate / beta sigmoid; cu_seqlens when a case has several sequences.

Phases (the GPU machine is fresh each call, and FLA's first call of a kernel compiles and autotunes
it; Triton keeps both on disk under TRITON_CACHE_DIR):
  --phase warm   FLA alone calls each step once; lines {"kind": "warm", step, backend, ok, s, error}
                 (a "warm-start" line first, so a step cut by a timeout is visible).
  --phase bench  --warm-status FILE: an FLA step whose warm line is missing or failed is not called
                 again (its row says why), so a cut warm-up costs nothing here.
  --phase all    both in one process (default).
FLA's GDN backward refuses on Hopper with 3.4 <= Triton < 3.7.1 (FLA #640: wrong results in its
gated chunk_bwd_dqkwg): the "fla" row carries that error; --unguarded (default on CUDA) adds a
"fla-unguarded" row with the guard switched off (a path FLA itself calls wrong).
--device cpu: linattn and the fp32 reference alone, tiny fp32 shapes (a smoke test, no FLA).
Usage: FLA_DISABLE_BACKEND_DISPATCH=1 python3 bench/fla/py_vs_fla.py [--phase P] [--steps S ...]
  case: gdn:HQK:HV:LENGTHS[:K] | kda:HQK:HV:LENGTHS[:K] | conv:D:LENGTHS, LENGTHS 1x8192 or 128,96;
  step: CASE@fwd or CASE@fwdbwd; --cases C ... runs both passes of each case.
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

import torch
from cuda_events import event_times  # this folder (the script's own directory is on sys.path)
import torch.nn.functional as F

CASES = ["gdn:16:32:1x8192", "gdn:16:32:128,96,200,88", "conv:8192:1x16384", "kda:32:32:1x4096"]
CPU_CASES = ["gdn:2:4:40,24:32", "kda:2:2:33:16", "conv:64:50,30"]
REF_FWD_MAX_T, REF_BWD_MAX_T = 8192, 1024
ATTN_NAMES = ("q", "k", "v", "g", "beta", "A_log", "dt_bias")
ATTN_KW = dict(use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, use_gate_in_kernel=True)
T0 = time.time()


class StepTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """SIGALRM-based cap for one step (fires when control is back in Python: between kernel
    compiles and launches, which is where FLA's first calls spend their time)."""
    import signal
    if not seconds or seconds <= 0:
        yield
        return

    def fire(*_):
        raise StepTimeout(f"step ran past its {seconds:.0f} s cap")
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def log(*a):
    print(f"# [{time.time() - T0:6.1f} s]", *a, file=sys.stderr, flush=True)


def parse_lengths(s):
    if "x" in s:
        a, b = (int(x) for x in s.split("x"))
        return [b] * a
    return [int(x) for x in s.split(",")]


def parse_case(spec):
    p = spec.split(":")
    if p[0] == "conv":
        return dict(spec=spec, op="conv", d=int(p[1]), lengths=p[2], lens=parse_lengths(p[2]))
    if p[0] not in ("gdn", "kda"):
        raise ValueError(f"case {spec!r}: expected gdn:..., kda:... or conv:...")
    return dict(spec=spec, op=p[0], hqk=int(p[1]), hv=int(p[2]), lengths=p[3], lens=parse_lengths(p[3]),
                k=int(p[4]) if len(p) > 4 else 128)


def make_inputs(c, dev, dt):
    gen = torch.Generator(device=dev).manual_seed(1)

    def rn(*s, dtype=dt):
        return torch.randn(*s, device=dev, dtype=dtype, generator=gen)
    lens, f32 = c["lens"], torch.float32
    T = sum(lens)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device=dev, dtype=torch.long)
    t = dict(cu=cu if len(lens) > 1 else None, lens=lens)
    if c["op"] == "conv":
        D = c["d"]
        t.update(x=rn(1, T, D), weight=rn(D, 4) * 0.5, bias=rn(D) * 0.5, dy=rn(1, T, D))
        return t
    hqk, hv, K, kda = c["hqk"], c["hv"], c["k"], c["op"] == "kda"
    t.update(q=rn(1, T, hqk, K), k=rn(1, T, hqk, K), v=rn(1, T, hv, K),
             g=rn(1, T, hv, *([K] if kda else []), dtype=f32), beta=rn(1, T, hv, dtype=f32),
             A_log=torch.rand(hv, device=dev, generator=gen) * 2.7,
             dt_bias=rn(hv * (K if kda else 1), dtype=f32) - 2.0, do=rn(1, T, hv, K))
    return t


# ---------------------------------------------------------------- fp32 references (torch, autograd)
def ref_attn(op, a, lens):
    """Token-by-token delta rule in fp32 on the (upcast) inputs a: per v head h (qk head h // rep)
    S <- diag(e^g) S; u = beta (v - k^T S); S <- S + k u^T; o = K^-1/2 q^T S."""
    q, k, v = (a[n].float() for n in "qkv")
    HV, K = v.shape[2], q.shape[3]
    rep = HV // q.shape[2]
    l2 = lambda x: x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)  # noqa: E731
    q, k = (l2(x).repeat_interleave(rep, dim=2)[0] for x in (q, k))
    sp = F.softplus(a["g"].float() + (a["dt_bias"].float() if op == "gdn" else a["dt_bias"].float().view(HV, K)))
    A = a["A_log"].float().exp()
    g = (-(A if op == "gdn" else A[:, None]) * sp)[0]
    b = torch.sigmoid(a["beta"].float())[0]
    v = v[0]
    out, s0 = [], 0
    for n in lens:
        S = v.new_zeros(HV, K, v.shape[2])
        for t in range(s0, s0 + n):
            d = g[t].exp()
            S = S * (d[:, None, None] if op == "gdn" else d[:, :, None])
            u = b[t][:, None] * (v[t] - torch.einsum("hk,hkv->hv", k[t], S))
            S = S + k[t][:, :, None] * u[:, None, :]
            out.append(torch.einsum("hk,hkv->hv", q[t], S) * K ** -0.5)
        s0 += n
    return torch.stack(out)[None]


def ref_conv(a, lens):
    x, w, bias = a["x"].float(), a["weight"].float(), a["bias"].float()
    D, W = w.shape
    out, s0 = [], 0
    for n in lens:
        xs = F.pad(x[:, s0:s0 + n].transpose(1, 2), (W - 1, 0))
        out.append(F.silu(F.conv1d(xs, w[:, None, :], bias, groups=D)).transpose(1, 2))
        s0 += n
    return torch.cat(out, 1)


def reference(c, t, with_grad):
    names = ("x", "weight", "bias") if c["op"] == "conv" else ATTN_NAMES
    a = {n: t[n].detach().float().requires_grad_(with_grad) for n in names}
    with torch.set_grad_enabled(with_grad):
        o = ref_conv(a, t["lens"]) if c["op"] == "conv" else ref_attn(c["op"], a, t["lens"])
        res = {"y" if c["op"] == "conv" else "o": o.detach()}
        if with_grad:
            o.backward(t["dy" if c["op"] == "conv" else "do"].float())
            res.update({"d" + n: a[n].grad for n in names})
    return res


# ---------------------------------------------------------------- the measured calls
@contextlib.contextmanager
def fla_guard_off():
    import fla.ops.common.chunk_o as co
    old = co.IS_NVIDIA_HOPPER
    co.IS_NVIDIA_HOPPER = False  # read at call time only by the #640 guard of chunk_bwd_dqkwg
    try:
        yield
    finally:
        co.IS_NVIDIA_HOPPER = old


def functions(op, side):
    if side == "linattn":
        import linattn
        return {"gdn": linattn.chunk_gated_delta_rule, "kda": linattn.chunk_kda,
                "conv": (linattn.causal_conv1d, linattn.causal_conv1d_bwd)}[op]
    if op == "gdn":
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        return chunk_gated_delta_rule
    if op == "kda":
        from fla.ops.kda import chunk_kda
        return chunk_kda
    from fla.modules.causal_conv1d import causal_conv1d
    return causal_conv1d


def make_call(c, t, pass_, side):
    """A callable running one step, returning {name: tensor} (output, then gradients)."""
    fn, cu = functions(c["op"], side), t["cu"]
    guard = fla_guard_off if side == "fla-unguarded" else contextlib.nullcontext
    if c["op"] == "conv":
        if side == "linattn":
            fwd, bwd = fn
            if pass_ == "fwd":
                return lambda: {"y": fwd(t["x"], t["weight"], t["bias"], activation="silu", cu_seqlens=cu)[0]}

            def run_la():
                y, _ = fwd(t["x"], t["weight"], t["bias"], activation="silu", cu_seqlens=cu)
                gr = bwd(t["x"], t["weight"], t["dy"], t["bias"], activation="silu", cu_seqlens=cu)
                return {"y": y, "dx": gr.dx, "dweight": gr.dweight, "dbias": gr.dbias}
            return run_la
        if pass_ == "fwd":
            def run_fwd():
                with torch.no_grad():
                    return {"y": fn(t["x"], t["weight"], t["bias"], activation="silu", cu_seqlens=cu)[0]}
            return run_fwd
        leaves = {n: t[n].detach().clone().requires_grad_(True) for n in ("x", "weight", "bias")}

        def run_conv():
            for p in leaves.values():
                p.grad = None
            y, _ = fn(leaves["x"], leaves["weight"], leaves["bias"], activation="silu", cu_seqlens=cu)
            y.backward(t["dy"])
            return {"y": y.detach(), **{"d" + n: p.grad for n, p in leaves.items()}}
        return run_conv

    def attn(a):
        with guard():
            return fn(a["q"], a["k"], a["v"], a["g"], a["beta"], A_log=a["A_log"], dt_bias=a["dt_bias"],
                      cu_seqlens=cu, **ATTN_KW)[0]
    if pass_ == "fwd":
        def run_fwd_attn():
            with torch.no_grad():  # not inference_mode: FLA caches chunk tables per cu_seqlens
                return {"o": attn(t)}
        return run_fwd_attn
    leaves = {n: t[n].detach().clone().requires_grad_(True) for n in ATTN_NAMES}

    def run_attn():
        for p in leaves.values():
            p.grad = None
        o = attn(leaves)
        with guard():
            o.backward(t["do"])
        return {"o": o.detach(), **{"d" + n: leaves[n].grad for n in ATTN_NAMES}}
    return run_attn


def timed(fn, iters, dev):
    fn()
    if dev == "cuda":
        torch.cuda.synchronize()
        ms = sorted(event_times(fn, iters))
    else:
        ms = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t0) * 1e3)
        ms.sort()
    return ms[len(ms) // 2], ms[min(len(ms) - 1, math.ceil(0.95 * len(ms)) - 1)]


def compare(res, base):
    out = {}
    for n, a in res.items():
        b = base.get(n)
        if a is None or b is None:
            continue
        a, b = a.detach().float(), b.detach().float().to(a.device)
        d = a - b
        out[n] = [float(f"{d.abs().max().item():.4g}"), float(f"{(d.norm() / (b.norm() + 1e-30)).item():.4g}")]
    return out


# ---------------------------------------------------------------- driver
class Warm:
    """The warm-up's lines, read by the bench phase: why an FLA step must not be called again."""

    def __init__(self, path):
        self.rows = {}
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    # the e2e script's warm-up lines share the file: they name impl / tokens, not a step
                    if r.get("kind") in ("warm", "warm-start") and "step" in r:
                        key = (r["step"], r["backend"])
                        if r["kind"] == "warm" or key not in self.rows:
                            self.rows[key] = r
        self.active = bool(path)

    def skip_reason(self, step, side):
        if not self.active or side == "linattn":
            return None
        r = self.rows.get((step, side))
        if r is None:
            return "not run: FLA's warm-up (Triton compile + autotune) never reached this step (time budget)"
        if r["kind"] == "warm-start":
            return "not run: FLA's warm-up of this step (Triton compile + autotune) started and was stopped unfinished"
        return None if r["ok"] else f"FLA warm-up failed: {r['error']}"


def run_step(c, t, pass_, side, args, warm, out, results, ref):
    step = f"{c['spec']}@{pass_}"
    meta = dict(op=c["op"], **{"pass": pass_}, backend=side, dtype=str(t["x" if c["op"] == "conv" else "q"].dtype)[6:],
                lengths=c["lengths"], tokens=sum(c["lens"]))
    meta.update({k: c[k] for k in ("hqk", "hv", "k", "d") if k in c})
    if args.phase == "warm":
        emit(out, dict(kind="warm-start", step=step, backend=side, t=round(time.time() - T0, 1)))
    else:
        reason = warm.skip_reason(step, side)
        if reason:
            emit(out, dict(kind="case", **meta, error=reason))
            log(step, side, reason)
            return
    t0 = time.time()
    try:
        with time_limit(args.step_s):
            call = make_call(c, t, pass_, side)
            res = call()
            if args.device == "cuda":
                torch.cuda.synchronize()
            first_s = time.time() - t0
            if args.phase == "warm":
                emit(out, dict(kind="warm", step=step, backend=side, ok=True, s=round(first_s, 2)))
                log(step, side, f"warm ok {first_s:.1f} s")
                return
            iters = args.iters if pass_ == "fwd" else max(args.iters // 2, 3)
            p50, p95 = timed(call, iters, args.device)
    except Exception as e:  # one step must not hide the others: its error text is the row
        err = f"{type(e).__name__}: {str(e)[:400]}"
        row = dict(kind="warm", step=step, backend=side, ok=False, s=round(time.time() - t0, 2), error=err) \
            if args.phase == "warm" else dict(kind="case", **meta, error=err)
        emit(out, row)
        log(step, side, err[:160])
        return
    results[side] = {n: (v.detach().clone() if v is not None else None) for n, v in res.items()}
    row = dict(kind="case", **meta, iters=iters, p50_ms=round(p50, 5), p95_ms=round(p95, 5),
               first_call_s=round(first_s, 2))
    if side != "fla" and "fla" in results:
        row["vs_fla"] = compare(results[side], results["fla"])
    if side == "fla-unguarded" and "linattn" in results:
        row["vs_linattn"] = compare(results[side], results["linattn"])
    if ref is not None:
        row["vs_ref"] = compare(results[side], ref)
    emit(out, row)
    log(step, side, f"p50 {p50:.4f} ms p95 {p95:.4f} ms")


def emit(out, row):
    out.write(json.dumps(row) + "\n")
    out.flush()


def steps_of(args):
    if args.steps:
        return [tuple(s.rsplit("@", 1)) for s in args.steps]
    cases = args.cases or (CPU_CASES if args.device == "cpu" else CASES)
    return [(c, p) for c in cases for p in ("fwd", "fwdbwd")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phase", choices=("warm", "bench", "all"), default="all")
    ap.add_argument("--cases", nargs="*")
    ap.add_argument("--steps", nargs="*")
    ap.add_argument("--warm-status", help="the warm phase's output (bench phase)")
    ap.add_argument("--out", help="JSON lines file (default stdout)")
    ap.add_argument("--iters", type=int, default=int(os.environ.get("ITERS", "20")))
    ap.add_argument("--step-s", type=float, default=90.0, help="cap per step, seconds")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--unguarded", type=int, default=None, help="1: add the fla-unguarded GDN fwdbwd row")
    ap.add_argument("--no-ref", action="store_true")
    args = ap.parse_args()
    cpu = args.device == "cpu"
    use_fla = not cpu or os.environ.get("PYVSFLA_CPU_FLA") == "1"  # 1: a CPU check with stand-in fla modules
    unguarded = use_fla if args.unguarded is None else bool(args.unguarded)
    out = open(args.out, "a") if args.out else sys.stdout
    env = dict(kind="env", phase=args.phase, torch=torch.__version__, commit=os.environ.get("COMMIT", "unknown"),
               device=torch.cuda.get_device_name() if not cpu else "cpu",
               fla_cache_results=os.environ.get("FLA_CACHE_RESULTS", "1"))
    if use_fla:
        import fla
        env["fla"] = fla.__version__
    if not cpu:
        import triton
        env["triton"] = triton.__version__
    if args.phase != "warm":
        import linattn
        env["linattn"] = linattn.__version__
    emit(out, env)
    warm = Warm(args.warm_status if args.phase == "bench" else None)
    dt = torch.float32 if cpu else torch.bfloat16
    sides = ["linattn"] if not use_fla else (["fla"] if args.phase == "warm" else ["fla", "linattn"])
    refs = {}
    for spec, pass_ in steps_of(args):
        c = parse_case(spec)
        torch.manual_seed(0)
        t = make_inputs(c, args.device, dt)
        T, ref = sum(c["lens"]), None
        key = (spec, pass_ == "fwdbwd")
        cheap = c["op"] == "conv" or T <= (REF_BWD_MAX_T if key[1] else REF_FWD_MAX_T)  # conv: one F.conv1d
        if args.phase != "warm" and not args.no_ref and cheap:
            try:
                with time_limit(args.step_s):
                    ref = refs[key] = refs.get(key) or reference(c, t, key[1])
            except Exception as e:
                log(spec, "fp32 reference failed:", e)
        elif key[1]:
            ref = refs.get((spec, False))  # the output's reference, when only the forward was cheap
        results = {}
        step_sides = sides + (["fla-unguarded"] if unguarded and c["op"] == "gdn" and pass_ == "fwdbwd" else [])
        for side in step_sides:
            run_step(c, t, pass_, side, args, warm, out, results, ref)
        del t, results
        if not cpu:
            torch.cuda.empty_cache()
    log("done")


if __name__ == "__main__":
    main()
