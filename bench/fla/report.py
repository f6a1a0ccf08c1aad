#!/usr/bin/env python3
"""Side-by-side table of `linattn bench-cuda` and bench_fla.py JSON lines (PERFORMANCE.md sections 3-4).

usage: report.py linattn.jsonl fla.jsonl > table.md   (GDN and KDA rows: the op is part of the key)
Per config: linattn eager-live / graph-replay / graph-update-replay (host-inclusive) ms, FLA eager /
graph ms, speedups (FLA / linattn, eager vs eager and graph vs graph), TFLOP/s and % of the measured
bf16 matmul ceiling, workspace vs FLA's peak extra memory, and the PERFORMANCE.md target if any.
"""
import json
import os
import sys

TARGETS = {("gdn", 16, 64, "1x32768"): 1.2, ("gdn", 16, 64, "4096x8"): 0.75, ("gdn", 16, 64, "1x2048"): 0.08,
           ("gdn", 2, 8, "1x32768"): 0.30, ("kda", 32, 32, "1x32768"): 2.0}


def load(path):
    env, rows = {}, {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("kind") == "env":
            env = r
        elif r.get("kind") == "case":
            rows[(r.get("op", "gdn"), r["hqk"], r["hv"], r["lengths"], r["mode"])] = r
    return env, rows


def main():
    lenv, lin = load(sys.argv[1])
    fenv, fla = load(sys.argv[2]) if len(sys.argv) > 2 and os.path.exists(sys.argv[2]) else ({}, {})
    peak = fenv.get("peak_tflops") or 790.0
    print(f"linattn commit {lenv.get('commit', '?')} on {lenv.get('device', '?')}; FLA {fenv.get('fla', '-')} "
          f"(dispatch disabled={fenv.get('dispatch_disabled', '-')}); measured bf16 matmul {peak} TFLOP/s, "
          f"copy {fenv.get('copy_tbps', '-')} TB/s\n")
    print("| op | hqk/hv | lengths | linattn eager | linattn graph | update+replay (host) | FLA eager | FLA graph "
          "| x eager | x graph | TFLOP/s (% peak) | ws MiB / FLA MiB | target | check rel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({k[:4] for k in lin})
    for k in keys:
        e, g, u = (lin.get(k + (m,)) for m in ("eager-live", "graph-replay", "graph-update-replay"))
        fe, fg = fla.get(k + ("eager-live",)), fla.get(k + ("graph-replay",))
        f = lambda r, key="p50_ms": f"{r[key]:.4f}" if r else "-"
        ratio = lambda a, b: f"{b['p50_ms'] / a['p50_ms']:.2f}" if a and b else "-"
        tf = f"{g['tflops']:.1f} ({100 * g['tflops'] / peak:.1f}%)" if g else "-"
        mem = f"{e['peak_extra_mib']:.0f} / {fe['peak_extra_mib']:.0f}" if e and fe else "-"
        tgt = TARGETS.get(k)
        tgt_s = "-" if tgt is None or not g else f"<= {tgt} ms: {'met' if g['p50_ms'] <= tgt else 'MISSED'}"
        rel = e.get("rel_rms_err") if e else None
        chk = f"{rel:.2e}" if isinstance(rel, (int, float)) else "-"
        print(f"| {k[0]} | {k[1]}/{k[2]} | {k[3]} | {f(e)} | {f(g)} | {f(u, 'host_ms')} | {f(fe)} | {f(fg)} | "
              f"{ratio(e, fe)} | {ratio(g, fg)} | {tf} | {mem} | {tgt_s} | {chk} |")


if __name__ == "__main__":
    main()
