# GDN backward chunk kernel, variants wg9 / wg9ps / wg9p / wg9d (LINATTN_CUDA_GDN_BWD_CHUNK=wg9 | wg9ps | wg9p | wg9d;
# src/cuda/gdn/gdn_bwd_chunk_wg.cu; perf-notes "Chunk kernel: row scalars one round trip deep (gdnbwd11)"): wg7 (the
# default) with each head's row scalars (gam, beta, the finish's gate / beta draws) split over 8 warps by kind, one
# global round trip per thread where wg7's warps 2-3 make four in a row before the head's first barrier, head 0's
# loads issued ahead of its tiles and head 1's with them (head 1's first barrier waits for no global load), the last
# finish after the epilogue; wg9ps wg9 in persistent CTAs (the next item's tiles load under this one's tail); wg9p
# the row scalars in wg6; wg9d wg9 on wg8d. Values bitwise equal to wg7 (= wg4).
# 1. bench 16/32 1x32768 --saved 1 (bwd eager-live p50 is the row to read; fwdbwd graph-replay too):
#    none, wg9, wg9ps, wg9ps, wg9, none (two interleaved rounds), then wg9p, wg9d, wg9d, wg9p while >= 70 s left.
# 2. tests (BT 64 only: BT 32 never takes the wgmma kernel): test_cuda_gdn_bwd's Wg9 tests (fp64 reference, bitwise
#    == wg7 on every case + the long GVA varlen case, the kernel ran, determinism, graph sequence) with wg9
#    exported, and the switch-error test (~50 s); then the Wg9ps, Wg9p (~60 s each: also capped grids) and Wg9d
#    ones while time is left. A FAIL voids that variant's rows.
# Own clock: G11_SHARE seconds (default 90: the six deciding rows and wg9's tests; 300 fits everything).
G11=LINATTN_CUDA_GDN_BWD_CHUNK
g11_end=$(( $(date +%s) + ${G11_SHARE:-90} ))
g11_mine() { local m=$(( g11_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g11_bench() {  # g11_bench MIN_S SWITCH: one row while the piece has >= MIN_S s left
  [ "$(g11_mine)" -gt "$1" ] || { say "gdnbwd11 bench $2 skipped (piece time spent)"; return; }
  bench 12 "$2" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
for sw in none "$G11=wg9" "$G11=wg9ps" "$G11=wg9ps" "$G11=wg9" none; do g11_bench 50 "$sw"; done
for sw in "$G11=wg9p" "$G11=wg9d" "$G11=wg9d" "$G11=wg9p"; do g11_bench 70 "$sw"; done
g11_test() {  # g11_test MIN_S VARIANT FILTER: skipped (not failed) when the piece has < MIN_S s left
  [ "$(g11_mine)" -gt "$1" ] || { say "gdnbwd11 $2 tests skipped (no time)"; return; }
  shift
  echo "### test_cuda_gdn_bwd with $G11=$1 ($2)" >>"$OUT/ab-tests.txt"
  env $G11="$1" timeout "$(cap "$(g11_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter="$2" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd with $G11=$1"
  else
    status=1; say "FAIL test_cuda_gdn_bwd with $G11=$1 (exit $rc; 124 = the cap): $1 bench rows void"
  fi
}
g11_d=Dtypes/CudaGdnBwd
g11_test 15 wg9 "$g11_d.Wg9MatchesReferenceAndWg7/*_bt64:$g11_d.Wg9IsDeterministic/*_bt64:CudaGdnBwdWg9.*:CudaGdnBwdChunkSwitch.*"
g11_test 60 wg9ps "$g11_d.Wg9psMatchesReferenceAndWg7/*_bt64:$g11_d.Wg9psIsDeterministic/*_bt64:CudaGdnBwdWg9ps.*"
g11_test 60 wg9p "$g11_d.Wg9pMatchesReferenceAndWg4/*_bt64:$g11_d.Wg9pIsDeterministic/*_bt64:CudaGdnBwdWg9p.*"
g11_test 45 wg9d "$g11_d.Wg9dMatchesReferenceAndWg7/*_bt64:CudaGdnBwdWg9d.*"
true
