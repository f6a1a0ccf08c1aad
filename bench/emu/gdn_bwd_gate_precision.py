#!/usr/bin/env python3
"""fp64 emulation of the CUDA GDN chunked backward's gate gradient (ddt_bias) with bf16 rounding
switched on at chosen storage points, against an fp64 token-level backward (issue 6's ddt_bias gap).

One head, one sequence (default 520 tokens, K = V = 128, BT = 64), inputs like the graph test's
(bf16 q / k / v / d_o, in-kernel l2norm, gate -exp(A_log) softplus(g + dt_bias), beta sigmoid).
The chunk formulas are those of src/cuda/gdn/gdn_bwd_chunk.cu / gdn_bwd_sweep.cu (the fp64 run
matches the token backward to ~1e-15). Rounding points: prep (Ab, P, Ai), sweep (the sweeps'
staged bf16 operands), S / dS (stored S_c, dS'), vh / dvh (stored V^, dV^), Y (staged Y), and
exactSdS (the <S_c, dS'> term from unrounded copies). usage: gdn_bwd_gate_precision.py [T] [seeds]
[per-seed]: prints ddt_bias rel RMS over the seeds per variant, then per-seed relative errors and
the absolute error RMS of the single sources.
"""
import numpy as np, sys
def bf(x):  # round to bf16 (nearest even)
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)
def sp(x): return np.log1p(np.exp(x))
def sig(x): return 1/(1+np.exp(-x))

def make(T, K, V, seed):
    r = np.random.default_rng(seed)
    q = bf(r.standard_normal((T, K))); k = bf(r.standard_normal((T, K)))
    v = bf(r.standard_normal((T, V)))
    graw = r.standard_normal(T); A = r.standard_normal(); dtb = r.standard_normal()
    braw = r.standard_normal(T)
    h0 = r.standard_normal((K, V)); dht = r.standard_normal((K, V))
    do = bf(r.standard_normal((T, V)))
    x = graw + dtb
    g = -np.exp(A) * sp(x); draw = -np.exp(A) * sig(x)
    beta = sig(braw)
    rq = 1/np.sqrt((q*q).sum(1)+1e-6); rk = 1/np.sqrt((k*k).sum(1)+1e-6)
    return dict(q=q, k=k, v=v, g=g, draw=draw, beta=beta, h0=h0, dht=dht, do=do, rq=rq, rk=rk, scale=K**-0.5)

def token_ref(d):
    qh = d['q']*d['rq'][:, None]; kh = d['k']*d['rk'][:, None]
    T = len(d['g']); S = d['h0'].copy(); Ss = []
    for t in range(T):
        Ss.append(S.copy()); a = np.exp(d['g'][t]); Sd = a*S
        e = d['v'][t] - Sd.T @ kh[t]; S = Sd + d['beta'][t]*np.outer(kh[t], e)
    dS = d['dht'].copy(); dg = np.zeros(T)
    for t in range(T-1, -1, -1):
        S = Ss[t]; a = np.exp(d['g'][t]); b = d['beta'][t]
        dS = dS + d['scale']*np.outer(qh[t], d['do'][t])
        s = dS.T @ kh[t]; e = d['v'][t] - (a*S).T @ kh[t]; de = b*s
        dSd = dS - np.outer(kh[t], de); dg[t] = a*(S*dSd).sum(); dS = a*dSd
    return dg

def chunk_emu(d, BT, R):  # R: set of rounding points
    rnd = lambda x, key: bf(x) if key in R else x
    qh = d['q']*d['rq'][:, None]; kh = d['k']*d['rk'][:, None]; T = len(d['g']); sc = d['scale']
    nc = (T+BT-1)//BT; ch = [(c*BT, min(T, c*BT+BT)) for c in range(nc)]
    pre = []
    for (a0, a1) in ch:
        gam = np.cumsum(d['g'][a0:a1]); L = a1-a0
        Dm = np.exp(gam[:, None]-gam[None, :]); tri = np.tril(np.ones((L, L)), -1); low = np.tril(np.ones((L, L)))
        Lm = d['beta'][a0:a1, None]*(kh[a0:a1] @ kh[a0:a1].T)*Dm*tri
        Ai = np.linalg.inv(np.eye(L)+Lm); Ab = Ai*d['beta'][None, a0:a1]
        P = sc*(qh[a0:a1] @ kh[a0:a1].T)*Dm*low
        pre.append(dict(gam=gam, Ai=rnd(Ai, 'prep'), Ab=rnd(Ab, 'prep'), P=rnd(P, 'prep'), Dm=Dm, L=L))
    # forward sweep
    S = d['h0'].copy(); Sc = []; Vh = []
    for c, (a0, a1) in enumerate(ch):
        p = pre[c]; gam = p['gam']; Sc.append(S.copy())
        X = d['v'][a0:a1] - np.exp(gam)[:, None]*(kh[a0:a1] @ rnd(S, 'sweep'))
        vh = p['Ab'] @ rnd(X, 'sweep'); Vh.append(vh)
        S = np.exp(gam[-1])*S + kh[a0:a1].T @ rnd(np.exp(gam[-1]-gam)[:, None]*vh, 'sweep')
    # reverse sweep
    dS = d['dht'].copy(); dSp = [None]*nc; dVh = [None]*nc
    for c in range(nc-1, -1, -1):
        a0, a1 = ch[c]; p = pre[c]; gam = p['gam']; dSp[c] = dS.copy()
        dvh = np.exp(gam[-1]-gam)[:, None]*(kh[a0:a1] @ rnd(dS, 'sweep')) + p['P'].T @ d['do'][a0:a1]
        dVh[c] = dvh; dv = p['Ab'].T @ rnd(dvh, 'sweep')
        dS = np.exp(gam[-1])*dS + qh[a0:a1].T @ rnd(sc*np.exp(gam)[:, None]*d['do'][a0:a1], 'sweep') \
             - kh[a0:a1].T @ rnd(np.exp(gam)[:, None]*dv, 'sweep')
    dg = np.zeros(T)
    for c, (a0, a1) in enumerate(ch):
        p = pre[c]; gam = p['gam']; L = p['L']; Dm = p['Dm']
        S = rnd(Sc[c], 'S'); dSs = rnd(dSp[c], 'dS'); vh = rnd(Vh[c], 'vh'); dvh = rnd(dVh[c], 'dvh')
        Sx = Sc[c] if 'exactSdS' in R else S; dSx = dSp[c] if 'exactSdS' in R else dSs
        Y = p['Ai'].T @ dvh; Ys = rnd(Y, 'Y'); dO = d['do'][a0:a1]; Q = qh[a0:a1]; Kk = kh[a0:a1]; b = d['beta'][a0:a1]
        eg = np.exp(gam); egl = np.exp(gam[-1]-gam)
        dqi = sc*eg[:, None]*(dO @ S.T); dki = egl[:, None]*(vh @ dSs.T); xn = Ys @ S.T
        low = np.tril(np.ones((L, L))); tri = np.tril(np.ones((L, L)), -1)
        Pd = sc*low*Dm*(dO @ vh.T); Rm = -tri*Dm*(Ys @ vh.T)
        M = Pd*(Q @ Kk.T) + b[:, None]*Rm*(Kk @ Kk.T)
        dgam = (Q*dqi).sum(1) - (Kk*dki).sum(1) - b*eg*(Kk*xn).sum(1) + M.sum(1) - M.sum(0)
        dgam[-1] += np.exp(gam[-1])*(Sx*dSx).sum() + (Kk*dki).sum()
        dg[a0:a1] = np.cumsum(dgam[::-1])[::-1]
    return dg

T, K, V, BT = int(sys.argv[1]) if len(sys.argv) > 1 else 520, 128, 128, 64
variants = {
  'fp64': set(),
  'all bf16 (kernel today)': {'prep', 'sweep', 'S', 'dS', 'vh', 'dvh', 'Y'},
  'exact <S,dS\'>': {'prep', 'sweep', 'S', 'dS', 'vh', 'dvh', 'Y', 'exactSdS'},
  'fp32 S_c, dS\'': {'prep', 'sweep', 'vh', 'dvh', 'Y'},
  'fp32 V^, dV^': {'prep', 'sweep', 'S', 'dS', 'Y'},
  'fp32 S_c, dS\', V^, dV^': {'prep', 'sweep', 'Y'},
  'fp32 S_c,dS\',V^,dV^,Y': {'prep', 'sweep'},
  'only sweeps + prep bf16': {'prep', 'sweep'},
}
res = {k: [] for k in variants}
for seed in range(int(sys.argv[2]) if len(sys.argv) > 2 else 8):
    d = make(T, K, V, seed); ref = token_ref(d); rdt = (ref*d['draw']).sum()
    for name, R in variants.items():
        got = chunk_emu(d, BT, R); res[name].append(((got*d['draw']).sum()-rdt, rdt, np.sqrt(((got-ref)**2).mean())/np.sqrt((ref**2).mean())))
for name, v in res.items():
    e = np.array([x[0] for x in v]); r = np.array([x[1] for x in v]); dgr = np.array([x[2] for x in v])
    print(f"{name:28s} ddt_bias rel RMS {np.sqrt((e**2).mean())/np.sqrt((r**2).mean()):.2e}  dg rel RMS {dgr.mean():.2e}")
if len(sys.argv) > 3:
    for name in ('all bf16 (kernel today)', 'fp32 S_c, dS\', V^, dV^', 'only sweeps + prep bf16'):
        v = res[name]
        print(name, ' '.join(f"{abs(e)/abs(r)*100:.2f}%" for e, r, _ in v))
    print('ref ddt per seed', ' '.join(f"{r:.3f}" for _, r, _ in res['fp64']))
    refs = np.array([r for _, r, _ in res['fp64']])
    for name, R in {'prep only': {'prep'}, 'sweep staging only': {'sweep'},
                    'S, dS, vh, dvh, Y only': {'S', 'dS', 'vh', 'dvh', 'Y'}}.items():
        e = []
        for seed in range(len(refs)):
            d = make(T, K, V, seed)
            e.append((chunk_emu(d, BT, R) * d['draw']).sum() - refs[seed])
        e = np.array(e)
        print(f"{name:24s} abs err RMS {np.sqrt((e**2).mean()):.4f} (|ref| RMS {np.sqrt((refs**2).mean()):.2f})")
