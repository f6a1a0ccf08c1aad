"""The Python package with PyTorch CUDA tensors (marked gpu). It needs PyTorch and a CUDA GPU and
fails without them (never skips): scripts/test leaves this file out on machines without a GPU,
scripts/gpu-python (and gpu-final) run it on the H200.
Outputs and gradients (torch autograd) on CUDA equal the C++ CPU path through the same API; the
op runs on torch's current stream; torch.cuda.graph captures of the op forward + backward and of a
whole layer forward + backward, replayed with new inputs and new cu_seqlens written in place,
equal the same fixed-capacity calls run eagerly (bitwise) and the exact-size eager calls. The training
cache: autograd's forward allocates it (chunk_attn_saved_bytes > 0, only with grad) and its backward
reads it, with outputs and gradients bitwise those of the recomputing backward (GDN and KDA, varlen);
the explicit saved= API the same; short, misaligned and wrong-device buffers are clear ValueErrors."""
import pytest

import torch

import linattn  # noqa: E402

pytestmark = [pytest.mark.gpu]


@pytest.fixture(autouse=True)
def _needs_cuda():
    assert torch.cuda.is_available(), "no CUDA GPU (torch.cuda.is_available() is False): run this file on a GPU machine"

DEV = "cuda"


def rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / (b.norm() + 1e-30)).item()


def inputs(T, H=2, HV=4, K=128, V=64, seed=0, dtype=torch.bfloat16, device=DEV):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, T, H, K, generator=g)
    k = torch.randn(1, T, H, K, generator=g)
    v = torch.randn(1, T, HV, V, generator=g)
    graw = torch.randn(1, T, HV, generator=g)
    beta = torch.randn(1, T, HV, generator=g)
    A_log = torch.rand(HV, generator=g) * 2.0
    dt_bias = torch.randn(HV, generator=g) - 2.0
    cast = [t.to(dtype).to(device) for t in (q, k, v, graw, beta)]
    return cast + [A_log.to(device), dt_bias.to(device)]


KW = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)


def gdn(q, k, v, g, b, A_log, dt_bias, cu, **kw):
    return linattn.chunk_gated_delta_rule(q, k, v, g, b, cu_seqlens=cu, A_log=A_log, dt_bias=dt_bias, **KW, **kw)


def test_forward_and_autograd_match_cpu():
    cu_list = [0, 130, 131, 300, 420]
    t = inputs(420, seed=1)
    cu = torch.tensor(cu_list, dtype=torch.int32, device=DEV)
    leaves = [x.clone().requires_grad_(True) for x in t]
    o, _ = gdn(*leaves, cu)
    do = torch.randn_like(o)
    (o.float() * do.float()).sum().backward()
    # The CPU path on the same (bf16-valued) inputs in fp32.
    c = [x.detach().float().cpu() for x in t]
    cuc = torch.tensor(cu_list, dtype=torch.int32)
    oc, _ = gdn(*c, cuc)
    assert rel(o, oc) < 2e-2
    gr = linattn.chunk_gated_delta_rule_bwd(c[0], c[1], c[2], c[3], c[4], do.float().cpu(), cu_seqlens=cuc,
                                           A_log=c[5], dt_bias=c[6], **KW)
    for name, leaf, ref in (("dq", leaves[0], gr.dq), ("dk", leaves[1], gr.dk), ("dv", leaves[2], gr.dv),
                            ("dg", leaves[3], gr.dg), ("dbeta", leaves[4], gr.dbeta), ("dA_log", leaves[5], gr.dA_log),
                            ("ddt_bias", leaves[6], gr.ddt_bias)):
        assert leaf.grad is not None, name
        assert rel(leaf.grad, ref) < 5e-2, name


def test_runs_on_torch_current_stream():
    t = inputs(300, seed=2)
    cu = torch.tensor([0, 100, 300], dtype=torch.int32, device=DEV)
    ref, _ = gdn(*t, cu)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        o, _ = gdn(*t, cu)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(o, ref)


def test_torch_cuda_graph_op_forward_backward():
    T_max, N_max = 512, 4
    st = inputs(T_max, seed=3)
    cu = torch.zeros(N_max + 1, dtype=torch.int32, device=DEV)
    do = torch.zeros(1, T_max, 4, 64, dtype=torch.bfloat16, device=DEV)
    out = {}

    def step():
        o, _ = gdn(*st, cu, use_graph=True, max_num_seqs=N_max)
        gr = linattn.chunk_gated_delta_rule_bwd(*st[:5], do, cu_seqlens=cu, A_log=st[5], dt_bias=st[6], use_graph=True,
                                               max_num_seqs=N_max, **KW)
        out.update(o=o, dq=gr.dq, dv=gr.dv, dg=gr.dg, dA_log=gr.dA_log)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        step()
    static = dict(out)
    for li, lens in enumerate([[128, 128, 128, 128], [5, 0, 300, 0], [512, 0, 0, 0], [1, 63, 64, 65], [200, 77, 0, 0]]):
        cuv = [0]
        for n in lens:
            cuv.append(cuv[-1] + n)
        T = cuv[-1]
        new = inputs(T_max, seed=10 + li)
        with torch.no_grad():
            for dst, src in zip(st, new):
                dst.copy_(src)
            cu.copy_(torch.tensor(cuv, dtype=torch.int32))
            do.copy_(torch.randn(1, T_max, 4, 64, generator=torch.Generator().manual_seed(50 + li)).to(torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        replayed = {k: v.clone() for k, v in static.items()}
        step()  # the same fixed-capacity calls, eager
        torch.cuda.synchronize()
        for key in replayed:
            a, b = replayed[key], out[key]
            if a.dim() >= 2:
                a, b = a[:, :T], b[:, :T]
            assert torch.equal(a, b), f"layout {li}: {key} replay != eager-fixed"
        # exact-size eager
        ex = [x[:, :T].contiguous() if x.dim() > 1 else x for x in st]
        cue = torch.tensor(cuv, dtype=torch.int32, device=DEV)
        oe, _ = gdn(*ex, cue)
        assert rel(replayed["o"][:, :T], oe) < 1e-2, li


def test_layer_module_autograd_matches_cpu_layer():
    from linattn.nn import GatedDeltaNet
    cfg = dict(hidden_size=256, num_heads=2, num_v_heads=4, head_dim=128, head_v_dim=64)
    m = GatedDeltaNet(**cfg, dtype=torch.bfloat16, device=DEV, seed=5)
    ref = GatedDeltaNet(**cfg, dtype=torch.float32, device="cpu", seed=99)
    with torch.no_grad():
        for (n1, p1), (n2, p2) in zip(m.named_parameters(), ref.named_parameters()):
            assert n1 == n2
            p2.copy_(p1.float().cpu())
    assert "q_proj.weight" in dict(m.named_parameters())
    cu_list = [0, 100, 333]
    g = torch.Generator().manual_seed(6)
    x = torch.randn(1, 333, 256, generator=g)
    dy = torch.randn(1, 333, 256, generator=g)
    xg = x.to(torch.bfloat16).to(DEV).requires_grad_(True)
    y = m(xg, torch.tensor(cu_list, dtype=torch.int32, device=DEV))
    (y.float() * dy.to(DEV)).sum().backward()
    xc = x.to(torch.bfloat16).float().requires_grad_(True)
    yc = ref(xc, torch.tensor(cu_list, dtype=torch.int32))
    (yc * dy.to(torch.bfloat16).float()).sum().backward()
    assert rel(y, yc) < 2e-2
    assert rel(xg.grad, xc.grad) < 5e-2
    for (name, p), (_, pc) in zip(m.named_parameters(), ref.named_parameters()):
        assert rel(p.grad, pc.grad) < 5e-2, name


def test_layer_torch_cuda_graph_forward_backward():
    from linattn.nn import GatedDeltaNet
    T_max, N_max, hid = 512, 4, 256
    m = GatedDeltaNet(hidden_size=hid, num_heads=2, num_v_heads=4, head_dim=128, head_v_dim=64, dtype=torch.bfloat16,
                      device=DEV, seed=7, use_graph=True)
    x = torch.zeros(1, T_max, hid, dtype=torch.bfloat16, device=DEV)
    dy, y, dx = torch.zeros_like(x), torch.zeros_like(x), torch.zeros_like(x)
    cu = torch.zeros(N_max + 1, dtype=torch.int32, device=DEV)
    s = torch.cuda.Stream()
    m.reserve(T_max, N_max, stream=s)
    grads = [m._grad_view(n) for n in m._names]

    def step():
        m.forward_into(x, cu, y, training=True)
        m.backward_into(dy, dx)

    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        step()
    eager = GatedDeltaNet(hidden_size=hid, num_heads=2, num_v_heads=4, head_dim=128, head_v_dim=64,
                          dtype=torch.bfloat16, device=DEV, seed=7)
    for li, lens in enumerate([[128, 128, 128, 128], [5, 0, 300, 0], [512, 0, 0, 0], [1, 63, 64, 65], [0, 0, 0, 3],
                               [200, 77, 0, 0]]):
        cuv = [0]
        for n in lens:
            cuv.append(cuv[-1] + n)
        T = cuv[-1]
        gen = torch.Generator().manual_seed(100 + li)
        xn = torch.randn(1, T_max, hid, generator=gen).to(torch.bfloat16)
        dyn = torch.randn(1, T_max, hid, generator=gen).to(torch.bfloat16)
        x.copy_(xn)
        dy.copy_(dyn)
        cu.copy_(torch.tensor(cuv, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        rep = [y.clone(), dx.clone()] + [g.clone() for g in grads]
        with torch.cuda.stream(s):
            step()
        torch.cuda.synchronize()
        fix = [y, dx] + grads
        for i, (a, b) in enumerate(zip(rep, fix)):
            if i < 2:
                a, b = a[:, :T], b[:, :T]
            assert torch.equal(a, b), f"layout {li}: tensor {i} replay != eager-fixed"
        assert torch.count_nonzero(rep[1][:, T:]) == 0, f"layout {li}: padding dx"
        # exact-size eager module with the same weights
        xe = xn[:, :T].to(DEV).requires_grad_(True)
        ye = eager(xe, torch.tensor(cuv, dtype=torch.int32, device=DEV))
        (ye.float() * dyn[:, :T].to(DEV).float()).sum().backward()
        assert rel(rep[0][:, :T], ye) < 1e-2, li
        assert rel(rep[1][:, :T], xe.grad) < 1e-2, li
        for p in eager.parameters():
            p.grad = None


# ---------------------------------------------------------------- the training cache
CACHE_CU = [[0, 130, 131, 300, 420], [0, 1, 64, 65, 193, 320]]


def cache_case(op, cu_list, seed):
    """Leaves (q, k, v, g, beta, A_log, dt_bias, h0), cotangents (do, dht), cu_seqlens and the op's
    keyword arguments: the layer options (in-kernel l2norm, gate, beta sigmoid); KDA per-channel fp32
    gates with dt_bias [HV * K], and lower_bound -5 on the second shape."""
    T, N, HV, K, V = cu_list[-1], len(cu_list) - 1, 4, 128, 64
    gen = torch.Generator().manual_seed(seed)
    t = inputs(T, seed=seed)
    if op == "kda":
        t[3] = torch.randn(1, T, HV, K, generator=gen).to(DEV)  # fp32 raw gates (as test_cuda_saved)
        t[6] = (torch.randn(HV * K, generator=gen) - 2.0).to(DEV)
    h0 = (0.1 * torch.randn(N, HV, K, V, generator=gen)).to(DEV)
    do = torch.randn(1, T, HV, V, generator=gen).to(torch.bfloat16).to(DEV)
    dht = torch.randn(N, HV, K, V, generator=gen).to(DEV)
    kw = dict(KW, cu_seqlens=torch.tensor(cu_list, dtype=torch.int32, device=DEV))
    if op == "kda" and len(cu_list) > 5:
        kw["lower_bound"] = -5.0
    return t + [h0], (do, dht), kw


def cache_fn(op):
    return linattn.chunk_kda if op == "kda" else linattn.chunk_gated_delta_rule


def cache_bwd(op):
    return linattn.chunk_kda_bwd if op == "kda" else linattn.chunk_gated_delta_rule_bwd


def autograd_run(op, src, cot, kw):
    leaves = [x.clone().requires_grad_(True) for x in src]
    q, k, v, g, b, A_log, dt_bias, h0 = leaves
    o, ht = cache_fn(op)(q, k, v, g, b, initial_state=h0, output_final_state=True, A_log=A_log, dt_bias=dt_bias, **kw)
    torch.autograd.backward([o, ht], list(cot))
    torch.cuda.synchronize()
    return [o.detach(), ht.detach()] + [x.grad for x in leaves]


class Spy:
    """Records the `saved` argument of every ops._attn_fwd / _attn_bwd call that runs the op (not the
    size queries of chunk_attn_saved_bytes)."""

    def __init__(self, monkeypatch):
        self.fwd, self.bwd = [], []
        ops = linattn.ops
        f, b = ops._attn_fwd, ops._attn_bwd

        def fwd(*a, **kw):
            if not kw.get("_size_only"):
                self.fwd.append(kw.get("saved"))
            return f(*a, **kw)

        def bwd(*a, **kw):
            self.bwd.append(kw.get("saved"))
            return b(*a, **kw)

        monkeypatch.setattr(ops, "_attn_fwd", fwd)
        monkeypatch.setattr(ops, "_attn_bwd", bwd)


@pytest.mark.parametrize("op", ["gdn", "kda"])
@pytest.mark.parametrize("cu_list", CACHE_CU)
def test_training_cache_autograd_bitwise(op, cu_list, monkeypatch):
    src, cot, kw = cache_case(op, cu_list, seed=20 + len(cu_list))
    q, k, v, g, b, A_log, dt_bias, h0 = src
    n = linattn.chunk_attn_saved_bytes(op, q, k, v, g, b, initial_state=h0, output_final_state=True, A_log=A_log,
                                       dt_bias=dt_bias, **kw)
    assert n > 0, "the chunked CUDA path should take a training cache"
    spy = Spy(monkeypatch)
    cached = autograd_run(op, src, cot, kw)
    assert len(spy.fwd) == 1 and spy.fwd[0] is not None, "autograd allocated no cache"
    buf = spy.fwd[0]
    assert buf.dtype == torch.uint8 and buf.is_cuda and buf.numel() == n
    assert len(spy.bwd) == 1 and spy.bwd[0] is buf, "the backward did not get the forward's cache"
    monkeypatch.setattr(linattn.autograd, "TRAINING_CACHE", False)
    plain = autograd_run(op, src, cot, kw)
    assert spy.fwd[1] is None and spy.bwd[1] is None
    names = ["o", "final_state", "dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias", "dh0"]
    for name, a, c in zip(names, plain, cached):
        assert a is not None and c is not None, name
        assert torch.equal(a, c), f"{op} {cu_list}: {name} differs with the training cache"
    # no grad (inference): the plain forward, no cache
    with torch.no_grad():
        o, _ = cache_fn(op)(q, k, v, g, b, initial_state=h0, A_log=A_log, dt_bias=dt_bias, **kw)
    assert spy.fwd[2] is None
    # grad enabled but no input requires grad: the plain path too
    o2, _ = cache_fn(op)(q, k, v, g, b, initial_state=h0, A_log=A_log, dt_bias=dt_bias, **kw)
    assert spy.fwd[3] is None and not o2.requires_grad
    torch.cuda.synchronize()
    assert torch.equal(o, o2)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_training_cache_explicit_api_and_errors(op):
    src, cot, kw = cache_case(op, CACHE_CU[0], seed=31)
    q, k, v, g, b, A_log, dt_bias, h0 = src
    a = dict(initial_state=h0, A_log=A_log, dt_bias=dt_bias, **kw)
    n = linattn.chunk_attn_saved_bytes(op, q, k, v, g, b, output_final_state=True, **a)
    assert n > 0
    buf = torch.empty(n + 512, dtype=torch.uint8, device=DEV)
    o0, ht0 = cache_fn(op)(q, k, v, g, b, output_final_state=True, **a)
    gr0 = cache_bwd(op)(q, k, v, g, b, cot[0], cot[1], **a)
    o1, ht1 = cache_fn(op)(q, k, v, g, b, output_final_state=True, saved=buf[:n], **a)
    gr1 = cache_bwd(op)(q, k, v, g, b, cot[0], cot[1], saved=buf[:n], **a)
    torch.cuda.synchronize()
    assert torch.equal(o0, o1) and torch.equal(ht0, ht1)
    for name, x, y in zip(gr0._fields, gr0, gr1):
        assert (x is None) == (y is None), name
        assert x is None or torch.equal(x, y), f"{op}: {name} differs with the explicit training cache"
    for bad, want in ((buf[:n - 256], rf"saved_bytes: expected >= {n}, got {n - 256}"),
                      (buf[16:n + 16], r"saved: expected a base aligned to 256 bytes"),
                      (torch.empty(n, dtype=torch.uint8), r"saved: expected a buffer on cuda:0 \(the op's device\), got cpu")):
        with pytest.raises(ValueError, match=want):
            cache_fn(op)(q, k, v, g, b, output_final_state=True, saved=bad, **a)
        with pytest.raises(ValueError, match=want):
            cache_bwd(op)(q, k, v, g, b, cot[0], cot[1], saved=bad, **a)
