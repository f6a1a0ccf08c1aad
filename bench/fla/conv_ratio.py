#!/usr/bin/env python3
"""Ratio table of the conv benchmark: FLA's causal_conv1d p50 (fla-conv.jsonl, bench_fla_conv.py) over
ours (bench.jsonl rows of `linattn bench --op conv --backend cuda --json`, eager-live), per shape, pass and
our env switch (the best p50 of each switch's rounds). Usage: conv_ratio.py BENCH.jsonl FLA.jsonl
"""
import json
import sys


def rows(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("kind") == "case" and r.get("op") == "conv":
                    yield r


def main(bench, fla):
    theirs = {(r["d"], r["lengths"][0], r["pass"]): r["p50_ms"] for r in rows(fla)}
    ours = {}
    for r in rows(bench):
        if r.get("backend") != "cuda" or r.get("mode", "eager-live") != "eager-live":
            continue
        k = (r["d"], r["lengths"][0], r["pass"], r.get("env_switch", "none"))
        ours[k] = min(ours.get(k, float("inf")), r["p50_ms"])
    print("| D | T | pass | our switch | ours ms | FLA ms | FLA / ours |")
    print("|---|---|---|---|---|---|---|")
    worst = None
    for (d, t, p, sw), ms in sorted(ours.items()):
        f = theirs.get((d, t, p))
        if f is None:
            continue
        x = f / ms
        if sw == "none":
            worst = x if worst is None else min(worst, x)
        print(f"| {d} | {t} | {p} | {sw} | {ms:.4f} | {f:.4f} | {x:.2f}x |")
    print(f"worst ratio of the default over every shape and pass: {worst:.3f}x" if worst else "no matching rows")


if __name__ == "__main__":
    main(*sys.argv[1:3])
