# GDN forward, persistent chain CTAs (LINATTN_CUDA_GDN_CHAIN=tma3+pers; src/cuda/gdn/gdn_fused_wgp.cu's
# gdn_fused_wgp_pers_kernel, gdn_fused_wgp_common.cuh / gdn_fused_wgp_tma.cuh's PersStream / PersCursor; perf-notes
# "State chain: persistent CTAs (chainp)"): grid = one CTA per SM (capped by the items), each CTA walks its
# (sequence, value head, V-slice) items (static stride, longest first) as one chunk stream: mbarriers set up once, the
# rings load the next item's first chunks during this item's last, hand-off buffers alternate over the stream. Same
# products: expected bitwise == tma3 / v3. Compiled here, never run on a GPU before this piece. Prediction (graph
# p50): 16/64 4096x8 1.33 -> ~1.26-1.28, 2048x16 1.43 -> ~1.27-1.30, 1x32768 equal (~1.25; 128 items = 128 CTAs);
# 16/32 over 128,96,200,88 (256 items, 2 rounds today): -10-14 us on the forward (chain 34 -> ~20-24 us).
# 1. bench default vs tma3+pers interleaved: 4096x8 and 2048x16 two rounds, then 1x32768 and the short 16/32 row
#    (--check 1: each row's eager-live JSON carries the rel error vs the token-by-token kernel, ~1e-2 when right;
#    graph replay vs fixed as the max diff); a hang is cut by each row's cap (its JSON is then missing);
# 2. test_cuda_gdn_fwd's tma3+pers chain cases (fp64 reference; bitwise == v3 and == tma3; the instance ran;
#    PersStreamSameBits: grids capped to 1 / 3 CTAs and a 40-sequence batch over the SMs, bitwise == v3);
# 3. test_cuda_graph's GDN tests with tma3+pers forced, LINATTN_CUDA_WGMMA=1 and LINATTN_CUDA_WGP_VS=64 (so the short
#    layouts take this kernel): replay == eager fixed with the layout changing between replays (grid from N, HV, V).
# Own 90 s.
cpsw=LINATTN_CUDA_GDN_CHAIN
cpv=$cpsw=tma3+pers
cpend=$(( $(date +%s) + 90 ))
cpleft() { local m=$(( cpend - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
for cprow in "4096x8 none" "4096x8 $cpv" "2048x16 $cpv" "2048x16 none" "4096x8 $cpv" "4096x8 none" \
             "2048x16 none" "2048x16 $cpv" "1x32768 none" "1x32768 $cpv" "short $cpv" "short none"; do
  set -- $cprow
  [ "$(cpleft)" -gt 40 ] || { say "chainp bench $cprow skipped (piece time spent; tests go first now)"; continue; }
  case "$1" in
    short) bench 8 "$2" bench-cuda --hqk 16 --hv 32 --lengths 128,96,200,88 --segments 1 --iters 20 --check 1 \
             --commit "$COMMIT" ;;
    *) bench 8 "$2" bench-cuda --hqk 16 --hv 64 --lengths "$1" --segments 1 --iters 20 --check 1 --commit "$COMMIT" ;;
  esac
done
cptest() {  # cptest CAP BINARY FILTER [SWITCH]: the binary (its tests set the chain mode themselves, or SWITCH forced)
  [ "$(cpleft)" -gt $(( $1 + 2 )) ] || { say "chainp: $2 ($3) skipped (no time)"; return; }
  echo "### $2 ($3) ${4:-}" >>"$OUT/ab-tests.txt"
  env ${4:-} timeout "$(cap "$1")" stdbuf -oL -eL "$BIN/$2" --gtest_brief=1 --gtest_filter="$3" >>"$OUT/ab-tests.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "PASS $2 ($3) ${4:-}"; else status=1; say "FAIL $2 ($3) ${4:-} (exit $rc; 124 = cap)"; fi
}
cptest 28 test_cuda_gdn_fwd 'DtypesAndModes/CudaGdnFwdChain.*tma3_pers'
# the pipelined kernel at V-slice 64 even for these short layouts (else mma.sync or the V-slice 32 instance runs)
cptest 8 test_cuda_graph 'CudaGraphGdn*' "$cpv LINATTN_CUDA_WGMMA=1 LINATTN_CUDA_WGP_VS=64"
true
