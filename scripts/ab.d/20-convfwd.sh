# Conv forward v7 variants (LINATTN_CONV_CUDA_FWD, src/cuda/conv/conv_run.cuh FwdVariant): the one
# device call of convfwd7 timed only the default (a flag bug in conv-ab, fixed since). Same-process
# A/B of every variant against the default and a memcpy of the same bytes, at the two shapes still
# under 1.5x FLA (8192 x 65536, 8192 x 16384); rows into bench.jsonl with "env_switch":"conv-ab".
V="default;memcpy;waves=1;waves=2;blocks=8448;ld=first;st=first;ld=first,st=first;pf=256;ring=8x6"
V="$V;ring=16x3;ring=16x4;ring=32x3;ring=16x3,ld=first,st=first;ring=16x4,ld=first,st=first"
if [ "$(left)" -gt 60 ]; then
  timeout "$(cap 45)" env CUDA_VISIBLE_DEVICES=0 "$LA" conv-ab --shapes 8192x65536,8192x16384 --variants "$V" \
    --rounds 2 --iters 20 --verify 2>>"$LOG" | sed 's/^{/{"env_switch":"conv-ab",/' >>"$OUT/bench.jsonl" ||
    say "conv-ab incomplete"
fi
