# prepsplit (session 12, issue 5): GDN prep v7 split, opt-in LINATTN_CUDA_GDN_PREP_SPLIT=auto|1|2|4|8
# (src/cuda/gdn/gdn_prep_v7.cu, gdn_prep_parts.cuh; perf-notes "Prep split"): grid (chunk rows, H, S), each CTA the
# front half (q / k, Gram) as unsplit and G / S value heads; auto = the largest S dividing G whose capacity grid
# fits one wave of resident CTAs. Same expressions: bitwise the unsplit prep. Compiled here, never run on a GPU.
# Prediction (graph replay): 16/32 128,96,200,88 ~51 -> ~43 us (prep 19 -> ~11, auto S 2); 16/32 64x16 and
# 16/64 1x2048: auto picks S 1 (equal rows).
# 1. bench default vs auto interleaved, two rounds (16/32 short, 16/32 64x16, 16/64 1x2048), then 16/64 short
#    (auto S 2 of G 4) and forced S 2 at 16/64 1x2048 (out of one wave: the cost of the recomputed front half);
# 2. test_cuda_gdn_prep: the split tests (they set the switch themselves: bitwise vs unsplit v7 at short varlen
#    shapes with sentinel rows, GVA 1 / 2 / 4, BT 64 / 32, bf16 / fp16, P in the fused kernel, tma3 records,
#    backward, training cache; the switch, the pick, occupancy);
# 3. test_cuda_graph GDN with LINATTN_CUDA_GDN_PREP_SPLIT=2 forced (replay with changed lengths = eager bitwise),
#    then test_cuda_graph_bwd's training-cache case with it.
# Own clock: ~90 s.
ps_t0=$(date +%s)
ps_left() { local a=$(( 90 - ($(date +%s) - ps_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
ps_cap() { local t=$(( $(ps_left) - 3 )); [ "$t" -gt "$1" ] && t=$1; echo $(( t > 1 ? t : 1 )); }
PS_SW="LINATTN_CUDA_GDN_PREP_SPLIT=auto"
ps_rows0=$( { wc -l <"$OUT/bench.jsonl"; } 2>/dev/null || echo 0)
ps_bench() {  # ps_bench ENV|none HQK HV LENGTHS CHECK
  [ "$(ps_left)" -gt 45 ] || { say "prepsplit: bench skipped (no time): $*"; return; }
  bench "$(ps_cap 7)" "$1" bench-cuda --hqk "$2" --hv "$3" --lengths "$4" --iters 50 --check "$5" --commit "$COMMIT"
}
for ps_round in 1 2; do
  for ps_shape in "16 32 128,96,200,88 1" "16 32 64x16 0" "16 64 1x2048 0"; do
    set -- $ps_shape
    if [ "$ps_round" = 1 ]; then ps_bench none "$@"; ps_bench "$PS_SW" "$@"
    else ps_bench "$PS_SW" "$@"; ps_bench none "$@"; fi
  done
done
ps_bench none 16 64 128,96,200,88 1
ps_bench "$PS_SW" 16 64 128,96,200,88 1
ps_bench LINATTN_CUDA_GDN_PREP_SPLIT=2 16 64 1x2048 0
tail -n +"$((ps_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("prepsplit %s/%s %-16s %-36s %-12s p50 %s ms" % (r.get("hqk"), r.get("hv"), r.get("lengths"),
          r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
ps_test() {  # ps_test CAP ENV|none BINARY FILTER
  [ "$(ps_left)" -gt $(( $1 / 2 + 4 )) ] || { say "prepsplit: $3 skipped (no time)"; return; }
  echo "### $3 with $2 (filter $4)" >>"$OUT/ab-tests.txt"
  env ${2/#none/} timeout "$(ps_cap "$1")" stdbuf -oL -eL "$BIN/$3" --gtest_brief=1 --gtest_filter="$4" \
    >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $3 ($4) with $2"
  else status=1; say "FAIL $3 ($4) with $2 (exit $rc; 124 = its cap)"; fi
}
ps_test 30 none test_cuda_gdn_prep \
  'CudaGdnPrepSplit.*:Dtypes/CudaGdnPrepV6.SplitSameBitsAsV7/*:Dtypes/CudaGdnPrepTma3.Split*:Dtypes/CudaGdnPrepV6.Split*/bf16_bt64'
ps_test 10 LINATTN_CUDA_GDN_PREP_SPLIT=2 test_cuda_graph 'CudaGraphGdn*'
ps_test 20 LINATTN_CUDA_GDN_PREP_SPLIT=2 test_cuda_graph_bwd 'CudaGraphFwdBwd.TrainingCache*'
ps_test 20 none test_cuda_gdn_prep 'Dtypes/CudaGdnPrepV6.Split*-*SplitSameBitsAsV7*:*bf16_bt64'
true
