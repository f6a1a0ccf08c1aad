# Lead, session 11: the defaults flipped at 1ec4943's A/B against their predecessors, interleaved, two rounds:
# GDN backward 16/32 1x32768 with the training cache: new (sweep wg3 + chunk wg7) vs old (wg + wg4) vs each old half
# alone; GDN forward 16/64 1x32768: prep v7 (new) vs v6. Own share LA_SHARE (default 110 s).
la_t0=$(date +%s)
la_left() { local a=$(( ${LA_SHARE:-110} - ($(date +%s) - la_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
la_bench() {  # la_bench SWITCH(ES) linattn-args...
  local sw=$1 l
  shift
  l=$(la_left)
  [ "$l" -gt 8 ] || { say "lead-ab bench $sw $* skipped (no time)"; return; }
  bench $(( l < 20 ? l : 20 )) "$sw" "$@" --commit "$COMMIT"
}
la_old="LINATTN_CUDA_GDN_BWD_SWEEP=wg LINATTN_CUDA_GDN_BWD_CHUNK=wg4"
for la_r in 1 2; do
  for sw in none "$la_old" LINATTN_CUDA_GDN_BWD_SWEEP=wg LINATTN_CUDA_GDN_BWD_CHUNK=wg4; do
    la_bench "$sw" bench-cuda-bwd --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1
  done
  for sw in none LINATTN_CUDA_GDN_PREP=v6; do
    la_bench "$sw" bench-cuda --hqk 16 --hv 64 --lengths 1x32768 --segments 1 --iters 20 --check 0
  done
done
true
