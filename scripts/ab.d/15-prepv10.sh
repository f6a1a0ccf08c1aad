# prepv10 (session 15, issue 5): GDN prep v10, opt-in LINATTN_CUDA_GDN_PREP=v10 (src/cuda/gdn/gdn_prep_v7.cu,
# gdn_prep_parts.cuh; perf-notes "Prep v10"): v8 on an instruction diet, bitwise v8 (BT 64 unsplit; BT 32 and the
# split run v8). Compiled here, never run on a GPU. Prediction: ~-15% warp instructions per CTA (25.4k -> ~21.5k),
# prep 505 -> ~440-475 us, forward graph 16/64 1x32768 ~-3 to -5%, 4096x8 ~-2 to -4%.
# 1. bench (the rows that decide): 16/64 1x32768 none / v10 / v10 / none, then 4096x8 none / v10;
# 2. test_cuda_gdn_prep's v10 tests (they set the switch themselves): bitwise v8 first (also negative betas), then
#    the fp64 bars, tma3 records, P fused, backward and training cache, bf16 first.
# Own clock: ~90 s.
pv10_t0=$(date +%s)
pv10_left() { local a=$(( 90 - ($(date +%s) - pv10_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
pv10_cap() { local t=$(( $(pv10_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
PV10_SW="LINATTN_CUDA_GDN_PREP=v10"
pv10_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
pv10_bench() {  # pv10_bench ENV|none LENGTHS
  [ "$(pv10_left)" -gt 30 ] || { say "prepv10: bench skipped (no time): $*"; return; }
  bench "$(pv10_cap 12)" "$1" bench-cuda --op gdn --hqk 16 --hv 64 --lengths "$2" --segments 1 --iters 20 --check 0 \
    --commit "$COMMIT"
}
for pv10_sw in none "$PV10_SW" "$PV10_SW" none; do pv10_bench "$pv10_sw" 1x32768; done
for pv10_sw in none "$PV10_SW"; do pv10_bench "$pv10_sw" 4096x8; done
tail -n +"$((pv10_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("prepv10 %s/%s %-10s %-28s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
pv10_test() {  # pv10_test CAP FILTER
  [ "$(pv10_left)" -gt $(( $1 / 2 + 4 )) ] || { say "prepv10: test_cuda_gdn_prep ($2) skipped (no time)"; return; }
  echo "### test_cuda_gdn_prep (filter $2)" >>"$OUT/ab-tests.txt"
  timeout "$(pv10_cap "$1")" stdbuf -oL -eL "$BIN/test_cuda_gdn_prep" --gtest_brief=1 --gtest_filter="$2" \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS test_cuda_gdn_prep ($2)"
  else status=1; say "FAIL test_cuda_gdn_prep ($2) (exit $rc; 124 = its cap)"; fi
}
pv10_test 25 'CudaGdnPrepV10Occupancy.*:Dtypes/CudaGdnPrepV10.SwitchIsRead/bf16*:Dtypes/CudaGdnPrepV10.SameBitsAsV8*/bf16*'
pv10_test 25 'Dtypes/CudaGdnPrepV10.MatchesReference/bf16*:Dtypes/CudaGdnPrepV10.SameBitsWithTma3Records/bf16*'
pv10_test 20 'Dtypes/CudaGdnPrepV10.SameBitsWithP*/bf16*:Dtypes/CudaGdnPrepV10.BackwardSameBitsAsV8/bf16*:Dtypes/CudaGdnPrepV10.TrainingCacheSameBitsAsV8/bf16*'
pv10_test 20 'Dtypes/CudaGdnPrepV10.*/fp16*'
true
