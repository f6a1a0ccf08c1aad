# Conv forward variants (LINATTN_CONV_CUDA_FWD, src/cuda/conv/conv_run.cuh FwdVariant): same-process
# A/B of the default (v6), the v8 best (x=cp: v6's cp.async loads + bulk y stores, 1.47x FLA at 8192 x
# 65536) and the v9 knobs on it (convtma2; perf-notes "Version 9"): block orders (order=spread / group),
# L2 hints (ld= / st= / pf=), y staging depth (ystage=3 / 4, ring=8x3), rings (8x6, 16x3 with x=cp),
# tensor-map tile stores (y=tile),
# grids (waves=1..4, blocks=4096) against a memcpy of the same bytes, at the two shapes near 1.5x FLA.
# 3 rounds interleaved (round -> shape's variants), both timing methods per row (p50_ms synced,
# p50_ms_queued = FLA's method), y of every variant bitwise against the default (--verify).
# FLA's side: gpu-final's Python step runs only with 2 GPUs; the ratios printed here (fla_over_ours*)
# use FLA's causal_conv1d forward measured in earlier runs: 0.8135 ms at 8192 x 65536 (0.8137 / 0.813,
# h200-convtma / h200-convfwd7) and 0.2077 ms at 8192 x 16384 (the quieter of 0.2077 / 0.2451).
# Rows into bench.jsonl with "env_switch":"conv-ab". About 30-45 s of device time (caps 40 + 20 s).
V="default;memcpy;x=cp;x=cp,order=spread;x=cp,order=group;x=cp,ld=first;x=cp,st=first;x=cp,ld=first,st=first"
V="$V;x=cp,pf=256;x=cp,ystage=3;x=cp,ystage=4;x=cp,ring=8x3,ystage=3;x=cp,ring=8x6;x=cp,ring=16x3"
V="$V;x=cp,waves=1;x=cp,waves=2;x=cp,waves=3;x=cp,waves=4;x=cp,blocks=4096;x=cp,order=spread,ld=first,st=first"
V="$V;x=cp,y=tile"
# One conv-ab process per shape (its rows print at its end: a cut run loses only that shape).
for shape in 8192x65536:40 8192x16384:20; do
  [ "$(left)" -gt $(( ${shape#*:} + 5 )) ] || { say "conv-ab ${shape%:*} skipped (no time)"; continue; }
  timeout "$(cap "${shape#*:}")" env CUDA_VISIBLE_DEVICES=0 "$LA" conv-ab --shapes "${shape%:*}" --variants "$V" \
    --rounds 3 --iters 30 --verify --fla 8192x65536=0.8135,8192x16384=0.2077 2>>"$LOG" |
    sed 's/^{/{"env_switch":"conv-ab",/' >>"$OUT/bench.jsonl" || say "conv-ab ${shape%:*} incomplete"
done
# one line per row in the log: the summary a reader looks for first
grep '"env_switch":"conv-ab"' "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if "p50_ms" not in r: print("conv-ab", r["d"], r["lengths"][0], r["variant"], "ERROR", r.get("error")); continue
    print("conv-ab %dx%d %-40s synced %.4f queued %.4f fla/ours %s / %s equal %s" % (r["d"], r["lengths"][0],
          r["variant"], r["p50_ms"], r.get("p50_ms_queued", 0), r.get("fla_over_ours", "-"),
          r.get("fla_over_ours_queued", "-"), r.get("bitwise_equal_default", "-")))
' >>"$LOG" 2>&1 || true
