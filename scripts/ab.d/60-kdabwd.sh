# KDA backward chunk kernel chunked7 (LINATTN_CUDA_KDA_BWD=chunked7; opt-in, kda/kda_bwd_chunk5.cu =
# MODE 7 of kda_bwd_chunk2_kernel.cuh; perf-notes "chunked7"): the default chunked5 with the k-steps of
# its six mma_tile products rolled (same fragments, same mma order: expected bitwise equal to chunked5).
# bf16 BT 64 V 128: 5456 -> 5184 SASS instructions, spills 604 / 612 -> 332 / 292 B. Not yet run on a GPU.
# This piece (its own cap: 60 s of device time)
# 1. test_cuda_kda_bwd_chunked bf16 BT 64 (the binary runs every variant itself, chunked7 included; its
#    "[kdabwd8]" lines say whether chunked7 == chunked5 bitwise);
# 2. bench default (chunked5) vs chunked7, KDA 32/32 1x32768, then the other order if time is left
#    (each row set capped at 25 s: 10 s cut the rows short last time).
# Flip rule: the test passing, chunked7 bitwise equal to chunked5 and faster at 1x32768 in every round
# -> gdn_bwd.cc: `mode == "chunked7" ? 7 : mode == "chunked6" ? 6 : 5` -> `... : 7` (the last 5).
KB=LINATTN_CUDA_KDA_BWD
kb_t0=$(date +%s)
kb_left() { local a=$(( 110 - ($(date +%s) - kb_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
if [ "$(kb_left)" -gt 30 ]; then
  echo "### test_cuda_kda_bwd_chunked with $KB=chunked7 (filter *MatchesReferenceAndTokenPath/bf16_bt64)" \
    >>"$OUT/ab-tests.txt"
  env $KB=chunked7 timeout "$(cap 22)" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter='*MatchesReferenceAndTokenPath/bf16_bt64' >>"$OUT/ab-tests.txt" 2>&1
  kb_rc=$?
  if [ $kb_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked with $KB=chunked7"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked with $KB=chunked7 (exit $kb_rc)"; fi
  grep '\[kdabwd8\]' "$OUT/ab-tests.txt" | sort | uniq -c | tee -a "$LOG"
else
  say "kdabwd chunked7 tests skipped (no time)"
fi
for kb_sw in none $KB=chunked7 $KB=chunked7 none; do  # interleaved: default, chunked7, chunked7, default
  kb_l=$(kb_left)
  [ "$kb_l" -gt 12 ] || { say "kdabwd bench $kb_sw 1x32768 skipped (piece time spent)"; continue; }
  bench $(( kb_l < 25 ? kb_l : 25 )) "$kb_sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 \
    --iters 10 --commit "$COMMIT"
done
