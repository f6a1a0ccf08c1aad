# Lead, session 12: sanitizers on this session's new defaults and the switch tests the other pieces do not run
# (own share ~75 s): memcheck of the KDA chunked backward (chunk kernel chunked11, the default since session 12),
# racecheck of tier 3 with the tensor-core combine (auto, the default since session 12) and memcheck of the same,
# then test_cuda_gdn_bwd's sweep-switch error test (wg2 / wg3p / wg3pf removed) and the tier-3 combine switch test.
l12_t0=$(date +%s)
l12_left() { local a=$(( 75 - ($(date +%s) - l12_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
l12_san() {  # l12_san TOOL BINARY FILTER CAP
  [ "$(l12_left)" -gt $(( $4 / 2 + 3 )) ] || { say "lead-s12: $1 $2 skipped (no time)"; return; }
  echo "### $1 $2 ($3)" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap "$4")" compute-sanitizer --tool "$1" --error-exitcode 99 "$BIN/$2" \
    --gtest_brief=1 --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || status=1
  say "lead-s12: $1 $2 $3 exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
}
if command -v compute-sanitizer >/dev/null 2>&1; then
  l12_san memcheck test_cuda_kda_bwd_chunked 'Dtypes/CudaKdaBwdChunked.MatchesReferenceAndTokenPath/bf16_bt64' 25
  l12_san racecheck test_cuda_tier3 'Dtypes/CudaTier3Fwd.GdnMatchesReferenceAndTier1/bf16_bt64' 25
  l12_san memcheck test_cuda_tier3 'Dtypes/CudaTier3Fwd.GdnMatchesReferenceAndTier1/bf16_bt64' 15
else
  say "lead-s12: no compute-sanitizer"
fi
ab_test LINATTN_LEAD_S12=1 test_cuda_gdn_bwd 'CudaGdnBwdSweepWg.RemovedOrUnknownSwitchValueIsAnError:CudaGdnBwdSweepWg.Wg3GraphSequence'
true
