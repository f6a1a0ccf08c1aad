"""Per-call CUDA-event timing shared by the FLA side-by-side scripts in this folder.

event_times(fn, iters): `iters` calls queued back to back, each between its own pair of CUDA events,
one synchronize at the end; returns the per-call times in ms (call order). Warm-up and statistics
stay with each caller (they differ by script).
"""
import torch


def event_times(fn, iters):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in ev]
