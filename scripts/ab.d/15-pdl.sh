# pdl (session 12, issues 12 / 5): Programmatic Dependent Launch on the GDN forward chains, opt-in LINATTN_CUDA_PDL=1
# (launch_pdl in src/cuda/common/launch.h, pdl.cuh; kPdl instances of the seg table, chunk meta, prep v7 (tma3
# records), tma3 state pass, tc combine, tma3 chain (V-slice 64) and gather kernels; perf-notes "PDL on the GDN
# forward chains"). Same kernels, same order: bitwise the plain launches. Compiled here, never run on a GPU.
# Prediction (graph replay): tier 3 2/8 1x32768 0.310 -> ~0.300 ms; short 16/32 128,96,200,88 51 -> ~47 us.
# 1. FIRST (the deciding rows, ~50 s): bench default vs PDL interleaved, two rounds (the order flips in round 2):
#    tier 3 2/8 1x32768 --segments 0, short 16/32 128,96,200,88;
# 2. then the tests with the switch (they set it themselves: on vs off bitwise; eager and graph replay):
#    test_cuda_tier3 CudaTier3Pdl* (+ CudaTier3PdlGraph), test_cuda_gdn_fwd CudaGdnFwdPdl*, then test_cuda_graph GDN
#    and test_cuda_tier3_graph with LINATTN_CUDA_PDL=1 exported (captures / replays with programmatic edges).
# Own clock: ~60 s of benches, ~100 s in all.
pd_t0=$(date +%s)
pd_left() { local a=$(( 100 - ($(date +%s) - pd_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
pd_cap() { local t=$(( $(pd_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
PD_SW="LINATTN_CUDA_PDL=1"
pd_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
pd_bench() {  # pd_bench ENV|none args...
  local e=$1; shift
  [ "$(pd_left)" -gt 45 ] || { say "pdl: bench skipped (no time): $e $*"; return; }
  bench "$(pd_cap 8)" "$e" bench-cuda "$@" --commit "$COMMIT"
}
for pd_round in 1 2; do
  for pd_shape in "2 8 1x32768 0 30" "16 32 128,96,200,88 1 50"; do
    read -r pd_h pd_v pd_len pd_chk pd_it <<<"$pd_shape"
    pd_args=(--hqk "$pd_h" --hv "$pd_v" --lengths "$pd_len" --iters "$pd_it" --check "$pd_chk")
    [ "$pd_len" = 1x32768 ] && pd_args+=(--segments 0)
    if [ "$pd_round" = 1 ]; then pd_bench none "${pd_args[@]}"; pd_bench "$PD_SW" "${pd_args[@]}"
    else pd_bench "$PD_SW" "${pd_args[@]}"; pd_bench none "${pd_args[@]}"; fi
  done
done
tail -n +"$((pd_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("pdl %s/%s %-16s segments %s %-18s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("segments"), r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
pd_test() {  # pd_test CAP ENV|none BINARY FILTER
  [ "$(pd_left)" -gt $(( $1 / 2 + 4 )) ] || { say "pdl: $3 skipped (no time)"; return; }
  echo "### $3 with $2 (filter $4)" >>"$OUT/ab-tests.txt"
  env ${2/#none/} timeout "$(pd_cap "$1")" stdbuf -oL -eL "$BIN/$3" --gtest_brief=1 --gtest_filter="$4" \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $3 ($4) with $2"
  else status=1; say "FAIL $3 ($4) with $2 (exit $rc; 124 = its cap)"; fi
}
pd_test 20 none test_cuda_tier3 'Dtypes/CudaTier3Pdl.*:CudaTier3PdlGraph.*'
pd_test 15 none test_cuda_gdn_fwd 'Dtypes/CudaGdnFwdPdl.*'
pd_test 10 "$PD_SW" test_cuda_graph 'CudaGraphGdn*'
pd_test 10 "$PD_SW" test_cuda_tier3_graph 'CudaTier3Graph.GdnFwdBwdLayoutsReplayEqualsEagerFixed'
say "pdl: done"
true
