#!/usr/bin/env python3
"""Digest of ncu's per-instruction SASS page (`ncu --import R --page source --csv --print-source sass`).

For each distinct kernel in the CSV (first launch only): a compact CSV (address, SASS, stall samples,
instructions executed, shared-memory wavefronts and their excess, global L2 sectors and their excess,
then per-reason stall samples) and a text summary: stall reasons summed over the kernel, and the
top instructions by stall samples with their reasons. Usage: ncu_sass_digest.py IN.csv OUTDIR TAG.
"""
import csv, os, re, sys

KEEP = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
        "Instructions Executed", "L1 Wavefronts Shared", "L1 Wavefronts Shared Excessive",
        "L2 Theoretical Sectors Global", "L2 Theoretical Sectors Global Excessive"]


def num(s):
    try:
        return float(s.replace(",", "")) if s else 0.0
    except ValueError:
        return 0.0


def kernels(path):
    name, header, rows = None, None, []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                if name is not None:
                    yield name, header, rows
                name, header, rows = row[1], None, []
            elif header is None and row and row[0] == "Address":
                header = row
            elif header is not None and row:
                rows.append(row)
    if name is not None:
        yield name, header, rows


def short(name):
    m = re.search(r"::(\w+_kernel)<(.*?)>\(", name)
    return (m.group(1) + "<" + m.group(2).replace("__nv_bfloat16", "bf16").replace(" ", "").replace("(int)", "").replace("(bool)", "") + ">") if m else name[:60]


def main(src, outdir, tag):
    os.makedirs(outdir, exist_ok=True)
    seen, summary = set(), []
    for name, header, rows in kernels(src):
        k = short(name)
        if k in seen or header is None:
            continue
        seen.add(k)
        idx = {h: i for i, h in enumerate(header)}
        stall = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
        tot = {h: sum(num(r[idx[h]]) for r in rows) for h in stall}
        used = [h for h in stall if tot[h] > 0]
        safe = re.sub(r"[^A-Za-z0-9_]+", "_", k).strip("_")
        with open(os.path.join(outdir, f"{tag}-{safe}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(KEEP + used)
            for r in rows:
                w.writerow([r[idx[h]] if h in idx else "" for h in KEEP + used])
        samples = sum(num(r[idx[KEEP[2]]]) for r in rows) or 1.0
        execd = sum(num(r[idx["Instructions Executed"]]) for r in rows)
        summary.append(f"## {k}\n{name}\nSASS instructions {len(rows)}, warp instructions executed {execd:.3g}, "
                       f"stall samples {samples:.0f}\nstall reasons (% of samples): " +
                       ", ".join(f"{h[6:]} {100 * tot[h] / samples:.1f}" for h in sorted(used, key=lambda h: -tot[h])
                                 if tot[h] / samples >= 0.005))
        top = sorted(rows, key=lambda r: -num(r[idx[KEEP[2]]]))[:40]
        summary.append("top instructions by stall samples (addr, % samples, executed, top reasons, SASS):")
        for r in top:
            s = num(r[idx[KEEP[2]]])
            why = sorted(((num(r[idx[h]]), h[6:]) for h in used), reverse=True)[:3]
            summary.append(f"  {r[idx['Address']]:>6} {100 * s / samples:5.2f}% {r[idx['Instructions Executed']]:>10} "
                           f"[{', '.join(f'{n} {int(v)}' for v, n in why if v > 0)}] {r[idx['Source']].strip()}")
        summary.append("")
    with open(os.path.join(outdir, f"{tag}-summary.txt"), "w") as f:
        f.write("\n".join(summary))


if __name__ == "__main__":
    main(*sys.argv[1:4])
