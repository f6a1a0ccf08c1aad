# KDA backward chunk kernels chunked8 / chunked9 (LINATTN_CUDA_KDA_BWD=chunked8 | chunked9; opt-in,
# kda/kda_bwd_chunk5.cu = MODE 8 / 9 of kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk8_parts.cuh; perf-notes
# "chunked8"). chunked8 = the default chunked7 with the lower-left 8 x 8 quadrant of each diagonal 16 x 16 intra
# block on the split-TF32 path (per-element loops <= 8 steps per warp instead of 16; V = 128, V = 64 runs
# chunked7's code): not bitwise equal to chunked7, held to the same bars. chunked9 = chunked8 with the fp32 raw
# gates as one cp.async tile issued before the head's tiles: expected bitwise equal to chunked8. Not yet run on a GPU.
# This piece (its own clock: 90 s of device time, every step guarded):
# 1. test_cuda_kda_bwd_chunked (the binary runs every variant itself, chunked8 / 9 included: fp64 reference, the
#    first kernel, padding, finiteness, dh0, extreme gates; "[kdabwd9]" lines: chunked8 ==|!= chunked7 (expected
#    !=), chunked9 ==|!= chunked8 (expected ==));
# 2. bench KDA 32/32 1x32768, interleaved: default (chunked7), chunked9, chunked8, chunked8, chunked9, default;
#    then 1x4096 (default, chunked9, chunked8) while time is left;
# 3. compute-sanitizer memcheck of IsDeterministic/bf16_bt64 (sanitized variants include chunked8 / 9) if time is left.
# Flip rule: every test passing and the variant faster at 1x32768 in both rounds -> gdn_bwd.cc, the route's
# last `: 7` -> `: 9` (chunked9, if it beats chunked8 and logs `==`) or `: 8` (chunked8), with `mode == "chunked7"
# ? 7 :` added in front of it so chunked7 stays selectable.
K9=LINATTN_CUDA_KDA_BWD
k9_t0=$(date +%s)
k9_left() { local a=$(( 90 - ($(date +%s) - k9_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
if [ "$(k9_left)" -gt 40 ]; then
  k9_f='*MatchesReferenceAndTokenPath/bf16_bt64:*MatchesReferenceAndTokenPath/fp16_bt32:*IsDeterministic/bf16_bt64'
  k9_f="$k9_f:CudaKdaBwdChunkedExtreme.*"
  echo "### test_cuda_kda_bwd_chunked with $K9=chunked9 (filter $k9_f)" >>"$OUT/ab-tests.txt"
  env $K9=chunked9 timeout "$(cap 25)" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k9_f" >>"$OUT/ab-tests.txt" 2>&1
  k9_rc=$?
  if [ $k9_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked8 / 9 in every case)"
  elif [ $k9_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked8 / 9) at its 25 s cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked8 / 9 in every case; exit $k9_rc)"; fi
  grep '\[kdabwd9\]' "$OUT/ab-tests.txt" | sort | uniq -c | tee -a "$LOG"
else
  say "kdabwd9 chunked8 / 9 tests skipped (no time)"
fi
for k9_sw in none $K9=chunked9 $K9=chunked8 $K9=chunked8 $K9=chunked9 none; do  # interleaved, two rounds
  k9_l=$(k9_left)
  [ "$k9_l" -gt 12 ] || { say "kdabwd9 bench $k9_sw 1x32768 skipped (piece time spent)"; continue; }
  bench $(( k9_l < 40 ? k9_l : 40 )) "$k9_sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 \
    --iters 5 --commit "$COMMIT"
done
for k9_sw in none $K9=chunked9 $K9=chunked8; do
  k9_l=$(k9_left)
  [ "$k9_l" -gt 8 ] || { say "kdabwd9 bench $k9_sw 1x4096 skipped (piece time spent)"; continue; }
  bench $(( k9_l < 40 ? k9_l : 40 )) "$k9_sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x4096 \
    --iters 5 --commit "$COMMIT"
done
if [ "$(k9_left)" -gt 20 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  echo "### memcheck test_cuda_kda_bwd_chunked IsDeterministic/bf16_bt64 (sanitized variants incl. chunked8 / 9)" \
    >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap $(( $(k9_left) - 2 )))" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 --gtest_filter='*IsDeterministic/bf16_bt64' \
    >>"$OUT/ab-tests.txt" 2>&1
  k9_rc=$?
  if [ $k9_rc -eq 0 ]; then say "PASS memcheck test_cuda_kda_bwd_chunked IsDeterministic/bf16_bt64 (chunked8 / 9)"
  elif [ $k9_rc -eq 124 ] || [ $k9_rc -eq 127 ]; then
    say "CUT memcheck IsDeterministic/bf16_bt64 (chunked8 / 9; exit $k9_rc: time cap or no sanitizer), no verdict"
  else status=1; say "FAIL memcheck IsDeterministic/bf16_bt64 (chunked8 / 9; exit $k9_rc)"; fi
else
  say "kdabwd9 memcheck skipped (no time or no compute-sanitizer)"
fi
