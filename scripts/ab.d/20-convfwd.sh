# Conv forward variants (LINATTN_CONV_CUDA_FWD, src/cuda/conv/conv_run.cuh FwdVariant): same-process
# A/B of the default (v6), the v8 bulk-copy configurations (convtma: x=cp = v6's loads + bulk y
# stores was the best at 8192 x 65536, 1.47x FLA; tma = bulk loads and stores) and the v7 rings against
# a memcpy of the same bytes, at the two shapes still near 1.5x FLA (8192 x 65536, 8192 x 16384);
# y of every variant checked bitwise against the default; rows into bench.jsonl with "env_switch":"conv-ab".
V="default;memcpy;x=cp;x=cp,y=st16;tma;ring=16x3;ring=8x6,ld=first,st=first;waves=1"
if [ "$(left)" -gt 60 ]; then
  timeout "$(cap 45)" env CUDA_VISIBLE_DEVICES=0 "$LA" conv-ab --shapes 8192x65536,8192x16384 --variants "$V" \
    --rounds 2 --iters 20 --verify 2>>"$LOG" | sed 's/^{/{"env_switch":"conv-ab",/' >>"$OUT/bench.jsonl" ||
    say "conv-ab incomplete"
fi
