"""The Python package on the CPU backend with NumPy arrays: outputs against NumPy fp64 references,
gradients of the explicit backward against finite differences, graph-mode arguments, the
training cache (0 bytes on the CPU: a `saved` buffer is accepted and ignored; bad buffers rejected
where the binding checks them), and the mapping of C++ errors to Python exceptions."""
import ctypes

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


@pytest.mark.parametrize("kda", [False, True])
def test_training_cache_is_empty_and_ignored_on_cpu(rng, kda):
    """The CPU backward recomputes its forward: chunk_attn_saved_bytes is 0 and a `saved` buffer of any
    size or alignment is accepted, never written, and changes nothing (outputs and gradients bitwise)."""
    cu = np.array([0, 9, 9, 40], np.int64)
    q, k, v, g, beta = make(rng, 40, 2, 2, 16, 8, kda)
    h0 = rng.standard_normal((3, 2, 16, 8)).astype(np.float32)
    do = rng.standard_normal(v.shape).astype(np.float32)
    dht = rng.standard_normal(h0.shape).astype(np.float32)
    op = "kda" if kda else "gdn"
    fn = linattn.chunk_kda if kda else linattn.chunk_gated_delta_rule
    bwd = linattn.chunk_kda_bwd if kda else linattn.chunk_gated_delta_rule_bwd
    kw = dict(initial_state=h0, cu_seqlens=cu, chunk_size=16)
    for extra in ({}, dict(output_final_state=True), dict(use_graph=True, max_num_seqs=3)):
        assert linattn.chunk_attn_saved_bytes(op, q, k, v, g, beta, **kw, **extra) == 0, extra
    o0, ht0 = fn(q, k, v, g, beta, output_final_state=True, **kw)
    gr0 = bwd(q, k, v, g, beta, do, dht, **kw)
    raw = np.zeros(4097, np.uint8)
    for buf in (raw[:4096], raw[1:2], raw[1:], raw.reshape(17, 241)):  # sizes / alignments the CPU never checks
        o, ht = fn(q, k, v, g, beta, output_final_state=True, saved=buf, **kw)
        gr = bwd(q, k, v, g, beta, do, dht, saved=buf, **kw)
        np.testing.assert_array_equal(o, o0)
        np.testing.assert_array_equal(ht, ht0)
        for name, a, b in zip(gr._fields, gr, gr0):
            if b is not None:
                np.testing.assert_array_equal(a, b, err_msg=name)
    assert not raw.any()


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_KEEP = []  # the structs behind the capsules outlive every import of them
_CAPSULE_NAME = ctypes.c_char_p(b"dltensor")


def fake_cuda_bytes(n, device_id=0):
    """A DLPack capsule of n uint8 that claims to live on cuda:device_id (never dereferenced: the
    binding rejects it before any op runs), so the device check is tested without a GPU."""
    shape = (ctypes.c_int64 * 1)(n)
    host = np.zeros(n, np.uint8)
    mt = _DLManagedTensor()
    mt.dl_tensor = _DLTensor(host.ctypes.data, _DLDevice(2, device_id), 1, _DLDataType(1, 8, 1), shape, None, 0)
    mt.manager_ctx = None
    mt.deleter = None
    _KEEP.append((shape, host, mt))
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(mt), _CAPSULE_NAME, None)


def test_training_cache_bad_buffers(rng):
    """What the binding checks wherever a `saved` buffer is passed: it is on the op's device and
    contiguous (its size and 256-byte alignment are checked by the op where a cache is used: CUDA,
    tests/python/test_cuda_torch.py)."""
    q, k, v, g, beta = make(rng, 20, 1, 2, 16, 8)
    do = rng.standard_normal(v.shape).astype(np.float32)
    with pytest.raises(ValueError, match=r"saved: expected a buffer on cpu \(the op's device\), got cuda:0"):
        linattn.chunk_gated_delta_rule(q, k, v, g, beta, saved=fake_cuda_bytes(1024))
    with pytest.raises(ValueError, match=r"saved: expected a buffer on cpu \(the op's device\), got cuda:1"):
        linattn.chunk_gated_delta_rule_bwd(q, k, v, g, beta, do, saved=fake_cuda_bytes(1024, 1))
    with pytest.raises(ValueError, match=r"saved: expected a contiguous byte buffer, got stride 2"):
        linattn.chunk_gated_delta_rule(q, k, v, g, beta, saved=np.zeros(64, np.uint8)[::2])
    with pytest.raises(ValueError, match=r"saved: expected a contiguous byte buffer"):
        linattn.chunk_gated_delta_rule_bwd(q, k, v, g, beta, do, saved=np.zeros((8, 8), np.uint8).T)
