#!/usr/bin/env python3
"""End-to-end prefill of a Qwen3.5-like hybrid stack (issue 11), linattn's GatedDeltaNet layers vs
FLA's, eager and CUDA-graph captured.

Stack: L blocks of x += mixer(rmsnorm(x)); x += swiglu_mlp(rmsnorm(x)). Mixers: GatedDeltaNet, with
a full-attention layer every 4th block (GQA, PyTorch SDPA, causal within each packed sequence; no
rotary embedding). GatedDeltaNet layers come from linattn (linattn.nn.GatedDeltaNet, the C++
layer) or are composed from FLA's ops, because fla-core ships no layers: torch Linear projections
+ fla causal_conv1d + fla chunk_gated_delta_rule + fla rms_norm_gated, loaded with the linattn
layer's weights so both stacks compute the same function (the output difference is reported).
Random weights, bf16, varlen prefill batches. Graph mode captures the whole stack once per batch
layout (torch.cuda.graph; linattn layers in fixed-capacity mode) and replays it with new inputs.
One JSON line per (impl, mode, batch): tokens/s, p50 / p95 time to first token (one prefill of
the batch), peak memory. Usage:
  python3 bench/e2e/hybrid_prefill.py [--impl linattn,fla] [--modes eager,graph] [--batches 512:4,2048:8,8192:4,32768:1]
  (--device cpu --dtype float32 runs linattn alone on the CPU, for a smoke test)
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F


def parse_batches(s):
    out = []
    for item in s.split(","):
        tokens, n = (int(v) for v in item.split(":"))
        base = tokens // n
        lens = [base] * n
        lens[-1] += tokens - base * n
        out.append(lens)
    return out


class RMSNorm(torch.nn.Module):
    def __init__(self, d, dtype, device):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d, dtype=dtype, device=device))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class MLP(torch.nn.Module):
    def __init__(self, d, inter, dtype, device):
        super().__init__()
        mk = lambda i, o: torch.nn.Linear(i, o, bias=False, dtype=dtype, device=device)  # noqa: E731
        self.gate, self.up, self.down = mk(d, inter), mk(d, inter), mk(inter, d)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Attention(torch.nn.Module):
    """GQA causal attention per packed sequence (host-known lengths, so it is capturable per layout)."""

    def __init__(self, d, heads, kv_heads, head_dim, dtype, device):
        super().__init__()
        mk = lambda i, o: torch.nn.Linear(i, o, bias=False, dtype=dtype, device=device)  # noqa: E731
        self.h, self.kv, self.hd = heads, kv_heads, head_dim
        self.q, self.k, self.v, self.o = (mk(d, heads * head_dim), mk(d, kv_heads * head_dim),
                                          mk(d, kv_heads * head_dim), mk(heads * head_dim, d))

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
        o = torch.cat(out, dim=1).transpose(0, 1).reshape(1, T, self.h * self.hd)
        return self.o(o)


class FlaGDN(torch.nn.Module):
    """FLA's GatedDeltaNet layer composed from fla ops, with a linattn layer's weights."""

    def __init__(self, la_layer, cfg, dtype, device):
        super().__init__()
        self.cfg = cfg
        self.w = {n: p.detach().clone() for n, p in la_layer.named_parameters()}

    def forward(self, x, cu, lens):
        from fla.modules.causal_conv1d import causal_conv1d
        from fla.modules.norm.fused_norm_gate import rms_norm_gated
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        c, w = self.cfg, self.w
        T = x.shape[1]
        H, HV, K, V = c["num_heads"], c["num_v_heads"], c["head_dim"], c["head_v_dim"]
        conv = lambda name, t: causal_conv1d(t, w[name + "_conv1d.weight"], activation="silu", cu_seqlens=cu)[0]  # noqa: E731
        q = conv("q", F.linear(x, w["q_proj.weight"])).view(1, T, H, K)
        k = conv("k", F.linear(x, w["k_proj.weight"])).view(1, T, H, K)
        v = conv("v", F.linear(x, w["v_proj.weight"])).view(1, T, HV, V)
        a = F.linear(x, w["a_proj.weight"]).float()
        b = F.linear(x, w["b_proj.weight"]).float()
        o, _ = chunk_gated_delta_rule(q, k, v, a, b, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                      use_beta_sigmoid_in_kernel=True, A_log=w["A_log"], dt_bias=w["dt_bias"],
                                      cu_seqlens=cu)
        gate = F.linear(x, w["g_proj.weight"]).view(1, T, HV, V)
        o = rms_norm_gated(o, gate, w["o_norm.weight"], None, activation="swish", eps=1e-5)
        return F.linear(o.reshape(1, T, HV * V).to(x.dtype), w["o_proj.weight"])


class LinattnGDN(torch.nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, cu, lens):
        return self.layer(x, cu)


class Stack(torch.nn.Module):
    def __init__(self, mixers, args, dtype, device):
        super().__init__()
        d = args.hidden
        self.mixers = torch.nn.ModuleList(mixers)
        self.n1 = torch.nn.ModuleList(RMSNorm(d, dtype, device) for _ in mixers)
        self.n2 = torch.nn.ModuleList(RMSNorm(d, dtype, device) for _ in mixers)
        self.mlps = torch.nn.ModuleList(MLP(d, args.intermediate, dtype, device) for _ in mixers)

    def forward(self, x, cu, lens):
        for mix, n1, n2, mlp in zip(self.mixers, self.n1, self.n2, self.mlps):
            x = x + mix(n1(x), cu, lens)
            x = x + mlp(n2(x))
        return x


def build(args, impl, dtype, device, use_graph):
    from linattn.nn import GatedDeltaNet
    torch.manual_seed(0)
    cfg = dict(hidden_size=args.hidden, num_heads=args.heads, num_v_heads=args.v_heads, head_dim=args.head_dim,
               head_v_dim=args.head_dim)
    mixers, gdns = [], []
    for i in range(args.layers):
        if (i + 1) % 4 == 0:
            mixers.append(Attention(args.hidden, args.attn_heads, args.kv_heads, args.head_dim, dtype, device))
            continue
        la = GatedDeltaNet(**cfg, dtype=dtype, device=device, seed=100 + i, use_graph=use_graph)
        gdns.append(la)
        mixers.append(LinattnGDN(la) if impl == "linattn" else FlaGDN(la, cfg, dtype, device))
    # The same dense weights for both implementations: re-initialize the stack's own matrices in
    # one order that skips the GDN layers' parameters (the linattn stack holds them, the FLA stack
    # holds copies), so both draw the same random stream and keep the same GDN weights.
    gdn_params = {id(p) for la in gdns for p in la.parameters()}
    with torch.no_grad():
        torch.manual_seed(1)
        stack = Stack(mixers, args, dtype, device)
        for p in stack.parameters():
            if p.dim() == 2 and id(p) not in gdn_params:
                p.normal_(0, p.shape[1] ** -0.5)
    return stack, gdns


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
    return ts[len(ts) // 2], ts[min(len(ts) - 1, len(ts) * 95 // 100)]


def run_case(args, impl, mode, lens, dtype, device):
    graph = mode == "graph"
    stack, gdns = build(args, impl, dtype, device, use_graph=graph and impl == "linattn")
    T, N = sum(lens), len(lens)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=device)
    x = torch.randn(1, T, args.hidden, dtype=dtype, device=device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        if not graph:
            out = stack(x, cu, lens)
            p50, p95 = timed(lambda: stack(x, cu, lens), args.iters, device)
        else:
            s = torch.cuda.Stream()
            for la in gdns:
                la.reserve(T, N, stream=s)
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                stack(x, cu, lens)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                static_out = stack(x, cu, lens)
            x.copy_(torch.randn_like(x))  # new inputs written in place
            p50, p95 = timed(g.replay, args.iters, device)
            out = static_out.clone()
    peak = torch.cuda.max_memory_allocated() / 2 ** 20 if device == "cuda" else None
    row = dict(kind="case", impl=impl, mode=mode, layers=args.layers, hidden=args.hidden, tokens=T, seqs=N,
               ttft_p50_ms=round(p50, 4), ttft_p95_ms=round(p95, 4), tokens_per_s=round(T / (p50 * 1e-3)),
               peak_mib=None if peak is None else round(peak, 1))
    return row, out.float().cpu(), x.float().cpu()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", default="linattn,fla")
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--batches", default="512:4,2048:8,8192:4,32768:1")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=6144)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--v-heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--attn-heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    import linattn
    print(json.dumps(dict(kind="env", torch=torch.__version__, linattn=linattn.__version__,
                          device=torch.cuda.get_device_name() if args.device == "cuda" else "cpu")), flush=True)
    for lens in parse_batches(args.batches):
        outs = {}
        for impl in args.impl.split(","):
            for mode in args.modes.split(","):
                try:
                    row, out, _ = run_case(args, impl, mode, lens, dtype, args.device)
                    outs[(impl, mode)] = out
                    ref = outs.get(("linattn", "eager"))
                    if ref is not None and (impl, mode) != ("linattn", "eager") and mode == "eager":
                        row["out_rel_diff_vs_linattn_eager"] = ((out - ref).norm() / ref.norm()).item()
                    print(json.dumps(row), flush=True)
                except Exception as e:  # one failing combination must not hide the others
                    print(json.dumps(dict(kind="error", impl=impl, mode=mode, tokens=sum(lens),
                                          error=f"{type(e).__name__}: {str(e)[:300]}")), flush=True)
                if args.device == "cuda":
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
