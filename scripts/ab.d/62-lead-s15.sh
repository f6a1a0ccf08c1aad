# Lead, session 15: the forward headline rows with this session's defaults (the backward rows come from the pieces'
# `none` rows): GDN 16/64 1x32768 / 4096x8 / 1x2048 (tiers 1-2), the short varlen prefill GDN 16/32 over 128+96+200+88
# tokens (graph-update-replay), tier 3 GDN 2/8 1x32768, KDA 32/32 1x32768. Own share S15B_SHARE (default 70 s).
s15b_t0=$(date +%s)
s15b_left() { local a=$(( ${S15B_SHARE:-70} - ($(date +%s) - s15b_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
s15b() {  # s15b linattn-args...
  [ "$(s15b_left)" -gt 12 ] || { say "lead-s15b bench $* skipped (no time)"; return; }
  bench 15 none "$@" --commit "$COMMIT"
}
for len in 1x32768 4096x8 1x2048; do s15b bench-cuda --hqk 16 --hv 64 --lengths $len --segments 1 --iters 20 --check 0; done
s15b bench-cuda --hqk 16 --hv 32 --lengths 128,96,200,88 --iters 50 --check 1
s15b bench-cuda --hqk 2 --hv 8 --lengths 1x32768 --segments 0 --iters 30 --check 0
s15b bench-cuda --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 20 --check 0
true
