"""The Python package with PyTorch CPU tensors (DLPack, no copies): the outputs equal the NumPy
path bit for bit, and torch autograd (loss.backward()) through chunk_gated_delta_rule, chunk_kda
and causal_conv1d gives exactly the explicit backward functions' gradients (weights [D, 1, W] and
fp32 gradients cast back to the input dtype included); one finite-difference check of the conv's
autograd in fp64 arithmetic of the reference; the training cache on the CPU (none allocated by
autograd, a caller's `saved` tensor accepted and ignored). Needs PyTorch: scripts/test runs it where torch is
importable and says so where not; scripts/gpu-python runs it on the H200 (the CUDA side is
test_cuda_torch.py)."""
import numpy as np
import pytest
import torch

import linattn
from npref import conv_ref


def t(a, grad=False):
    x = torch.from_numpy(np.ascontiguousarray(a))
    return x.requires_grad_(grad)


def attn_inputs(rng, T, H, HV, K, V, kda):
    q = rng.standard_normal((1, T, H, K)).astype(np.float32)
    k = rng.standard_normal((1, T, H, K)).astype(np.float32)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((1, T, HV, V)).astype(np.float32)
    g = np.log(1 / (1 + np.exp(-rng.standard_normal((1, T, HV, K) if kda else (1, T, HV))))).astype(np.float32)
    beta = (1 / (1 + np.exp(-rng.standard_normal((1, T, HV))))).astype(np.float32)
    return q, k, v, g, beta


@pytest.mark.parametrize("kda", [False, True])
def test_chunk_autograd_equals_explicit_backward(rng, kda):
    cu = np.array([0, 7, 7, 30, 45], np.int64)
    arrays = attn_inputs(rng, 45, 1, 2, 16, 8, kda)
    h0 = rng.standard_normal((4, 2, 16, 8)).astype(np.float32)
    do = rng.standard_normal((1, 45, 2, 8)).astype(np.float32)
    dht = rng.standard_normal((4, 2, 16, 8)).astype(np.float32)
    fn = linattn.chunk_kda if kda else linattn.chunk_gated_delta_rule
    bwd = linattn.chunk_kda_bwd if kda else linattn.chunk_gated_delta_rule_bwd
    leaves = [t(a, True) for a in arrays] + [t(h0, True)]
    o, ht = fn(*leaves[:5], initial_state=leaves[5], output_final_state=True, cu_seqlens=t(cu), chunk_size=16)
    o_np, ht_np = fn(*arrays, initial_state=h0, output_final_state=True, cu_seqlens=cu, chunk_size=16)
    np.testing.assert_array_equal(o.detach().numpy(), o_np)
    np.testing.assert_array_equal(ht.detach().numpy(), ht_np)
    ((o * t(do)).sum() + (ht * t(dht)).sum()).backward()
    gr = bwd(*arrays, do, dht, initial_state=h0, cu_seqlens=cu, chunk_size=16)
    for name, leaf, want in zip(("dq", "dk", "dv", "dg", "dbeta", "dh0"), leaves,
                                (gr.dq, gr.dk, gr.dv, gr.dg, gr.dbeta, gr.dinitial_state)):
        np.testing.assert_array_equal(leaf.grad.numpy(), np.asarray(want), err_msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv_autograd_equals_explicit_backward(rng, dtype):
    cu = np.array([0, 3, 3, 20, 33], np.int64)
    x = t(rng.standard_normal((1, 33, 24)).astype(np.float32)).to(dtype).requires_grad_()
    w = t(rng.standard_normal((24, 1, 4)).astype(np.float32)).to(dtype).requires_grad_()  # FLA's [D, 1, W]
    b = t(rng.standard_normal(24).astype(np.float32)).to(dtype).requires_grad_()
    res = t(rng.standard_normal((1, 33, 24)).astype(np.float32)).to(dtype).requires_grad_()
    h0 = t(rng.standard_normal((4, 24, 4)).astype(np.float32)).to(dtype).requires_grad_()
    dy = t(rng.standard_normal((1, 33, 24)).astype(np.float32)).to(dtype)
    dht = t(rng.standard_normal((4, 24, 4)).astype(np.float32)).to(dtype)
    y, ht = linattn.causal_conv1d(x, w, b, res, h0, output_final_state=True, cu_seqlens=t(cu))
    ((y.float() * dy.float()).sum() + (ht.float() * dht.float()).sum()).backward()
    gr = linattn.causal_conv1d_bwd(x.detach(), w.detach(), dy, b.detach(), res.detach(), h0.detach(), dht,
                                   cu_seqlens=t(cu))
    for name, leaf, want in (("dx", x, gr.dx), ("dweight", w, gr.dweight), ("dbias", b, gr.dbias),
                             ("dresidual", res, gr.dresidual), ("dh0", h0, gr.dinitial_state)):
        assert leaf.grad.shape == leaf.shape and leaf.grad.dtype == leaf.dtype, name
        want = want.reshape(leaf.shape).to(dtype)
        assert torch.equal(leaf.grad, want), name


def test_conv_autograd_matches_finite_differences(rng):
    cu = np.array([0, 5, 12], np.int64)
    x = rng.standard_normal((1, 12, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    xt, wt = t(x, True), t(w, True)
    y, _ = linattn.causal_conv1d(xt, wt, cu_seqlens=t(cu))
    r = rng.standard_normal(y.shape).astype(np.float32)
    (y * t(r)).sum().backward()

    def loss(xx, ww):
        return float((conv_ref(xx.astype(np.float64), ww.astype(np.float64), cu) * r).sum())

    eps = 1e-3
    for arr, grad in ((x, xt.grad.numpy()), (w, wt.grad.numpy())):
        for idx in [(0, 1, 0), (0, 7, 2), (0, 11, 1)] if arr.ndim == 3 else [(0, 0), (1, 2), (2, 1)]:
            keep = arr[idx]
            arr[idx] = keep + eps
            up = loss(x, w)
            arr[idx] = keep - eps
            down = loss(x, w)
            arr[idx] = keep
            assert abs((up - down) / (2 * eps) - grad[idx]) < 2e-3 * max(1.0, abs(grad[idx])), idx


def test_no_grad_takes_the_plain_path(rng):
    x = t(rng.standard_normal((1, 9, 8)).astype(np.float32), True)
    w = t(rng.standard_normal((8, 4)).astype(np.float32), True)
    with torch.no_grad():
        y, ht = linattn.causal_conv1d(x, w)
    assert not y.requires_grad and ht is None


@pytest.mark.parametrize("kda", [False, True])
def test_training_cache_cpu_autograd(rng, kda, monkeypatch):
    """On the CPU chunk_attn_saved_bytes is 0: autograd's forward allocates no cache (saved=None
    reaches the op) and a caller's uint8 tensor passed as saved= is ignored (gradients bitwise those
    of the explicit backward, the buffer untouched)."""
    cu = np.array([0, 7, 7, 30], np.int64)
    arrays = attn_inputs(rng, 30, 1, 2, 16, 8, kda)
    do = rng.standard_normal((1, 30, 2, 8)).astype(np.float32)
    op = "kda" if kda else "gdn"
    fn = linattn.chunk_kda if kda else linattn.chunk_gated_delta_rule
    bwd = linattn.chunk_kda_bwd if kda else linattn.chunk_gated_delta_rule_bwd
    seen = []
    fwd = linattn.ops._attn_fwd

    def spy(*a, **kw):
        if not kw.get("_size_only"):  # not chunk_attn_saved_bytes's query
            seen.append(kw.get("saved"))
        return fwd(*a, **kw)

    monkeypatch.setattr(linattn.ops, "_attn_fwd", spy)
    assert linattn.chunk_attn_saved_bytes(op, *map(t, arrays), cu_seqlens=t(cu), chunk_size=16) == 0
    gr = bwd(*arrays, do, cu_seqlens=cu, chunk_size=16)
    buf = torch.zeros(1000, dtype=torch.uint8)
    for saved in (None, buf, buf[3:]):
        seen.clear()
        leaves = [t(a, True) for a in arrays]
        o, _ = fn(*leaves, cu_seqlens=t(cu), chunk_size=16, saved=saved)
        assert len(seen) == 1 and seen[0] is saved  # nothing allocated: 0 bytes on the CPU
        (o * t(do)).sum().backward()
        for name, leaf, want in zip(("dq", "dk", "dv", "dg", "dbeta"), leaves, gr):
            np.testing.assert_array_equal(leaf.grad.numpy(), np.asarray(want), err_msg=name)
    with torch.no_grad():
        seen.clear()
        fn(*map(t, arrays), cu_seqlens=t(cu), chunk_size=16)
        assert seen == [None]
    assert not buf.any()
