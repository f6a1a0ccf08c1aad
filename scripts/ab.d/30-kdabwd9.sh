# KDA backward chunk kernel chunked8 (LINATTN_CUDA_KDA_BWD=chunked8; opt-in, kda/kda_bwd_chunk5.cu = MODE 8 of
# kda_bwd_chunk2_kernel.cuh, pieces in kda_bwd_chunk8_parts.cuh; perf-notes "chunked8"): the default chunked7
# with the lower-left 8 x 8 quadrant of each diagonal 16 x 16 intra block on the split-TF32 path, so the fp32
# per-element loops walk <= 8 steps per warp instead of 16 (V = 128; V = 64 runs chunked7's code). Not bitwise
# equal to chunked7 (other summation order): held to the same bars. Not yet run on a GPU.
# This piece (its own clock: 90 s of device time, every step guarded):
# 1. test_cuda_kda_bwd_chunked (the binary runs every variant itself, chunked8 included: fp64 reference, the
#    first kernel, padding, finiteness, dh0, extreme gates; "[kdabwd9]" lines: chunked8 ==|!= chunked7);
# 2. bench default (chunked7) vs chunked8, KDA 32/32 1x32768, interleaved (default, chunked8, chunked8,
#    default), then 1x4096 (default, chunked8) while time is left;
# 3. compute-sanitizer memcheck of IsDeterministic/bf16_bt64 (sanitized variants include chunked8) if time is left.
# Flip rule: every test passing and chunked8 faster at 1x32768 in both rounds -> gdn_bwd.cc
# `mode == "chunked5" ? 5 : mode == "chunked6" ? 6 : mode == "chunked8" ? 8 : 7` -> `... : mode == "chunked7" ? 7 : 8`.
K9=LINATTN_CUDA_KDA_BWD
k9_t0=$(date +%s)
k9_left() { local a=$(( 90 - ($(date +%s) - k9_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
if [ "$(k9_left)" -gt 40 ]; then
  k9_f='*MatchesReferenceAndTokenPath/bf16_bt64:*MatchesReferenceAndTokenPath/fp16_bt32:*IsDeterministic/bf16_bt64'
  k9_f="$k9_f:CudaKdaBwdChunkedExtreme.*"
  echo "### test_cuda_kda_bwd_chunked with $K9=chunked8 (filter $k9_f)" >>"$OUT/ab-tests.txt"
  env $K9=chunked8 timeout "$(cap 30)" stdbuf -oL -eL "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 \
    --gtest_filter="$k9_f" >>"$OUT/ab-tests.txt" 2>&1
  k9_rc=$?
  if [ $k9_rc -eq 0 ]; then say "PASS test_cuda_kda_bwd_chunked (chunked8 in every case)"
  elif [ $k9_rc -eq 124 ]; then say "CUT test_cuda_kda_bwd_chunked (chunked8) at its 30 s cap: see ab-tests.txt"
  else status=1; say "FAIL test_cuda_kda_bwd_chunked (chunked8 in every case; exit $k9_rc)"; fi
  grep '\[kdabwd9\]' "$OUT/ab-tests.txt" | sort | uniq -c | tee -a "$LOG"
else
  say "kdabwd9 chunked8 tests skipped (no time)"
fi
for k9_sw in none $K9=chunked8 $K9=chunked8 none; do  # interleaved: default, chunked8, chunked8, default
  k9_l=$(k9_left)
  [ "$k9_l" -gt 15 ] || { say "kdabwd9 bench $k9_sw 1x32768 skipped (piece time spent)"; continue; }
  bench $(( k9_l < 40 ? k9_l : 40 )) "$k9_sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 \
    --iters 5 --commit "$COMMIT"
done
for k9_sw in none $K9=chunked8; do
  k9_l=$(k9_left)
  [ "$k9_l" -gt 10 ] || { say "kdabwd9 bench $k9_sw 1x4096 skipped (piece time spent)"; continue; }
  bench $(( k9_l < 40 ? k9_l : 40 )) "$k9_sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x4096 \
    --iters 5 --commit "$COMMIT"
done
if [ "$(k9_left)" -gt 20 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  echo "### memcheck test_cuda_kda_bwd_chunked IsDeterministic/bf16_bt64 (sanitized variants incl. chunked8)" \
    >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap $(( $(k9_left) - 2 )))" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/test_cuda_kda_bwd_chunked" --gtest_brief=1 --gtest_filter='*IsDeterministic/bf16_bt64' \
    >>"$OUT/ab-tests.txt" 2>&1
  k9_rc=$?
  if [ $k9_rc -eq 0 ]; then say "PASS memcheck test_cuda_kda_bwd_chunked IsDeterministic/bf16_bt64 (chunked8)"
  elif [ $k9_rc -eq 124 ]; then say "CUT memcheck IsDeterministic/bf16_bt64 (chunked8): time cap, no verdict"
  else status=1; say "FAIL memcheck IsDeterministic/bf16_bt64 (chunked8; exit $k9_rc)"; fi
else
  say "kdabwd9 memcheck skipped (no time or no compute-sanitizer)"
fi
