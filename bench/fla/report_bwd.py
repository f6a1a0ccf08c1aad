#!/usr/bin/env python3
"""Side-by-side table of `linattn bench-cuda-bwd` and bench_fla_bwd.py JSON lines.

usage: report_bwd.py linattn_bwd.jsonl [fla_bwd.jsonl] > table.md  (rows are picked by their "backend";
one combined results file may be given for both arguments)
Per config: linattn backward (eager) ms, forward + backward eager / graph-replay / graph-update-replay
ms, TFLOP/s of the backward, workspace MiB, check error vs the token-by-token CUDA backward, FLA
backward and forward + backward ms (or its refusal), speedups, and the issue's target.
"""
import json
import os
import sys

TARGETS = {(16, 32, "1x32768"): 2.0}


def load(path, backend):
    env, rows, errors = {}, {}, {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("backend") != backend:
            continue
        if r.get("kind") == "env":
            env = r
        elif r.get("kind") == "case":
            rows[(r["hqk"], r["hv"], r["lengths"], r["pass"], r["mode"])] = r
        elif r.get("kind") == "error":
            errors[(int(r["hqk"]), int(r["hv"]), r["lengths"])] = r.get("error", "?")
    return env, rows, errors


def ms(r):
    return f"{r['p50_ms']:.3f}" if r else "-"


def main():
    lenv, lin, _ = load(sys.argv[1], "cuda")
    have_fla = len(sys.argv) > 2 and os.path.exists(sys.argv[2])
    fenv, fla, ferr = load(sys.argv[2], "fla") if have_fla else ({}, {}, {})
    print(f"linattn commit {lenv.get('commit', '?')} on {lenv.get('device', '?')}; FLA {fenv.get('fla', '-')} "
          f"(Triton {fenv.get('triton', '-')}, dispatch disabled={fenv.get('dispatch_disabled', '-')})\n")
    print("| hqk/hv | lengths | bwd | fwd+bwd eager | fwd+bwd graph | update+replay | bwd TFLOP/s | ws MiB "
          "| check rel | FLA bwd | FLA fwd+bwd | x bwd | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({k[:3] for k in lin}, key=lambda k: (k[0], k[1], k[2]))
    for key in keys:
        b = lin.get(key + ("bwd", "eager-live"))
        fe = lin.get(key + ("fwdbwd", "eager-live"))
        fg = lin.get(key + ("fwdbwd", "graph-replay"))
        fu = lin.get(key + ("fwdbwd", "graph-update-replay"))
        xb = fla.get(key + ("bwd", "eager-live"))
        xf = fla.get(key + ("fwdbwd", "eager-live"))
        err = ferr.get(key)
        fla_b = ms(xb) if xb else ("no result*" if err else "-")
        speed = f"{xb['p50_ms'] / b['p50_ms']:.2f}" if (xb and b) else "-"
        tgt = TARGETS.get(key)
        tgt_s = "-" if tgt is None else (f"<= {tgt} ms: " + ("met" if b and b["p50_ms"] <= tgt else "MISSED"))
        host = f"{fu['host_ms']:.3f}" if fu else "-"
        print(f"| {key[0]}/{key[1]} | {key[2]} | {ms(b)} | {ms(fe)} | {ms(fg)} | {host} | "
              f"{b['tflops'] if b else '-'} | {b['peak_extra_mib'] if b else '-'} | {b.get('rel_rms_err') if b else '-'} "
              f"| {fla_b} | {ms(xf) if xf else '-'} | {speed} | {tgt_s} |")
    for key, e in sorted(ferr.items()):
        print(f"\n*FLA {key[0]}/{key[1]} {key[2]}: {e}")


if __name__ == "__main__":
    main()
