# Lead, session 15, the final call: the four helper variants of this session in one interleaved bench, their tests run
# by the tests step (full test_cuda_gdn_prep / test_cuda_kda_sweep / test_cuda_kda_bwd_chunked, GPU_FINAL_TESTS) and,
# for test_cuda_gdn_bwd (two 220 s shards in full), the wg11 filter here. Rows (p50 ms):
# - GDN forward 16/64 1x32768 none / prep v10 / v10 / none, 4096x8 none / v10 (LINATTN_CUDA_GDN_PREP=v10, prepv10);
# - GDN backward 16/32 1x32768 --saved 1 none / wg11 / wg11 / none (LINATTN_CUDA_GDN_BWD_CHUNK=wg11, gdnbwd13);
# - KDA backward 32/32 1x32768 --saved 1 none / sweep wg2 / chunked17 / both / both / chunked17 / wg2 / none
#   (LINATTN_CUDA_KDA_SWEEP=wg2, kdasweep3; LINATTN_CUDA_KDA_BWD=chunked17, kdabwd17).
# Own share S15C_SHARE (default 300 s). The pieces 15 / 40 / 41 / 42 hold the same rows with their own tests.
s15c_t0=$(date +%s)
s15c_left() { local a=$(( ${S15C_SHARE:-300} - ($(date +%s) - s15c_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
s15c() {  # s15c CAP SWITCH linattn-args...
  local c=$1 sw=$2
  shift 2
  [ "$(s15c_left)" -gt "$c" ] || { say "lead-s15c bench $sw $* skipped (no time)"; return; }
  bench "$c" "$sw" "$@" --commit "$COMMIT"
}
ab_test LINATTN_S15_NOOP=1 test_cuda_gdn_bwd 'Dtypes/CudaGdnBwd.Wg11*/*_bt64:CudaGdnBwdWg11.*:CudaGdnBwdChunkSwitch.*'
P=LINATTN_CUDA_GDN_PREP=v10
for sw in none $P $P none; do s15c 12 "$sw" bench-cuda --hqk 16 --hv 64 --lengths 1x32768 --segments 1 --iters 20 --check 0; done
for sw in none $P; do s15c 12 "$sw" bench-cuda --hqk 16 --hv 64 --lengths 4096x8 --segments 1 --iters 20 --check 0; done
W=LINATTN_CUDA_GDN_BWD_CHUNK=wg11
for sw in none $W $W none; do
  s15c 15 "$sw" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1
done
S=LINATTN_CUDA_KDA_SWEEP=wg2 C=LINATTN_CUDA_KDA_BWD=chunked17
for sw in none "$S" "$C" "$S $C" "$S $C" "$C" "$S" none; do
  s15c 20 "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1
done
true
