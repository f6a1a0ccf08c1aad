"""FLA-compatible functional API: chunk_gated_delta_rule, chunk_kda, causal_conv1d, with FLA's
argument names, shapes, defaults and return values, plus explicit backward functions, the
graph-mode arguments (use_graph, max_num_seqs, chunk_indices, chunk_offsets) and the training
cache (chunk_attn_saved_bytes; `saved=` on the chunk forward and backward: the CUDA forward keeps
its chunk-local prep there and the backward reads it instead of recomputing it)."""
from __future__ import annotations

from collections import namedtuple

from . import _C
from ._arrays import contiguous, dl, empty, empty_like, f32, is_cuda, num_seqs, stream_of, workspace

ChunkGrads = namedtuple("ChunkGrads", "dq dk dv dg dbeta dinitial_state dA_log ddt_bias")
ConvGrads = namedtuple("ConvGrads", "dx dweight dbias dresidual dinitial_state")


def _state_shape(q, v, n, state_v_first):
    hv, kd, vd = v.shape[2], q.shape[3], v.shape[3]
    return (n, hv, vd, kd) if state_v_first else (n, hv, kd, vd)


def _attn_common(op, q, k, v, g, beta, scale, initial_state, use_qk_l2norm_in_kernel,
                 use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first,
                 cu_seqlens, chunk_indices, chunk_offsets, A_log, dt_bias, chunk_size, lower_bound,
                 safe_gate, use_graph, max_num_seqs, num_threads):
    t = [contiguous(a) for a in (q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens,
                                 chunk_indices, chunk_offsets)]
    if use_graph and max_num_seqs is None:
        raise ValueError("max_num_seqs: required with use_graph=True (it must equal len(cu_seqlens) - 1)")
    kw = dict(scale=0.0 if scale is None else float(scale), chunk_size=int(chunk_size),
              l2norm=bool(use_qk_l2norm_in_kernel), gate_in_kernel=bool(use_gate_in_kernel),
              beta_sigmoid=bool(use_beta_sigmoid_in_kernel), neg_eigval=bool(allow_neg_eigval),
              state_v_first=bool(state_v_first), lower_bound=lower_bound, safe_gate=bool(safe_gate),
              use_graph=bool(use_graph), max_num_seqs=int(max_num_seqs or 0),
              stream=stream_of(q), num_threads=int(num_threads))
    return t, kw


def _graph_workspace(op, backward, t, kw, output_final_state=False, saved=None):
    """Graph mode on CUDA: the op's scratch, from PyTorch's caching allocator (inside a
    torch.cuda.graph capture that is the graph's private pool, alive as long as the graph).
    None elsewhere (eager CUDA calls allocate stream-ordered; the CPU keeps its own scratch)."""
    q = t[0]
    if not (kw["use_graph"] and is_cuda(q)):
        return None
    size_kw = {key: val for key, val in kw.items() if key != "stream"}
    n = _C.chunk_attn_workspace_bytes(op, backward, *map(dl, t), output_final_state=bool(output_final_state),
                                      saved=dl(saved), **size_kw)
    return workspace(q, n)


def _saved_bytes(op, t, kw, output_final_state):
    size_kw = {key: val for key, val in kw.items() if key not in ("stream", "num_threads")}
    return int(_C.chunk_attn_saved_bytes(op, *map(dl, t), output_final_state=bool(output_final_state), **size_kw))


def chunk_attn_saved_bytes(op, q, k, v, g, beta, **kw):
    """Bytes of the training cache for the chunk op `op` ('gdn' or 'kda') on these inputs, with the
    forward's keyword arguments (scale, initial_state, output_final_state, cu_seqlens, A_log,
    dt_bias, chunk_size, use_graph, max_num_seqs, ...). A uint8 buffer of that size on the inputs'
    device, passed as `saved=` to the forward (chunk_gated_delta_rule / chunk_kda) and then to the
    explicit backward of the same inputs, lets the backward read the forward's chunk-local prep
    instead of recomputing it (bitwise the same gradients). 0 where no cache applies (the CPU
    backend, token-by-token and tier-3 paths); a buffer passed there is ignored. torch autograd
    allocates and passes it by itself."""
    return _attn_fwd(op, q, k, v, g, beta, _size_only=True, **kw)


def _attn_fwd(op, q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, state_v_first=False, cu_seqlens=None, chunk_indices=None,
              chunk_offsets=None, A_log=None, dt_bias=None, chunk_size=64, lower_bound=None,
              safe_gate=False, use_graph=False, max_num_seqs=None, num_threads=0, saved=None, _size_only=False):
    t, kw = _attn_common(op, q, k, v, g, beta, scale, initial_state, use_qk_l2norm_in_kernel,
                         use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first,
                         cu_seqlens, chunk_indices, chunk_offsets, A_log, dt_bias, chunk_size, lower_bound,
                         safe_gate, use_graph, max_num_seqs, num_threads)
    if _size_only:
        return _saved_bytes(op, t, kw, output_final_state)
    q, k, v, g, beta, A_log, dt_bias, h0, cu, ci, co = t
    o = empty(q, tuple(v.shape[:3]) + (v.shape[3],), q.dtype)
    ht = empty(q, _state_shape(q, v, num_seqs(q, cu), state_v_first), f32(q)) if output_final_state else None
    ws = _graph_workspace(op, False, t, kw, output_final_state)
    _C.chunk_attn_fwd(op, *map(dl, (q, k, v, g, beta, o, ht, A_log, dt_bias, h0, cu, ci, co)), workspace=dl(ws),
                      saved=dl(saved), **kw)
    return o, ht


def _attn_bwd(op, q, k, v, g, beta, do, dht=None, scale=None, initial_state=None,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, state_v_first=False, cu_seqlens=None, chunk_indices=None,
              chunk_offsets=None, A_log=None, dt_bias=None, chunk_size=64, lower_bound=None,
              safe_gate=False, use_graph=False, max_num_seqs=None, num_threads=0, saved=None):
    t, kw = _attn_common(op, q, k, v, g, beta, scale, initial_state, use_qk_l2norm_in_kernel,
                         use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first,
                         cu_seqlens, chunk_indices, chunk_offsets, A_log, dt_bias, chunk_size, lower_bound,
                         safe_gate, use_graph, max_num_seqs, num_threads)
    q, k, v, g, beta, A_log, dt_bias, h0, cu, ci, co = t
    do, dht = contiguous(do), contiguous(dht)
    gr = ChunkGrads(empty_like(q), empty_like(k), empty_like(v), empty_like(g), empty_like(beta),
                    None if h0 is None else empty_like(h0, f32(q)),
                    None if A_log is None else empty_like(A_log, f32(q)),
                    None if dt_bias is None else empty_like(dt_bias, f32(q)))
    ws = _graph_workspace(op, True, t, kw, saved=saved)
    _C.chunk_attn_bwd(op, *map(dl, (q, k, v, g, beta, A_log, dt_bias, h0, cu, ci, co, do, dht, gr.dq, gr.dk, gr.dv,
                                    gr.dg, gr.dbeta, gr.dA_log, gr.ddt_bias, gr.dinitial_state)), workspace=dl(ws),
                      saved=dl(saved), **kw)
    return gr


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                           allow_neg_eigval=False, state_v_first=False, cu_seqlens=None,
                           cu_seqlens_cpu=None, chunk_indices=None, *, use_gate_in_kernel=False,
                           A_log=None, dt_bias=None, chunk_size=64, use_graph=False, max_num_seqs=None,
                           chunk_offsets=None, num_threads=0, saved=None):
    """GatedDeltaNet chunked forward (FLA semantics). Returns (o, final_state or None). With torch
    tensors that require grad, autograd flows through linattn's backward (on CUDA with the training
    cache, allocated here). saved: an optional caller cache (chunk_attn_saved_bytes) the forward fills
    for chunk_gated_delta_rule_bwd(..., saved=saved)."""
    args = dict(scale=scale, initial_state=initial_state, output_final_state=output_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
                state_v_first=state_v_first, cu_seqlens=cu_seqlens, chunk_indices=chunk_indices,
                chunk_offsets=chunk_offsets, A_log=A_log, dt_bias=dt_bias, chunk_size=chunk_size,
                use_graph=use_graph, max_num_seqs=max_num_seqs, num_threads=num_threads)
    from . import autograd
    if autograd.wants_grad(q, k, v, g, beta, initial_state, A_log, dt_bias):
        return autograd.apply("gdn", q, k, v, g, beta, args, saved)
    return _attn_fwd("gdn", q, k, v, g, beta, saved=saved, **args)


def chunk_gated_delta_rule_bwd(q, k, v, g, beta, do, dht=None, **kw):
    """Explicit backward: gradients for the loss sum(o * do) + sum(final_state * dht). saved=: the
    training cache a forward of the same inputs and options filled (chunk_attn_saved_bytes)."""
    return _attn_bwd("gdn", q, k, v, g, beta, do, dht, **kw)


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
              return_intermediate_states=False, state_v_first=False, cu_seqlens=None,
              cu_seqlens_cpu=None, *, A_log=None, dt_bias=None, chunk_size=64, use_graph=False,
              max_num_seqs=None, chunk_indices=None, chunk_offsets=None, num_threads=0, saved=None):
    """Kimi Delta Attention chunked forward (FLA semantics). Returns (o, final_state or None).
    Autograd and saved= as in chunk_gated_delta_rule."""
    if return_intermediate_states:
        raise NotImplementedError("return_intermediate_states: linattn never materialises per-chunk states")
    args = dict(scale=scale, initial_state=initial_state, output_final_state=output_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
                state_v_first=state_v_first, cu_seqlens=cu_seqlens, chunk_indices=chunk_indices,
                chunk_offsets=chunk_offsets, A_log=A_log, dt_bias=dt_bias, chunk_size=chunk_size,
                lower_bound=lower_bound, safe_gate=safe_gate, use_graph=use_graph,
                max_num_seqs=max_num_seqs, num_threads=num_threads)
    from . import autograd
    if autograd.wants_grad(q, k, v, g, beta, initial_state, A_log, dt_bias):
        return autograd.apply("kda", q, k, v, g, beta, args, saved)
    return _attn_fwd("kda", q, k, v, g, beta, saved=saved, **args)


def chunk_kda_bwd(q, k, v, g, beta, do, dht=None, **kw):
    return _attn_bwd("kda", q, k, v, g, beta, do, dht, **kw)


def causal_conv1d(x, weight, bias=None, residual=None, initial_state=None, output_final_state=False,
                  activation="silu", cu_seqlens=None, *, use_graph=False, max_num_seqs=None,
                  num_threads=0):
    """Short causal depthwise conv (FLA's causal_conv1d). weight [D, W] (or [D, 1, W]).
    Returns (y, final_state or None); final_state [N, D, W] in x's dtype. With PyTorch tensors that
    require grad, autograd flows through linattn's conv backward."""
    args = dict(output_final_state=output_final_state, activation=activation, cu_seqlens=cu_seqlens,
                use_graph=use_graph, max_num_seqs=max_num_seqs, num_threads=num_threads)
    from . import autograd
    if autograd.wants_grad(x, weight, bias, residual, initial_state):
        return autograd.apply_conv(x, weight, bias, residual, initial_state, args)
    return _conv_fwd(x, weight, bias, residual, initial_state, **args)


def _conv_fwd(x, weight, bias, residual, initial_state, output_final_state=False, activation="silu",
              cu_seqlens=None, use_graph=False, max_num_seqs=None, num_threads=0):
    if weight.ndim == 3:
        weight = weight[:, 0, :]
    x, weight, bias, residual, h0, cu = (contiguous(a) for a in (x, weight, bias, residual, initial_state, cu_seqlens))
    y = empty_like(x)
    n = (cu.shape[0] - 1) if cu is not None else x.shape[0]
    ht = empty(x, (n, x.shape[-1], weight.shape[1]), x.dtype) if output_final_state else None
    _C.conv_fwd(*map(dl, (x, weight, bias, residual, h0, cu, y, ht)), activation or "none", bool(use_graph),
                int(max_num_seqs or 0), stream_of(x), int(num_threads))
    return y, ht


def causal_conv1d_bwd(x, weight, dy, bias=None, residual=None, initial_state=None, dht=None,
                      activation="silu", cu_seqlens=None, *, use_graph=False, max_num_seqs=None,
                      num_threads=0):
    """Explicit conv backward: (dx, dweight, dbias, dresidual, dinitial_state)."""
    if weight.ndim == 3:
        weight = weight[:, 0, :]
    x, weight, bias, residual, h0, cu, dy, dht = (
        contiguous(a) for a in (x, weight, bias, residual, initial_state, cu_seqlens, dy, dht))
    gr = ConvGrads(empty_like(x), empty_like(weight, f32(x)), None if bias is None else empty_like(bias, f32(x)),
                   None if residual is None else empty_like(residual), None if h0 is None else empty_like(h0))
    ws = None
    if use_graph and is_cuda(x):
        ws = workspace(x, _C.conv_bwd_workspace_bytes(*map(dl, (x, weight, bias, residual, h0, cu)), dht is not None,
                                                      True, int(max_num_seqs or 0)))
    _C.conv_bwd(*map(dl, (x, weight, bias, residual, h0, cu, dy, dht, gr.dx, gr.dweight, gr.dbias, gr.dresidual,
                          gr.dinitial_state)), activation or "none", bool(use_graph), int(max_num_seqs or 0),
                stream_of(x), int(num_threads), workspace=dl(ws))
    return gr
