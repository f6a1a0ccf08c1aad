# Conv forward v11 (convfwd11; perf-notes "Version 11"): register streaming, LINATTN_CONV_CUDA_FWD=reg (16-byte x
# loads into an 8-row register ring, 16-byte st.global.cs y stores: conv-probe's best copy with the conv in
# between). Sourced by gpu-final's ab step (BIN, LA, OUT, LOG, COMMIT, ab_test, bench, cap, left, say). Its own
# share: ~90 s (piece clock c11_used; every step also guarded by the run's time left).
# 1. tests: the in-process v11 sweep (bitwise vs v6, fp64 reference, every dtype / W / option, awkward lengths) +
#    rejected keys; the other conv tests with reg forced (graph replay == eager, varlen / dense); memcheck of the
#    sanitized v11 test.
# 2. bench round 1 (linattn bench, as gpu-final's conv rows; synced p50): default (v6) vs x=cp,waves=2 (v9's best)
#    vs reg, interleaved per shape, at 8192x65536, 8192x16384, 6144x16384, 8192x4096 forward.
# 3. conv-ab at 8192x65536 and 8192x16384: default, memcpy, x=cp,waves=2 and the v11 knobs (4 / 8 rows in flight in
#    registers, 8 / 16 in per-thread shared-memory slots by cp.async (rx=cp), .cs / plain stores, waves 1 / 2 / 4),
#    3 rounds x 30 calls, synced + queued p50, --verify (y bitwise vs default).
# 4. bench round 2 (same rows), then round 3 while the share lasts.
SW11=LINATTN_CONV_CUDA_FWD
c11_t0=$(date +%s)
c11_used() { echo $(( $(date +%s) - c11_t0 )); }

ab_test $SW11=reg test_conv_cuda 'ConvCuda.ForwardReg*:ConvCuda.ForwardVariantRejects*'
if [ "$(left)" -gt 40 ] && [ "$(c11_used)" -lt 35 ]; then
  ab_test $SW11=reg test_conv_cuda \
    'ConvCuda.*:-ConvCuda.ForwardVariant*:ConvCuda.ForwardTma*:ConvCuda.ForwardPhase*:ConvCuda.ForwardReg*'
fi
if [ "$(left)" -gt 30 ] && [ "$(c11_used)" -lt 40 ]; then
  echo "### memcheck test_conv_cuda ForwardReg (sanitized, $SW11 in-process)" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap 15)" compute-sanitizer --tool memcheck --error-exitcode 99 "$BIN/test_conv_cuda" \
    --gtest_filter='ConvCuda.ForwardReg*' >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  say "memcheck v11 (reg): exit $rc ($(grep 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi

c11_round() {  # c11_round N: one interleaved round of bench rows (default, x=cp,waves=2, reg) per shape
  local shape sw
  for shape in 8192x65536 8192x16384 6144x16384 8192x4096; do
    for sw in none "$SW11=x=cp,waves=2" "$SW11=reg"; do
      if [ "$(left)" -le 30 ] || [ "$(c11_used)" -ge 88 ]; then
        say "convfwd11 bench round $1 cut at $shape $sw"
        return
      fi
      bench 25 "$sw" bench --op conv --backend cuda --json --min-time 0.2 --iters 20 --dtype bf16 \
        --channels "${shape%x*}" --lengths "${shape#*x}" --pass fwd --check off
    done
  done
}
c11_round 1

V11="default;memcpy;x=cp,waves=2;reg;reg=4;reg,yst=plain;reg=4,yst=plain;reg,waves=1;reg,waves=4;reg,rx=cp"
V11="$V11;reg=16,rx=cp;reg=16,rx=cp,yst=plain;reg=16,rx=cp,waves=4"
for shape in 8192x65536:14:60 8192x16384:8:66; do  # shape:cap:start by (piece seconds)
  c11_by=${shape##*:} shape=${shape%:*}
  [ "$(left)" -gt $(( ${shape#*:} + 25 )) ] && [ "$(c11_used)" -lt "$c11_by" ] ||
    { say "convfwd11 conv-ab ${shape%:*} skipped (no time)"; continue; }
  timeout "$(cap "${shape#*:}")" env CUDA_VISIBLE_DEVICES=0 "$LA" conv-ab --shapes "${shape%:*}" --variants "$V11" \
    --rounds 3 --iters 30 --verify 2>>"$LOG" | sed 's/^{/{"env_switch":"conv-ab-v11",/' >>"$OUT/bench.jsonl" ||
    say "convfwd11 conv-ab ${shape%:*} incomplete"
done
grep '"env_switch":"conv-ab-v11"' "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if "p50_ms" not in r: print("conv-ab-v11", r["d"], r["lengths"][0], r["variant"], "ERROR", r.get("error")); continue
    print("conv-ab-v11 %dx%d %-24s synced %.4f queued %.4f equal %s" % (r["d"], r["lengths"][0], r["variant"],
          r["p50_ms"], r.get("p50_ms_queued", 0), r.get("bitwise_equal_default", "-")))
' >>"$LOG" 2>&1 || true
if grep '"env_switch":"conv-ab-v11"' "$OUT/bench.jsonl" 2>/dev/null | grep -q '"bitwise_equal_default":false'; then
  status=1
  say "convfwd11: a variant's y differs from the default's (conv-ab --verify): see the conv-ab-v11 lines"
fi

c11_round 2
[ "$(c11_used)" -lt 62 ] && c11_round 3
grep -E '"env_switch":"(none|'"$SW11"'=[^"]*)"' "$OUT/bench.jsonl" 2>/dev/null | grep '"op":"conv"' |
  grep '"pass":"fwd"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("d") in (6144, 8192) and r.get("lengths", [0])[0] in (4096, 16384, 65536):
        print("convfwd11 bench %dx%d %-32s p50 %.4f ms" % (r["d"], r["lengths"][0], r["env_switch"], r["p50_ms"]))
' >>"$LOG" 2>&1 || true
say "40-convfwd11.sh: $(c11_used) s"
