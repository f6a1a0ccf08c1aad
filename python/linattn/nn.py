"""torch.nn.Module layers over linattn's C++ layers (GatedDeltaNet, KDA): FLA's parameter names
(state_dict keys such as "q_proj.weight"), parameters that alias the C++ layer's own buffers
(no copies: an optimizer updating them updates the layer), autograd through linattn's layer
backward, the caller's current CUDA stream. Requires PyTorch.

Graph capture: call `reserve(T_max, N_max)` on the capture stream first (it creates the cuBLAS
state there), run once on the static tensors, then capture `forward_into` / `backward_into` (or
the module call) inside `torch.cuda.graph(g, stream=s)` with use_graph=True and cu_seqlens of
exactly N_max + 1 entries; replay after writing new inputs and cu_seqlens in place.
"""
from __future__ import annotations

import torch

from . import _C
from ._arrays import dl


def _stream(t) -> int:
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


def _dtype_name(dt) -> str:
    return {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}[dt]


class _LayerFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cu_seqlens, module, *params):
        y = torch.empty_like(x)
        module._layer.forward(dl(x), dl(cu_seqlens), dl(y), use_graph=module.use_graph, training=True, stream=_stream(x))
        ctx.module = module
        # The C++ layer's backward reads the forward's x and cu_seqlens again: keep them alive.
        ctx.keep = (x, cu_seqlens)
        return y

    @staticmethod
    def backward(ctx, dy):
        m = ctx.module
        dy = dy.contiguous()
        dx = torch.empty_like(dy)
        m._layer.backward(dl(dy), dl(dx), stream=_stream(dy))
        # The layer writes its gradients into its own fp32 buffers: hand autograd copies.
        grads = [m._grad_view(name).clone() for name in m._names]
        return (dx, None, None, *grads)


class _LinearAttention(torch.nn.Module):
    def __init__(self, kind, hidden_size, num_heads, num_v_heads, head_k_dim, head_v_dim, conv_size=4,
                 norm_eps=1e-5, chunk_size=64, allow_neg_eigval=False, dtype=torch.bfloat16, device="cuda",
                 seed=0, use_graph=False):
        super().__init__()
        device = torch.device(device)
        self._layer = _C.Layer(kind, hidden_size, num_heads, num_v_heads, head_k_dim, head_v_dim, conv_size=conv_size,
                               norm_eps=norm_eps, chunk_size=chunk_size, allow_neg_eigval=allow_neg_eigval,
                               dtype=_dtype_name(dtype), device=device.type,
                               device_index=device.index or 0 if device.type == "cuda" else 0)
        self._layer.init_random(seed)
        self.use_graph = use_graph
        self._names = [name for name, _, _ in self._layer.params()]
        self._grads = {}
        self._plist = []  # in self._names order (named_parameters() orders them differently)
        for name in self._names:
            p = torch.nn.Parameter(self._layer.param_view(name, framework="torch"))
            owner, leaf = self._owner(name)
            owner.register_parameter(leaf, p)
            self._plist.append(p)

    def _owner(self, dotted):
        parts = dotted.split(".")
        mod = self
        for part in parts[:-1]:
            if part not in mod._modules:
                mod.add_module(part, torch.nn.Module())
            mod = mod._modules[part]
        return mod, parts[-1]

    def _grad_view(self, name):
        if name not in self._grads:
            self._grads[name] = self._layer.param_view(name, grad=True, framework="torch")
        return self._grads[name]

    def reserve(self, T_max, N_max, stream=None):
        s = stream.cuda_stream if stream is not None else (
            torch.cuda.current_stream().cuda_stream if torch.cuda.is_available() else 0)
        self._layer.reserve(int(T_max), int(N_max), stream=s)

    def forward(self, x, cu_seqlens):
        """x [1, T, hidden] (layer dtype, layer device), cu_seqlens [N + 1] int32/int64 on the same device."""
        x = x.contiguous()
        params = self._plist
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
            return _LayerFunction.apply(x, cu_seqlens, self, *params)
        y = torch.empty_like(x)
        self._layer.forward(dl(x), dl(cu_seqlens), dl(y), use_graph=self.use_graph, training=False, stream=_stream(x))
        return y

    # Capture-friendly calls on caller-owned static tensors (no allocation).
    def forward_into(self, x, cu_seqlens, y, training=False):
        self._layer.forward(dl(x), dl(cu_seqlens), dl(y), use_graph=self.use_graph, training=training, stream=_stream(x))

    def backward_into(self, dy, dx):
        self._layer.backward(dl(dy), dl(dx), stream=_stream(dy))


class GatedDeltaNet(_LinearAttention):
    """FLA's GatedDeltaNet layer (Qwen3.5 defaults: hidden 2048, 16 q/k heads, 32 v heads, dims 128)."""

    def __init__(self, hidden_size=2048, num_heads=16, num_v_heads=32, head_dim=128, head_v_dim=128, **kw):
        super().__init__("gdn", hidden_size, num_heads, num_v_heads, head_dim, head_v_dim, **kw)


class KimiDeltaAttention(_LinearAttention):
    """FLA's KDA layer (HV = H)."""

    def __init__(self, hidden_size=2048, num_heads=16, head_dim=128, **kw):
        super().__init__("kda", hidden_size, num_heads, num_heads, head_dim, head_dim, **kw)
