#!/usr/bin/env python3
"""PNG charts from `linattn bench` JSON lines (PERFORMANCE.md section 6 results files).

Usage (needs matplotlib: `pip install matplotlib`):
    python3 bench/plot.py bench/results/cpu-*.jsonl [--out bench/results] [--metric p50_ms|cpu_ms]

For every results file it writes, next to --out:
  <stem>-latency.png      latency per mode against the number of tokens, one panel per
                          (op, pass, backend, dtype, heads) group with more than one length
                          (log-log; the four modes of GRAPH_CONTRACT.md section 9 as lines);
  <stem>-ratio.png        the same, as the ratio of each mode to eager-live (where graph replay
                          stops paying: the break-even length);
  <stem>-utilization.png  latency per mode against the bucket's token utilization, from
                          `--sweep utilization` lines, with the crossover of the summary line;
  <stem>-speedup.png      speedup against peers: a peer backend's lines (fla, ggml, ...) against
                          ours on the same case, and ours against the token-by-token fp32 path
                          (ggml's algorithm) where a line carries speedup_vs_baseline.
A chart with nothing to show is not written. --metric cpu_ms plots process CPU time per call
(the stable measure on a shared, loaded CPU machine) where the lines have it.
"""
import argparse
import collections
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = ["eager-live", "eager-fixed", "graph-replay", "graph-update-replay"]
STYLE = {"eager-live": ("tab:blue", "o"), "eager-fixed": ("tab:orange", "s"),
         "graph-replay": ("tab:green", "^"), "graph-update-replay": ("tab:red", "v")}
OURS = ("cpu", "cuda")


def tokens(lengths):
    """Tokens of a case: [a, b, ...], "LxN" ("1x2048" from bench-cuda too), "a,b,c"; None if unknown."""
    if not isinstance(lengths, str):
        return sum(lengths)
    try:
        if "x" in lengths:
            a, b = (int(x) for x in lengths.split("x"))
            return a * b
        return sum(int(x) for x in lengths.split(","))
    except ValueError:
        return None


def read(path):
    env, cases, summaries = {}, [], []
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        kind = obj.get("kind")
        if kind == "env":  # the first env line wins; later ones (a peer's part) only fill gaps
            env = {**obj, **env}
        elif kind == "case":
            cases.append(obj)
        elif kind == "summary":
            summaries.append(obj)
    return env, cases, summaries


def num_seqs(lengths):
    if not isinstance(lengths, str):
        return len(lengths)
    if "x" in lengths:
        a, b = lengths.split("x")
        return 1 if a == "1" else int(b)  # bench-cuda's "1xT" is one sequence of T
    return len(lengths.split(","))


def group_key(c):
    heads = "" if c["op"] == "conv" else f"{c.get('hqk')}/{c.get('hv')} K{c.get('k')} V{c.get('v')}"
    return (c["op"], c["pass"], c["backend"], c["dtype"], heads)


def panels(n):
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(6.5, 5.2 * cols), 4.2 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def title_of(env):
    return f"{env.get('device', '?')}\ncommit {env.get('commit', '?')}, {str(env.get('date', ''))[:10]}"


def latency_chart(env, cases, metric, out, ratio=False):
    groups = collections.defaultdict(list)
    for c in cases:
        if (c["backend"] in OURS and c.get("sweep") != "utilization" and c.get(metric) is not None
                and tokens(c["lengths"]) is not None):
            groups[group_key(c) + (f"{num_seqs(c['lengths'])} seq",)].append(c)
    groups = {k: v for k, v in groups.items() if len({tokens(c["lengths"]) for c in v}) > 1
              and (not ratio or len({c["mode"] for c in v}) > 1)}
    if not groups:
        return False
    fig, axes = panels(len(groups))
    for ax, (key, cs) in zip(axes, sorted(groups.items())):
        live = {tokens(c["lengths"]): c[metric] for c in cs if c["mode"] == "eager-live"}
        for mode in MODES:
            pts = sorted((tokens(c["lengths"]), c[metric]) for c in cs if c["mode"] == mode)
            if ratio:
                pts = [(t, v / live[t]) for t, v in pts if live.get(t)]
            if pts:
                color, marker = STYLE[mode]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=mode)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens per call")
        if ratio:
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_ylabel(f"{metric.replace('_ms', '')} / eager-live (below 1: faster)")
        else:
            ax.set_yscale("log")
            ax.set_ylabel(metric.replace("_ms", " (ms)"))
        ax.set_title(" ".join(key), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{'time relative to eager-live' if ratio else 'latency per mode'}: {title_of(env)}", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def utilization_chart(env, cases, summaries, metric, out):
    groups = collections.defaultdict(list)
    for c in cases:
        if c.get("sweep") == "utilization" and c.get(metric) is not None:
            groups[group_key(c)].append(c)
    if not groups:
        return False
    fig, axes = panels(len(groups))
    for ax, (key, cs) in zip(axes, sorted(groups.items())):
        for mode in MODES:
            pts = sorted((c["token_util"], c[metric]) for c in cs if c["mode"] == mode)
            if pts:
                color, marker = STYLE[mode]
                ax.plot([p[0] * 100 for p in pts], [p[1] for p in pts], marker=marker, color=color, label=mode)
        for s in summaries:
            if s.get("sweep") == "utilization" and (s["op"], s["pass"], s["backend"], s["dtype"]) == key[:4]:
                u = s.get("graph_wins_from_token_util_cpu" if metric == "cpu_ms" else "graph_wins_from_token_util", -1)
                if u is not None and u > 0:
                    ax.axvline(u * 100, color="gray", linestyle="--", label=f"graph wins from {u:.0%}")
        c0 = cs[0]
        ax.set_xlabel(f"token utilization of the bucket (%), T_max {c0.get('T_max')}, N_max {c0.get('N_max')}")
        ax.set_ylabel(metric.replace("_ms", " (ms)"))
        ax.set_title(" ".join(key), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"bucket utilization: {title_of(env)}", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def speedup_chart(env, cases, out):
    bars = []  # (label, speedup)
    ours = {}
    for c in cases:
        if c["backend"] in OURS:
            ours[(c["op"], c["pass"], c["dtype"], c.get("hqk"), c.get("hv"), json.dumps(c["lengths"]), c["mode"])] = c
    for c in cases:
        if c["backend"] not in OURS:
            o = ours.get((c["op"], c["pass"], c["dtype"], c.get("hqk"), c.get("hv"), json.dumps(c["lengths"]),
                          c.get("mode", "eager-live")))
            if o:
                bars.append((f"{c['op']} {c['pass']} {c['dtype']} {c.get('hqk')}/{c.get('hv')} {c['lengths']}"
                             f"\n{c.get('mode', 'eager-live')} vs {c['backend']}", c["p50_ms"] / o["p50_ms"]))
    for c in cases:
        if c["backend"] in OURS and c.get("speedup_vs_baseline") and c["mode"] == "eager-live":
            bars.append((f"{c['op']} {c['pass']} {c['dtype']} {c.get('hqk')}/{c.get('hv')} {c['lengths']}"
                         f"\nvs token-by-token fp32", c["speedup_vs_baseline"]))
    if not bars:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(bars) + 1.4))
    ax.barh(range(len(bars)), [b[1] for b in bars], color="tab:green")
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    for i, b in enumerate(bars):
        ax.text(b[1], i, f" {b[1]:.2f}x", va="center", fontsize=7)
    ax.set_xlabel("speedup (peer time / our time, same run)")
    ax.invert_yaxis()
    ax.set_title(f"speedup against peers: {title_of(env)}", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=None, help="output folder (default: next to each file)")
    ap.add_argument("--metric", default="p50_ms", choices=["p50_ms", "cpu_ms", "host_ms"])
    a = ap.parse_args()
    wrote = []
    for f in a.files:
        p = pathlib.Path(f)
        env, cases, summaries = read(p)
        out = pathlib.Path(a.out) if a.out else p.parent
        out.mkdir(parents=True, exist_ok=True)
        stem = p.stem + ("" if a.metric == "p50_ms" else "-" + a.metric.replace("_ms", ""))
        for name, ok in (("latency", lambda o: latency_chart(env, cases, a.metric, o)),
                         ("ratio", lambda o: latency_chart(env, cases, a.metric, o, ratio=True)),
                         ("utilization", lambda o: utilization_chart(env, cases, summaries, a.metric, o)),
                         ("speedup", lambda o: speedup_chart(env, cases, o))):
            target = out / f"{stem}-{name}.png"
            if ok(target):
                wrote.append(str(target))
    print("\n".join(wrote) if wrote else "nothing to plot", file=sys.stderr if not wrote else sys.stdout)


if __name__ == "__main__":
    main()
