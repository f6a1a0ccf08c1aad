"""fp32 torch stand-ins for the three fla-core functions that hybrid_prefill.py's FlaGDN calls, with
FLA's signatures and semantics, installed as fake `fla` modules: on a machine without a GPU (no
Triton kernels) they check that FlaGDN composes the same function as linattn's C++ layer (the
weight names, conv orientation, gate and norm wiring), which is what the GPU run then times.
The recurrences are bench/fla/py_vs_fla.py's fp32 references (ref_attn, ref_conv).
Use: `hybrid_prefill.py --device cpu --dtype float32 --fla-standins ...` (never on the GPU run).
"""
import importlib.util
import os
import sys
import types

import torch


def _refs():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fla", "py_vs_fla.py")
    spec = importlib.util.spec_from_file_location("py_vs_fla", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _lens(cu, T):
    return [T] if cu is None else [int(b - a) for a, b in zip(cu[:-1].tolist(), cu[1:].tolist())]


def install():
    refs = _refs()

    def causal_conv1d(x, weight=None, bias=None, residual=None, initial_state=None, output_final_state=False,
                      activation=None, backend="triton", cu_seqlens=None, **kw):
        assert activation in ("silu", "swish") and residual is None and initial_state is None
        b = torch.zeros(weight.shape[0]) if bias is None else bias
        y = refs.ref_conv(dict(x=x, weight=weight, bias=b), _lens(cu_seqlens, x.shape[1]))
        return y.to(x.dtype), None

    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False, cu_seqlens=None,
                               use_gate_in_kernel=False, A_log=None, dt_bias=None, **kw):
        assert use_qk_l2norm_in_kernel and use_beta_sigmoid_in_kernel and use_gate_in_kernel and scale is None
        a = dict(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias)
        return refs.ref_attn("gdn", a, _lens(cu_seqlens, q.shape[1])).to(q.dtype), None

    def rms_norm_gated(x, g, weight, bias, activation="swish", residual=None, prenorm=False,
                       residual_in_fp32=False, eps=1e-6):
        assert activation in ("swish", "silu") and bias is None and residual is None
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        return (y * torch.nn.functional.silu(g.float())).to(x.dtype)

    names = {"fla": {}, "fla.modules": {}, "fla.modules.causal_conv1d": {"causal_conv1d": causal_conv1d},
             "fla.modules.norm": {}, "fla.modules.norm.fused_norm_gate": {"rms_norm_gated": rms_norm_gated},
             "fla.ops": {}, "fla.ops.gated_delta_rule": {"chunk_gated_delta_rule": chunk_gated_delta_rule}}
    for name, attrs in names.items():
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        m.__version__ = "fp32-standins"
        sys.modules[name] = m
