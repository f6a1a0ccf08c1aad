"""torch.autograd wrappers, used when PyTorch tensors require grad: loss.backward() runs
linattn's chunked backward (GDN / KDA) or the conv backward. Imported lazily, so NumPy-only
installs never import torch.

The chunk Function's forward allocates the training cache (ops.chunk_attn_saved_bytes bytes, uint8,
on the inputs' device) when an input needs a gradient and the op has one (CUDA chunked paths; 0 on
the CPU), saves it for backward and hands it to the backward: the backward reads the forward's
chunk-local prep instead of recomputing it (bitwise the same gradients, faster, more memory held
between forward and backward). TRAINING_CACHE = False turns that off (recompute, less memory)."""
from __future__ import annotations

from ._arrays import is_torch


def wants_grad(*xs) -> bool:
    for x in xs:
        if x is not None and is_torch(x) and x.requires_grad:
            import torch
            return torch.is_grad_enabled()
    return False


TRAINING_CACHE = True
_FN = None
_CONV_FN = None


def _new_cache(op, q, k, v, g, beta, a):
    """The training cache for this forward (a uint8 tensor on q's device), or None where the op
    keeps none (0 bytes: the CPU backend, token-by-token and tier-3 paths)."""
    import torch

    from . import ops
    n = ops.chunk_attn_saved_bytes(op, q, k, v, g, beta, **a)
    return torch.empty(n, dtype=torch.uint8, device=q.device) if n > 0 else None


def _function():
    global _FN
    if _FN is not None:
        return _FN
    import torch

    from . import ops

    class ChunkAttnFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, op, args, q, k, v, g, beta, h0, A_log, dt_bias, saved):
            a = dict(args, initial_state=h0, A_log=A_log, dt_bias=dt_bias)
            if saved is None and TRAINING_CACHE and any(ctx.needs_input_grad):
                saved = _new_cache(op, q, k, v, g, beta, a)
            o, ht = ops._attn_fwd(op, q, k, v, g, beta, saved=saved, **a)
            ctx.op, ctx.args = op, args
            ctx.save_for_backward(q, k, v, g, beta, h0, A_log, dt_bias, saved)
            return o, ht

        @staticmethod
        def backward(ctx, do, dht):
            q, k, v, g, beta, h0, A_log, dt_bias, saved = ctx.saved_tensors
            a = {key: val for key, val in ctx.args.items() if key != "output_final_state"}
            a.update(initial_state=h0, A_log=A_log, dt_bias=dt_bias)
            gr = ops._attn_bwd(ctx.op, q, k, v, g, beta, do, dht, saved=saved, **a)
            return (None, None, gr.dq, gr.dk, gr.dv, gr.dg, gr.dbeta, gr.dinitial_state, gr.dA_log,
                    gr.ddt_bias, None)

    _FN = ChunkAttnFunction
    return _FN


def apply(op, q, k, v, g, beta, args, saved=None):
    """saved: a caller's training cache (else allocated in forward when one applies)."""
    fn = _function()
    a = {key: val for key, val in args.items() if key not in ("initial_state", "A_log", "dt_bias")}
    return fn.apply(op, a, q, k, v, g, beta, args.get("initial_state"), args.get("A_log"), args.get("dt_bias"),
                    saved)


def _conv_function():
    global _CONV_FN
    if _CONV_FN is not None:
        return _CONV_FN
    import torch

    from . import ops

    class CausalConv1dFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, args, x, weight, bias, residual, h0):
            y, ht = ops._conv_fwd(x, weight, bias, residual, h0, **args)
            ctx.args = args
            ctx.save_for_backward(x, weight, bias, residual, h0)
            if ht is None:
                return y
            return y, ht

        @staticmethod
        def backward(ctx, dy, dht=None):
            x, weight, bias, residual, h0 = ctx.saved_tensors
            a = {key: val for key, val in ctx.args.items() if key != "output_final_state"}
            if dy is None:
                dy = torch.zeros_like(x)
            gr = ops.causal_conv1d_bwd(x, weight, dy, bias, residual, h0, dht, **a)

            def like(g, t):  # the gradient in its input's shape and dtype
                return None if g is None or t is None else g.reshape(t.shape).to(t.dtype)

            return (None, like(gr.dx, x), like(gr.dweight, weight), like(gr.dbias, bias),
                    like(gr.dresidual, residual), like(gr.dinitial_state, h0))

    _CONV_FN = CausalConv1dFunction
    return _CONV_FN


def apply_conv(x, weight, bias, residual, h0, args):
    out = _conv_function().apply(args, x, weight, bias, residual, h0)
    return out if args.get("output_final_state") else (out, None)
