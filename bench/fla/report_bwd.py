#!/usr/bin/env python3
"""Side-by-side table of `linattn bench-cuda-bwd` and bench_fla_bwd.py JSON lines (GDN and KDA).

usage: report_bwd.py linattn_bwd.jsonl [fla_bwd.jsonl] > table.md  (rows are picked by their "backend";
one combined results file may be given for both arguments)
Per (op, config): linattn backward (eager) ms, forward + backward eager ms, the graph rows (forward +
backward when the op has a CUDA forward, else the backward alone: the "graph pass" column says which),
TFLOP/s of the backward, workspace MiB, check error vs the token-by-token CUDA backward, FLA forward /
backward / forward + backward ms (or its refusal), speedups, and the issue's target.
"""
import json
import os
import sys

# (op, hqk, hv, lengths) -> (pass, ms): issue 6 (GDN backward), issue 7 (KDA forward + backward).
TARGETS = {("gdn", 16, 32, "1x32768"): ("bwd", 2.0), ("kda", 32, 32, "1x32768"): ("fwdbwd", 7.0)}


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
            rows[(r.get("op", "gdn"), r["hqk"], r["hv"], r["lengths"], r["pass"], r["mode"])] = r
        elif r.get("kind") == "error":
            errors[(r.get("op", "gdn"), int(r["hqk"]), int(r["hv"]), r["lengths"])] = r.get("error", "?")
    return env, rows, errors


def ms(r):
    return f"{r['p50_ms']:.3f}" if r else "-"


def main():
    lenv, lin, _ = load(sys.argv[1], "cuda")
    have_fla = len(sys.argv) > 2 and os.path.exists(sys.argv[2])
    fenv, fla, ferr = load(sys.argv[2], "fla") if have_fla else ({}, {}, {})
    print(f"linattn commit {lenv.get('commit', '?')} on {lenv.get('device', '?')}; FLA {fenv.get('fla', '-')} "
          f"(Triton {fenv.get('triton', '-')}, dispatch disabled={fenv.get('dispatch_disabled', '-')})\n")
    print("| op | hqk/hv | lengths | bwd | fwd+bwd eager | graph pass | graph | update+replay (host) | bwd TFLOP/s "
          "| ws MiB | check rel | FLA fwd | FLA bwd | FLA fwd+bwd | FLA peak MiB | x bwd | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({k[:4] for k in lin} | {k[:4] for k in fla} | set(ferr))
    for key in keys:
        b = lin.get(key + ("bwd", "eager-live"))
        fe = lin.get(key + ("fwdbwd", "eager-live"))
        gp = "fwdbwd" if key + ("fwdbwd", "graph-replay") in lin else "bwd"
        fg = lin.get(key + (gp, "graph-replay"))
        fu = lin.get(key + (gp, "graph-update-replay"))
        xw = fla.get(key + ("fwd", "eager-live"))
        xb = fla.get(key + ("bwd", "eager-live"))
        xf = fla.get(key + ("fwdbwd", "eager-live"))
        err = ferr.get(key)
        fla_b = ms(xb) if xb else ("no result*" if err else "-")
        speed = f"{xb['p50_ms'] / b['p50_ms']:.2f}" if (xb and b) else "-"
        tgt_s = "-"
        if key in TARGETS:
            tp, tms = TARGETS[key]
            r = b if tp == "bwd" else fe
            tgt_s = f"{tp} <= {tms} ms: " + ("met" if r and r["p50_ms"] <= tms else ("MISSED" if r else "no row"))
        host = f"{fu['host_ms']:.3f}" if fu else "-"
        print(f"| {key[0]} | {key[1]}/{key[2]} | {key[3]} | {ms(b)} | {ms(fe)} | {gp} | {ms(fg)} | {host} | "
              f"{b['tflops'] if b else '-'} | {b['peak_extra_mib'] if b else '-'} | {b.get('rel_rms_err') if b else '-'} "
              f"| {ms(xw) if xw else '-'} | {fla_b} | {ms(xf) if xf else '-'} | {xb['peak_extra_mib'] if xb else '-'} "
              f"| {speed} | {tgt_s} |")
    for key, e in sorted(ferr.items()):
        print(f"\n*FLA {key[0]} {key[1]}/{key[2]} {key[3]}: {e}")


if __name__ == "__main__":
    main()
