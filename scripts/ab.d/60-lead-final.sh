# Lead, sessions 11-14: the headline configs with this session's defaults (graph replay rows of the default only):
# GDN forward 16/64 (1x32768, 4096x8, 1x2048), 16/32, tier 3 2/8 and 4/16, KDA 32/32, the short varlen prefill
# (GDN 16/32 and KDA 32/32 over 128+96+200+88 tokens, GDN 64x16: the graph-update-replay rows), backward and
# forward + backward of GDN 16/32 and KDA 32/32 with the training cache. Own share LF_SHARE (default 300 s).
lf_t0=$(date +%s)
lf_left() { local a=$(( ${LF_SHARE:-300} - ($(date +%s) - lf_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
lf_bench() {  # lf_bench SWITCH linattn-args...
  local sw=$1 l
  shift
  l=$(lf_left)
  [ "$l" -gt 8 ] || { say "lead-final bench $sw $* skipped (no time)"; return; }
  bench $(( l < 25 ? l : 25 )) "$sw" "$@" --commit "$COMMIT"
}
# Session 14: the rows that confirm this session's flips against the previous defaults, interleaved (LF_FLIPS=0
# skips them): PDL auto (the default) vs LINATTN_CUDA_PDL=1 (session 13's default) at GDN 16/64 1x32768 (two rounds)
# and 4096x8, tier 3 2/8 and the short forward (both keep PDL under auto: equal rows expected); the GDN backward's chunk
# kernel wg9d vs wg7 and the KDA backward's chunked15 vs chunked14 (one row each: their A/B ran two rounds at 5bd3b72 / 4e4abfa).
# Then the headline rows.
if [ "${LF_FLIPS:-1}" = 1 ]; then
  lf_bench LINATTN_CUDA_GDN_BWD_CHUNK=wg7 bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1
  lf_bench LINATTN_CUDA_KDA_BWD=chunked14 bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1
  for sw in none LINATTN_CUDA_PDL=1 LINATTN_CUDA_PDL=1 none; do
    lf_bench "$sw" bench-cuda --hqk 16 --hv 64 --lengths 1x32768 --segments 1 --iters 20 --check 0
  done
  for sw in none LINATTN_CUDA_PDL=1; do
    lf_bench "$sw" bench-cuda --hqk 16 --hv 64 --lengths 4096x8 --segments 1 --iters 20 --check 0
    lf_bench "$sw" bench-cuda --hqk 2 --hv 8 --lengths 1x32768 --segments 0 --iters 30 --check 0
    lf_bench "$sw" bench-cuda --hqk 16 --hv 32 --lengths 128,96,200,88 --iters 50 --check 1
  done
fi
lf_bench none bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1
for len in 4096x8 1x2048; do lf_bench none bench-cuda --hqk 16 --hv 64 --lengths $len --segments 1 --iters 20 --check 1; done
lf_bench none bench-cuda --hqk 16 --hv 32 --lengths 1x32768 --iters 20 --check 1
lf_bench none bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1
lf_bench none bench-cuda --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 20 --check 1
lf_bench none bench-cuda --hqk 4 --hv 16 --lengths 1x32768 --segments 0 --iters 30 --check 0
lf_bench none bench-cuda --hqk 16 --hv 32 --lengths 64x16 --iters 50 --check 1
lf_bench none bench-cuda --op kda --hqk 32 --hv 32 --lengths 128,96,200,88 --iters 50 --check 1
lf_bench none bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10
lf_bench none bench-cuda --op kda --hqk 32 --hv 32 --lengths 4096x8 --iters 20 --check 1
true
