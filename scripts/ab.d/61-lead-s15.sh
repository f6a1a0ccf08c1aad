# Lead, session 15: the bench rows that decide three opt-in variants whose tests already passed in the full suite at
# 5982370 (test_cuda_gdn_bwd's CudaGdnBwdSweepWg5.* / Wg6.*, test_cuda_kda_bwd_chunked's *Chunked16* bitwise
# chunked15): GDN sweeps wg5 / wg6 vs the default wg3 (16/32 1x32768 --saved 1, backward eager p50 and fwd+bwd graph),
# KDA chunked16 vs the default chunked15 (32/32 1x32768 --saved 1), two interleaved rounds each. Own share S15_SHARE
# (default 200 s).
s15_t0=$(date +%s)
s15_left() { local a=$(( ${S15_SHARE:-200} - ($(date +%s) - s15_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
s15_bench() {  # s15_bench CAP SWITCH linattn-args...
  local c=$1 sw=$2 l
  shift 2
  l=$(s15_left)
  [ "$l" -gt "$c" ] || { say "lead-s15 bench $sw $* skipped (no time)"; return; }
  bench "$c" "$sw" "$@" --commit "$COMMIT"
}
S=LINATTN_CUDA_GDN_BWD_SWEEP
for sw in none "$S=wg5" "$S=wg6" "$S=wg6" "$S=wg5" none; do
  s15_bench 15 "$sw" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1
done
for sw in none LINATTN_CUDA_KDA_BWD=chunked16 LINATTN_CUDA_KDA_BWD=chunked16 none; do
  s15_bench 20 "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1
done
true
