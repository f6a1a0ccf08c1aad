# Lead, session 9: sanitizers on the new defaults and the training cache (no A/B rows; its own share ~80 s).
# 1. compute-sanitizer racecheck, then memcheck, of the KDA wgmma sweeps (the default since 3d4b025; GDN's
#    wg sweeps once reported hazards on the same kind of hand-off buffer): the sanitized varlen-edge case;
# 2. memcheck of the training-cache tests (forward fills it, backward reads it) on the sanitized graph case.
lv_t0=$(date +%s)
lv_left() { local a=$(( 80 - ($(date +%s) - lv_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
lv_san() {  # lv_san TOOL BINARY FILTER CAP
  [ "$(lv_left)" -gt $(( $4 + 3 )) ] || { say "lead-verify: $1 $2 skipped (no time)"; return; }
  echo "### $1 $2 ($3)" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap "$4")" compute-sanitizer --tool "$1" --error-exitcode 99 "$BIN/$2" \
    --gtest_brief=1 --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || status=1
  say "lead-verify: $1 $2 $3 exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
}
if command -v compute-sanitizer >/dev/null 2>&1; then
  lv_san racecheck test_cuda_kda_sweep 'Dtypes/CudaKdaSweep.WgMatchesReferenceAndMmaSweeps/bf16_bt64' 30
  lv_san memcheck test_cuda_kda_sweep 'Dtypes/CudaKdaSweep.WgMatchesReferenceAndMmaSweeps/bf16_bt64' 20
  lv_san memcheck test_cuda_graph_bwd 'CudaGraphFwdBwd.TrainingCacheReplayEqualsEagerWithoutCache' 20
else
  say "lead-verify: no compute-sanitizer"
fi
true
