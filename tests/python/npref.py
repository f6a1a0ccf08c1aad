"""Plain NumPy fp64 references for the Python tests (token-by-token, obviously correct)."""
import numpy as np


def l2n(x):
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + 1e-6)


def attn_ref(q, k, v, g, beta, cu, scale=None, h0=None, kda=False, l2norm=False):
    """o [1,T,HV,V], ht [N,HV,K,V] for varlen inputs [1, T, ...]; GVA by value head j -> j // G."""
    q, k, v, g, beta = (np.asarray(a, np.float64)[0] for a in (q, k, v, g, beta))
    if l2norm:
        q, k = l2n(q), l2n(k)
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    G = HV // H
    scale = K ** -0.5 if scale is None else scale
    o = np.zeros((T, HV, V))
    N = len(cu) - 1
    ht = np.zeros((N, HV, K, V))
    for n in range(N):
        for j in range(HV):
            S = np.zeros((K, V)) if h0 is None else np.array(h0[n, j], np.float64)
            for t in range(cu[n], cu[n + 1]):
                kt, qt = k[t, j // G], q[t, j // G]
                S = (np.exp(g[t, j])[:, None] * S) if kda else np.exp(g[t, j]) * S
                e = v[t, j] - S.T @ kt
                S = S + beta[t, j] * np.outer(kt, e)
                o[t, j] = S.T @ (scale * qt)
            ht[n, j] = S
    return o[None], ht


def conv_ref(x, w, cu, bias=None, silu=True):
    x = np.asarray(x, np.float64)[0]
    T, D = x.shape
    W = w.shape[1]
    y = np.zeros((T, D))
    for n in range(len(cu) - 1):
        for t in range(cu[n], cu[n + 1]):
            z = np.zeros(D) if bias is None else np.array(bias, np.float64)
            for i in range(W):
                s = t - (W - 1) + i
                if s >= cu[n]:
                    z = z + w[:, i] * x[s]
            y[t] = z / (1 + np.exp(-z)) if silu else z
    return y[None]
