#!/usr/bin/env python3
"""Markdown tables from the JSON lines of bench/fla/py_vs_fla.py and bench/e2e/hybrid_prefill.py
(docs/python.md quotes them). Usage: report.py PY_VS_FLA.jsonl [E2E.jsonl]"""
import json
import sys


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def shape(r):
    if r["op"] == "conv":
        return f"D {r['d']}, T {r['lengths']}"
    return f"{r['hqk']}/{r['hv']}, {r['lengths']}"


def worst(d):
    """The largest rel RMS among the output and gradients, with its name."""
    if not d:
        return "-"
    n, (mx, rr) = max(d.items(), key=lambda kv: kv[1][1])
    return f"{rr:.2e} ({n})"


def py_vs_fla(path):
    rs = [r for r in rows(path) if r.get("kind") == "case"]
    print("| op | hqk/hv or D, lengths | pass | backend | p50 ms | p95 ms | FLA p50 / linattn p50 | worst rel RMS vs FLA | worst rel RMS vs fp32 ref | error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    by = {(r["op"], shape(r), r["pass"], r["backend"]): r for r in rs}
    for (op, sh, p, b), r in by.items():
        fla = by.get((op, sh, p, "fla"), {})
        sp = ""
        if b == "linattn" and fla.get("p50_ms") and r.get("p50_ms"):
            sp = f"{fla['p50_ms'] / r['p50_ms']:.2f}x"
        print(f"| {op} | {sh} | {p} | {b} | {r.get('p50_ms', '-')} | {r.get('p95_ms', '-')} | {sp} | "
              f"{worst(r.get('vs_fla') or r.get('vs_linattn'))} | {worst(r.get('vs_ref'))} | "
              f"{(r.get('error') or '')[:120]} |")


def e2e(path):
    rs = rows(path)
    print("| tokens (seqs) | impl | mode | TTFT p50 ms | p95 ms | tokens/s | torch peak extra MiB | device used MiB | out rel vs linattn eager | error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        if r.get("kind") != "case":
            continue
        print(f"| {r['tokens']} ({r['seqs']}) | {r['impl']} | {r['mode']} | {r.get('ttft_p50_ms', '-')} | "
              f"{r.get('ttft_p95_ms', '-')} | {r.get('tokens_per_s', '-')} | {r.get('torch_peak_extra_mib', '-')} | "
              f"{r.get('device_used_mib', '-')} | {r.get('out_rel_vs_linattn_eager', r.get('out_rel_vs_own_eager', '-'))} | "
              f"{(r.get('error') or '')[:120]} |")
    sp = [r for r in rs if r.get("kind") == "speedup"]
    if sp:
        print("\n| tokens (seqs) | FLA / linattn, eager | graph | best vs best |")
        print("|---|---|---|---|")
        for r in sp:
            s = r["fla_over_linattn"]
            print(f"| {r['tokens']} ({r['seqs']}) | {s.get('eager', '-')} | {s.get('graph', '-')} | {s.get('best_vs_best', '-')} |")


if __name__ == "__main__":
    py_vs_fla(sys.argv[1])
    if len(sys.argv) > 2:
        print()
        e2e(sys.argv[2])
