# Lead, session 16: two probes at GDN 16/64 1x2048 (target <= 0.08 ms; tiers 1-2 take 0.100), where the planner keeps
# tiers 1-2 with V-slice 64 (64 heads x 2 slices = 128 CTAs): tier 3 (--segments 2 / 4) and V-slice 32 forced
# (LINATTN_CUDA_GDN_VS=32: 256 CTAs, two per SM, half the N of every chain product). Interleaved, two rounds; then
# 16/64 4096x8 with V-slice 32 / 64 forced beside the default (128 planned -> 64 run). Rows carry "segments" and
# env_switch. Own share S16_SHARE (default 90 s).
s16_t0=$(date +%s)
s16_left() { local a=$(( ${S16_SHARE:-90} - ($(date +%s) - s16_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
s16() {  # s16 ENV linattn-args...
  [ "$(s16_left)" -gt 10 ] || { say "lead-s16 bench $* skipped (no time)"; return; }
  local e=$1; shift
  bench 12 "$e" "$@" --commit "$COMMIT"
}
for r in 1 2; do
  for s in 1 2 4; do s16 none bench-cuda --hqk 16 --hv 64 --lengths 1x2048 --segments $s --iters 30 --check 1; done
  s16 LINATTN_CUDA_GDN_VS=32 bench-cuda --hqk 16 --hv 64 --lengths 1x2048 --segments 1 --iters 30 --check 1
done
for e in none LINATTN_CUDA_GDN_VS=32 LINATTN_CUDA_GDN_VS=64; do
  s16 $e bench-cuda --hqk 16 --hv 64 --lengths 4096x8 --segments 1 --iters 10 --check 0
done
# The rewritten default-path test of the GDN sweeps (session 15, not GPU-run yet): unset runs wg5 at >= 2048 tokens.
ab_test LINATTN_S16_NOOP=1 test_cuda_gdn_bwd 'CudaGdnBwdSweepWg5.DefaultIsWg5'
true
