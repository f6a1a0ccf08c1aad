#!/usr/bin/env python3
"""End-to-end prefill of a Qwen3.5-like hybrid stack (issue 11): linattn's GatedDeltaNet layers vs
FLA's, eager and CUDA-graph captured, on the same weights.

Stack: L blocks of x += mixer(rmsnorm(x)); x += swiglu_mlp(rmsnorm(x)); the mixer is a GatedDeltaNet
layer, and full attention every 4th block (GQA, PyTorch SDPA, causal within each packed sequence,
no rotary embedding). One set of dense modules (norms, MLPs, attention) is shared by both stacks;
only the GDN mixers differ: linattn.nn.GatedDeltaNet (the C++ layer), or FLA's GatedDeltaNet
composed from fla-core's ops (fla-core 0.6.0, the wheel at hand, ships no fla.layers: torch Linear
projections + fla causal_conv1d (SiLU) + fla chunk_gated_delta_rule (in-kernel l2norm / gate /
beta sigmoid) + fla rms_norm_gated (swish) + o_proj, the forward of fla.layers.GatedDeltaNet)
holding copies of the linattn layer's weights, so both stacks compute the same function.
Random weights, bf16, varlen batches (TOKENS:N packs N sequences of lengths proportional to
1..N). Graph mode captures the whole stack per batch layout (torch.cuda.graph; linattn layers in
fixed-capacity mode after reserve(T, N)) and replays it. One JSON line per (batch, impl, mode),
flushed as soon as measured: p50 / p95 time to first token (one prefill of the whole batch, host
wall with synchronization), tokens/s, peak memory (torch allocator peak above the weights; the
linattn layers' own buffers live outside it: device_used_mib is the device-wide use after the
case), output differences (FLA vs linattn eager: the agreement check; graph vs its own eager).
Phases: --phase warm runs FLA's layer once per batch layout (Triton compile + autotune into
TRITON_CACHE_DIR; no linattn needed); --phase bench (default) measures.
Usage: python3 bench/e2e/hybrid_prefill.py [--phase warm|bench] [--impl linattn,fla] [--modes eager,graph]
  [--batches 512:4,2048:8,8192:4,32768:2] [--step-s 60]
  (--device cpu --dtype float32 with small dims runs linattn alone on the CPU: a smoke test)
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

T0 = time.time()
AGREE_REL = 2e-2  # bf16: ~0.4% per rounding, compounded over the blocks' residual stream


def log(*a):
    print(f"# [{time.time() - T0:6.1f} s]", *a, file=sys.stderr, flush=True)


def emit(row):
    print(json.dumps(row), flush=True)


def parse_batches(s):
    out = []
    for item in s.split(","):
        tokens, n = (int(v) for v in item.split(":"))
        lens = [tokens * (i + 1) // (n * (n + 1) // 2) for i in range(n)]
        lens[-1] += tokens - sum(lens)
        out.append(lens)
    return out


class RMSNorm(torch.nn.Module):
    def __init__(self, d, dtype, device):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d, dtype=dtype, device=device))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


def linear(i, o, dtype, device):
    return torch.nn.Linear(i, o, bias=False, dtype=dtype, device=device)


class MLP(torch.nn.Module):
    def __init__(self, d, inter, dtype, device):
        super().__init__()
        self.gate, self.up, self.down = linear(d, inter, dtype, device), linear(d, inter, dtype, device), \
            linear(inter, d, dtype, device)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Attention(torch.nn.Module):
    """GQA causal attention per packed sequence (host-known lengths: capturable per layout)."""

    def __init__(self, d, heads, kv_heads, head_dim, dtype, device):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, head_dim
        self.q, self.k = linear(d, heads * head_dim, dtype, device), linear(d, kv_heads * head_dim, dtype, device)
        self.v, self.o = linear(d, kv_heads * head_dim, dtype, device), linear(heads * head_dim, d, dtype, device)

    def forward(self, x, cu, lens):
        T = x.shape[1]
        q = self.q(x).view(T, self.h, self.hd).transpose(0, 1)
        k = self.k(x).view(T, self.kv, self.hd).transpose(0, 1)
        v = self.v(x).view(T, self.kv, self.hd).transpose(0, 1)
        out, s = [], 0
        for n in lens:
            if n:
                out.append(F.scaled_dot_product_attention(q[None, :, s:s + n], k[None, :, s:s + n], v[None, :, s:s + n],
                                                          is_causal=True, enable_gqa=True)[0])
            s += n
        return self.o(torch.cat(out, dim=1).transpose(0, 1).reshape(1, T, self.h * self.hd))


def gdn_shapes(a):
    """linattn's GatedDeltaNet parameters (src/layers/layer_params.cc): name -> (shape, layer dtype?)."""
    h, kd, vd, hv = a.hidden, a.heads * a.head_dim, a.v_heads * a.head_dim, a.v_heads
    return {"q_proj.weight": ((kd, h), True), "k_proj.weight": ((kd, h), True), "v_proj.weight": ((vd, h), True),
            "q_conv1d.weight": ((kd, 4), False), "k_conv1d.weight": ((kd, 4), False),
            "v_conv1d.weight": ((vd, 4), False), "b_proj.weight": ((hv, h), True), "a_proj.weight": ((hv, h), True),
            "g_proj.weight": ((vd, h), True), "dt_bias": ((hv,), False), "A_log": ((hv,), False),
            "o_norm.weight": ((a.head_dim,), False), "o_proj.weight": ((h, vd), True)}


class FlaGDN(torch.nn.Module):
    """fla.layers.GatedDeltaNet's forward from fla-core ops, on a dict of weights (linattn's names)."""

    def __init__(self, weights, a):
        super().__init__()
        self.w, self.a = weights, a

    def forward(self, x, cu, lens):
        from fla.modules.causal_conv1d import causal_conv1d
        from fla.modules.norm.fused_norm_gate import rms_norm_gated
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        w, a, T = self.w, self.a, x.shape[1]
        H, HV, K = a.heads, a.v_heads, a.head_dim

        def conv(name, t):
            return causal_conv1d(t, w[name + "_conv1d.weight"], activation="silu", cu_seqlens=cu)[0]
        q = conv("q", F.linear(x, w["q_proj.weight"])).view(1, T, H, K)
        k = conv("k", F.linear(x, w["k_proj.weight"])).view(1, T, H, K)
        v = conv("v", F.linear(x, w["v_proj.weight"])).view(1, T, HV, K)
        gate_raw = F.linear(x, w["a_proj.weight"]).float()
        beta_raw = F.linear(x, w["b_proj.weight"]).float()
        o, _ = chunk_gated_delta_rule(q, k, v, gate_raw, beta_raw, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                      use_beta_sigmoid_in_kernel=True, A_log=w["A_log"], dt_bias=w["dt_bias"],
                                      cu_seqlens=cu)
        gate = F.linear(x, w["g_proj.weight"]).view(1, T, HV, K)
        o = rms_norm_gated(o, gate, w["o_norm.weight"], None, activation="swish", eps=1e-5)
        return F.linear(o.reshape(1, T, HV * K).to(x.dtype), w["o_proj.weight"])


class LinattnGDN(torch.nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, cu, lens):
        return self.layer(x, cu)


class Stack(torch.nn.Module):
    """The dense part; forward takes the GDN mixers (one per non-attention block)."""

    def __init__(self, a, dtype, device):
        super().__init__()
        d, L = a.hidden, a.layers
        self.attn = torch.nn.ModuleDict({str(i): Attention(d, a.attn_heads, a.kv_heads, a.head_dim, dtype, device)
                                         for i in range(L) if (i + 1) % 4 == 0})
        self.n1 = torch.nn.ModuleList(RMSNorm(d, dtype, device) for _ in range(L))
        self.n2 = torch.nn.ModuleList(RMSNorm(d, dtype, device) for _ in range(L))
        self.mlps = torch.nn.ModuleList(MLP(d, a.intermediate, dtype, device) for _ in range(L))
        self.gdn_slots = [i for i in range(L) if str(i) not in self.attn]

    def forward(self, x, cu, lens, mixers):
        for i in range(len(self.n1)):
            mix = self.attn[str(i)] if str(i) in self.attn else mixers[i]
            x = x + mix(self.n1[i](x), cu, lens)
            x = x + self.mlps[i](self.n2[i](x))
        return x


def build(a, impls, dtype, device):
    torch.manual_seed(1)
    stack = Stack(a, dtype, device)
    with torch.no_grad():
        for p in stack.parameters():
            if p.dim() == 2:
                p.normal_(0, p.shape[1] ** -0.5)
    mixers, la_layers = {}, []
    if "linattn" in impls or "fla" in impls:
        from linattn.nn import GatedDeltaNet
        cfg = dict(hidden_size=a.hidden, num_heads=a.heads, num_v_heads=a.v_heads, head_dim=a.head_dim,
                   head_v_dim=a.head_dim)
        la = {i: GatedDeltaNet(**cfg, dtype=dtype, device=device, seed=100 + i) for i in stack.gdn_slots}
        la_layers = list(la.values())
        mixers["linattn"] = {i: LinattnGDN(m) for i, m in la.items()}
        if "fla" in impls:  # copies of the same weights
            mixers["fla"] = {i: FlaGDN({n: p.detach().clone() for n, p in m.named_parameters()}, a) for i, m in la.items()}
    return stack, mixers, la_layers


def timed(fn, iters, device):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(2):
        fn()
    sync()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2], ts[min(len(ts) - 1, math.ceil(0.95 * len(ts)) - 1)]


def rel(a, b):
    a, b = a.float(), b.float()
    return float(f"{((a - b).norm() / (b.norm() + 1e-30)).item():.4g}")


def run_case(a, stack, mix, la_layers, impl, mode, x, cu, lens):
    """(row fields, output on the host)."""
    device, T, N = x.device.type, x.shape[1], len(lens)
    iters = max(3, min(a.iters, 20000 // T))
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if cuda else 0
    used = None
    with torch.inference_mode():
        if mode == "eager":
            out = stack(x, cu, lens, mix)
            p50, p95 = timed(lambda: stack(x, cu, lens, mix), iters, device)
            used = torch.cuda.mem_get_info() if cuda else None
            out = out.to("cpu")
        else:
            s = torch.cuda.Stream()
            if impl == "linattn":
                for la in la_layers:
                    la.use_graph = True
                    la.reserve(T, N, stream=s)
            xs = x.clone()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                stack(xs, cu, lens, mix)  # warm-up on the capture stream
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                static_out = stack(xs, cu, lens, mix)
            xs.copy_(x)  # the inputs written in place, then replayed
            g.replay()
            torch.cuda.synchronize()
            out = static_out.to("cpu")
            p50, p95 = timed(g.replay, iters, device)
            used = torch.cuda.mem_get_info()
            del g, static_out, xs
    row = dict(ttft_p50_ms=round(p50, 4), ttft_p95_ms=round(p95, 4), tokens_per_s=round(T / (p50 * 1e-3)),
               iters=iters)
    if cuda:
        row.update(torch_peak_extra_mib=round((torch.cuda.max_memory_allocated() - base) / 2 ** 20, 1),
                   device_used_mib=round((used[1] - used[0]) / 2 ** 20, 1))
    return row, out


def speedup_row(rows, T, N):
    """FLA p50 / linattn p50 per mode, and best against best (each impl's faster mode)."""
    sp = {}
    for mode in ("eager", "graph"):
        f, la = rows.get(("fla", mode)), rows.get(("linattn", mode))
        if f and la:
            sp[mode] = round(f["ttft_p50_ms"] / la["ttft_p50_ms"], 3)
    best = {impl: min((r["ttft_p50_ms"] for (i, _), r in rows.items() if i == impl), default=None)
            for impl in ("fla", "linattn")}
    if best["fla"] and best["linattn"]:
        sp["best_vs_best"] = round(best["fla"] / best["linattn"], 3)
    if sp:
        emit(dict(kind="speedup", tokens=T, seqs=N, fla_over_linattn=sp))


def warm(a, batches, dtype, device):
    """FLA's layer once per batch layout, random weights of linattn's shapes and dtypes."""
    gen = torch.Generator(device=device).manual_seed(0)
    w = {n: (torch.randn(*s, device=device, generator=gen) * 0.05).to(dtype if ld else torch.float32)
         for n, (s, ld) in gdn_shapes(a).items()}
    layer = FlaGDN(w, a)
    for lens in batches:
        T = sum(lens)
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=device)
        x = torch.randn(1, T, a.hidden, dtype=dtype, device=device, generator=gen)
        t0 = time.time()
        try:
            with torch.no_grad():
                layer(x, cu, lens)
            torch.cuda.synchronize()
            emit(dict(kind="warm", impl="fla", tokens=T, seqs=len(lens), ok=True, s=round(time.time() - t0, 2)))
        except Exception as e:
            emit(dict(kind="warm", impl="fla", tokens=T, ok=False, error=f"{type(e).__name__}: {str(e)[:300]}"))
        log(f"warm fla layer {T} tokens: {time.time() - t0:.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phase", choices=("warm", "bench"), default="bench")
    ap.add_argument("--impl", default="linattn,fla")
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--batches", default="512:4,2048:8,8192:4,32768:2")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=6144)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--v-heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--attn-heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--step-s", type=float, default=60.0, help="soft cap per case: later cases of a slow impl are skipped")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--fla-standins", action="store_true", help="CPU check: fp32 torch stand-ins for FLA's kernels")
    a = ap.parse_args()
    if a.fla_standins:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fla_standins
        fla_standins.install()
    dtype, batches = getattr(torch, a.dtype), parse_batches(a.batches)
    env = dict(kind="env", phase=a.phase, torch=torch.__version__, commit=os.environ.get("COMMIT", "unknown"),
               device=torch.cuda.get_device_name() if a.device == "cuda" else "cpu", layers=a.layers, hidden=a.hidden,
               gdn_layers=sum(1 for i in range(a.layers) if (i + 1) % 4), agree_rel=AGREE_REL)
    if a.phase == "warm":
        emit(env)
        return warm(a, batches, dtype, a.device)
    import linattn
    env["linattn"] = linattn.__version__
    impls = a.impl.split(",")
    emit(env)
    stack, mixers, la_layers = build(a, impls, dtype, a.device)
    log("built")
    no_graph = {}  # impl -> why graph mode is not measured
    slow = {}      # impl -> the case that ran past --step-s (later, larger batches are skipped)
    modes = a.modes.split(",")
    # linattn's cases first (fla is imported only after them, and a slow first FLA call, Triton
    # compile + autotune when the warm-up was cut, cannot cost them), then FLA eager, then FLA's
    # captures: a capture that fails inside FLA must not leave torch's allocator or the stream in a
    # state that other cases would then meet
    plan = [(lens, impl, mode) for impl in impls for mode in modes for lens in batches
            if not (impl == "fla" and mode == "graph")]
    plan += [(lens, "fla", "graph") for lens in batches if "fla" in impls and "graph" in modes]
    fla_env = False
    outs, rows = {}, {}  # tokens -> {(impl, mode): output on the host / row}
    for lens, impl, mode in plan:
        T, N = sum(lens), len(lens)
        o, r = outs.setdefault(T, {}), rows.setdefault(T, {})
        meta = dict(kind="case", impl=impl, mode=mode, tokens=T, seqs=N, lengths=lens)
        if impl in slow:
            emit(dict(meta, error=f"skipped: {slow[impl]}"))
            continue
        if impl == "fla" and not fla_env:
            import fla
            emit(dict(kind="env", fla=fla.__version__))
            fla_env = True
        if mode == "graph" and impl in no_graph:
            emit(dict(meta, error=f"not captured: {no_graph[impl]}"))
            continue
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=a.device)
        x = torch.randn(1, T, a.hidden, dtype=dtype, device=a.device, generator=torch.Generator(a.device).manual_seed(T))
        t0 = time.time()
        try:
            row, out = run_case(a, stack, mixers[impl], la_layers, impl, mode, x, cu, lens)
        except Exception as e:  # one combination must not hide the others: the error is the row
            err = f"{type(e).__name__}: {str(e)[:300]}"
            if mode == "graph":
                no_graph[impl] = f"capture failed at {T} tokens: {err}"
            emit(dict(meta, error=err))
            log(impl, mode, T, err[:160])
            continue
        finally:
            for la in la_layers:
                la.use_graph = False
            del x
            if a.device == "cuda":
                torch.cuda.empty_cache()
        o[(impl, mode)] = out
        ref = o.get(("linattn", "eager"))
        if ref is not None and impl != "linattn" and mode == "eager":
            row["out_rel_vs_linattn_eager"] = rel(out, ref)
            row["agree"] = row["out_rel_vs_linattn_eager"] < AGREE_REL
        if mode != "eager" and (impl, "eager") in o:
            row["out_rel_vs_own_eager"] = rel(out, o[(impl, "eager")])
        r[(impl, mode)] = row
        emit(dict(meta, **row))
        log(impl, mode, T, f"p50 {row['ttft_p50_ms']} ms")
        if time.time() - t0 > a.step_s:
            slow[impl] = f"{impl} {mode} at {T} tokens took {time.time() - t0:.0f} s (> --step-s)"
    for lens in batches:
        speedup_row(rows.get(sum(lens), {}), sum(lens), len(lens))
    log("done")


if __name__ == "__main__":
    sys.exit(main())
