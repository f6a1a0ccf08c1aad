"""Framework-neutral array helpers: linattn works on any DLPack array (NumPy, PyTorch, CuPy, JAX);
outputs are allocated with the framework of the first input, on its device."""
from __future__ import annotations

import numpy as np


def is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def contiguous(x):
    if x is None:
        return None
    if is_torch(x):
        return x.contiguous()
    return np.ascontiguousarray(x)


def empty(like, shape, dtype=None):
    """Uninitialised array of `shape` in `dtype` (default: like's dtype), on like's device."""
    if is_torch(like):
        import torch
        return torch.empty(tuple(shape), dtype=dtype or like.dtype, device=like.device)
    return np.empty(tuple(shape), dtype=dtype or like.dtype)


def f32(like):
    if is_torch(like):
        import torch
        return torch.float32
    return np.float32


def empty_like(x, dtype=None):
    return empty(x, x.shape, dtype)


def dl(x):
    """What is handed to linattn._C: PyTorch tensors as legacy DLPack capsules (to_dlpack of a
    detached alias: the import path every nanobind version reads the same way, and no
    __dlpack__(max_version=...) negotiation), everything else unchanged."""
    if x is None or not is_torch(x):
        return x
    from torch.utils.dlpack import to_dlpack
    return to_dlpack(x.detach())


def is_cuda(x) -> bool:
    return is_torch(x) and x.is_cuda


def workspace(like, nbytes):
    """A byte buffer of at least nbytes on like's device (PyTorch's caching allocator for torch
    tensors: inside a torch.cuda.graph capture, the graph's private pool)."""
    n = max(int(nbytes), 1)
    if is_torch(like):
        import torch
        return torch.empty(n, dtype=torch.uint8, device=like.device)
    return np.empty(n, dtype=np.uint8)


def stream_of(x) -> int:
    """The current CUDA stream of x's device as an integer handle (0 for host arrays)."""
    if is_torch(x) and x.is_cuda:
        import torch
        return torch.cuda.current_stream(x.device).cuda_stream
    return 0


def num_seqs(q, cu_seqlens) -> int:
    return (cu_seqlens.shape[0] - 1) if cu_seqlens is not None else q.shape[0]
