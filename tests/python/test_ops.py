"""The Python package on the CPU backend with NumPy arrays: outputs against NumPy fp64 references,
gradients of the explicit backward against finite differences, graph-mode arguments, and the
mapping of C++ errors to Python exceptions."""
import numpy as np
import pytest

import linattn
from npref import attn_ref, conv_ref


def make(rng, T, H, HV, K, V, kda=False):
    q = rng.standard_normal((1, T, H, K)).astype(np.float32)
    k = rng.standard_normal((1, T, H, K)).astype(np.float32)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((1, T, HV, V)).astype(np.float32)
    gshape = (1, T, HV, K) if kda else (1, T, HV)
    g = np.log(1 / (1 + np.exp(-rng.standard_normal(gshape)))).astype(np.float32)
    beta = (1 / (1 + np.exp(-rng.standard_normal((1, T, HV))))).astype(np.float32)
    return q, k, v, g, beta


@pytest.mark.parametrize("kda", [False, True])
@pytest.mark.parametrize("bt", [16, 64])
def test_forward_matches_reference(rng, kda, bt):
    cu = np.array([0, 5, 5, 40, 77], np.int64)
    q, k, v, g, beta = make(rng, 77, 2, 4 if not kda else 2, 16, 8, kda)
    N, HV = len(cu) - 1, v.shape[2]
    h0 = rng.standard_normal((N, HV, 16, 8)).astype(np.float32)
    fn = linattn.chunk_kda if kda else linattn.chunk_gated_delta_rule
    o, ht = fn(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu, chunk_size=bt)
    o_ref, ht_ref = attn_ref(q, k, v, g, beta, cu, h0=h0, kda=kda)
    assert o.shape == v.shape and o.dtype == np.float32
    np.testing.assert_allclose(o, o_ref, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(ht, ht_ref, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(ht[1], h0[1], rtol=0, atol=0)  # zero-length sequence passes h0 through


def test_backward_matches_finite_differences(rng):
    cu = np.array([0, 9, 21], np.int64)
    q, k, v, g, beta = make(rng, 21, 1, 2, 8, 4)
    do = rng.standard_normal(v.shape).astype(np.float32)
    gr = linattn.chunk_gated_delta_rule_bwd(q, k, v, g, beta, do, cu_seqlens=cu, chunk_size=16)
    args = [x.astype(np.float64) for x in (q, k, v, g, beta)]

    def loss():
        o, _ = attn_ref(*args, cu)
        return float((o * do).sum())

    for idx, grad in [(0, gr.dq), (1, gr.dk), (2, gr.dv), (3, gr.dg), (4, gr.dbeta)]:
        a = args[idx]
        flat = a.reshape(-1)
        for i in range(0, flat.size, max(1, flat.size // 7)):
            old = flat[i]
            flat[i] = old + 1e-6
            lp = loss()
            flat[i] = old - 1e-6
            lm = loss()
            flat[i] = old
            assert abs(grad.reshape(-1)[i] - (lp - lm) / 2e-6) < 2e-3 * (1 + abs((lp - lm) / 2e-6)), (idx, i)


def test_conv_matches_reference(rng):
    cu = np.array([0, 3, 3, 50], np.int64)
    x = rng.standard_normal((1, 50, 24)).astype(np.float32)
    w = rng.standard_normal((24, 4)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    y, _ = linattn.causal_conv1d(x, w, bias=b, activation="silu", cu_seqlens=cu)
    np.testing.assert_allclose(y, conv_ref(x, w, cu, bias=b), rtol=1e-4, atol=1e-5)
    y3, _ = linattn.causal_conv1d(x, w[:, None, :], bias=b, activation="silu", cu_seqlens=cu)
    np.testing.assert_array_equal(y, y3)  # FLA's [D, 1, W] weight is accepted


def test_conv_backward_with_states_matches_finite_differences(rng):
    """causal_conv1d_bwd with an initial state and a final-state gradient (dht), against central
    differences of sum(y * r) + sum(final_state * s) through the forward."""
    cu = np.array([0, 2, 2, 11], np.int64)  # a sequence shorter than W - 1: its final state holds h0
    x = rng.standard_normal((1, 11, 5)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    h0 = rng.standard_normal((3, 5, 4)).astype(np.float32)
    r = rng.standard_normal((1, 11, 5)).astype(np.float32)
    s = rng.standard_normal((3, 5, 4)).astype(np.float32)

    def loss():
        y, ht = linattn.causal_conv1d(x, w, bias=b, initial_state=h0, output_final_state=True, cu_seqlens=cu)
        return float((y.astype(np.float64) * r).sum() + (ht.astype(np.float64) * s).sum())

    gr = linattn.causal_conv1d_bwd(x, w, r, bias=b, initial_state=h0, dht=s, cu_seqlens=cu)
    eps = 1e-2
    for arr, grad in ((x, gr.dx), (w, gr.dweight), (b, gr.dbias), (h0, gr.dinitial_state)):
        for flat in rng.choice(arr.size, size=min(6, arr.size), replace=False):
            idx = np.unravel_index(flat, arr.shape)
            keep = arr[idx]
            arr[idx] = keep + eps
            up = loss()
            arr[idx] = keep - eps
            down = loss()
            arr[idx] = keep
            fd = (up - down) / (2 * eps)
            assert abs(fd - grad[idx]) <= 2e-2 * max(1.0, abs(fd)), (arr.shape, idx, fd, grad[idx])


def test_graph_mode_arguments(rng):
    cu = np.array([0, 10, 30, 30], np.int32)
    q, k, v, g, beta = make(rng, 32, 2, 2, 16, 16)  # 2 padding tokens
    o_eager, _ = linattn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu)
    o_graph, _ = linattn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu, use_graph=True, max_num_seqs=3)
    np.testing.assert_allclose(o_graph[:, :30], o_eager[:, :30], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="max_num_seqs"):
        linattn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu, use_graph=True, max_num_seqs=5)


def test_errors_map_to_python_exceptions(rng):
    q, k, v, g, beta = make(rng, 8, 2, 3, 16, 16)  # HV = 3 is not a multiple of H = 2
    with pytest.raises(ValueError, match="HV"):
        linattn.chunk_gated_delta_rule(q, k, v, g, beta)
    q, k, v, g, beta = make(rng, 8, 2, 2, 16, 16)
    with pytest.raises(ValueError, match="chunk_size"):
        linattn.chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=48)
    with pytest.raises(NotImplementedError):
        linattn.chunk_kda(q, k, v, np.zeros((1, 8, 2, 16), np.float32), beta, return_intermediate_states=True)
    assert linattn.version() == linattn.__version__
