# Tier 3 first-segment schedule (LINATTN_CUDA_TIER3_FIRST=1, src/cuda/seg/tier3.cc; perf-notes "CUDA
# tier 3" -> "Where the 0.379 ms goes, and the first-segment schedule"): one sequence; the first
# segment's ordinary forward runs on a side stream beside the state pass of the middle segments, so
# each pass holds s - 1 segments x heads x 2 CTAs (2/8 at s = 9: 128 of 132 SMs, 57 chunk steps per
# pass, vs the default's 64 + 64 at s = 8). Not yet run on a GPU before this piece.
# 1. its tests with the switch exported (test_cuda_tier3 CudaTier3First*: one-sequence layouts vs the
#    reference, tier 1 and the default schedule at s = 2 / 3 / 9, checked to run; a graph capture
#    replayed on new lengths bitwise = eager fixed), cap 40 s;
# 2. A/B bench: GDN 2/8 1x32768 default (planner: s = 8) vs first at s = 9 (two rounds) and at s = 8;
#    KDA 2/8 default s = 8 vs first s = 9; GDN 16/64 1x32768 s = 2 default vs first;
# 3. compute-sanitizer memcheck of one small case (sanitized size), if time is left.
# Rows into bench.jsonl with env_switch; about 45-60 s of device time.
SW=LINATTN_CUDA_TIER3_FIRST
t3_rows0=$(wc -l <"$OUT/bench.jsonl" 2>/dev/null || echo 0)
t3_filter='Dtypes/CudaTier3First.*:CudaTier3FirstGraph.*'
if [ "$(left)" -gt 90 ]; then  # ab_test's steps with a 40 s cap
  echo "### test_cuda_tier3 with $SW=1 (filter $t3_filter)" >>"$OUT/ab-tests.txt"
  env $SW=1 timeout "$(cap 40)" stdbuf -oL -eL "$BIN/test_cuda_tier3" --gtest_brief=1 --gtest_filter="$t3_filter" \
    >>"$OUT/ab-tests.txt" 2>&1
  t3_rc=$?
  if [ $t3_rc -eq 0 ]; then echo "PASS test_cuda_tier3 with $SW=1" | tee -a "$LOG"
  else status=1; echo "FAIL test_cuda_tier3 with $SW=1 (exit $t3_rc)" | tee -a "$LOG"; fi
else
  say "tier3 first: tests skipped (no time)"
fi
T3="--hqk 2 --hv 8 --lengths 1x32768 --iters 30 --check 0 --commit $COMMIT"
T16="--hqk 16 --hv 64 --lengths 1x32768 --iters 20 --check 0 --commit $COMMIT"
for round in 1 2; do
  [ "$(left)" -gt 35 ] || { say "tier3 first: bench round $round skipped (no time)"; break; }
  bench 12 none bench-cuda $T3 --segments 0
  bench 12 $SW=1 bench-cuda $T3 --segments 9
  [ "$round" = 1 ] || continue
  bench 12 $SW=1 bench-cuda $T3 --segments 8
  bench 12 none bench-cuda --op kda $T3 --segments 8
  bench 12 $SW=1 bench-cuda --op kda $T3 --segments 9
  bench 12 none bench-cuda $T16 --segments 2
  bench 12 $SW=1 bench-cuda $T16 --segments 2
done
# one line per row of this piece in the log (graph replay and eager-live p50)
tail -n +"$((t3_rows0 + 1))" "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("mode") not in ("graph-replay", "eager-live"): continue
    print("tier3-first %s %s %s/%s %s segments %s %-28s %-12s p50 %s ms" % (r.get("op"), r.get("pass"), r.get("hqk"),
          r.get("hv"), r.get("lengths"), r.get("segments"), r.get("env_switch"), r.get("mode"), r.get("p50_ms")))
' >>"$LOG" 2>&1 || true
if [ "$(left)" -gt 40 ]; then
  echo "### memcheck $SW=1 CudaTier3First bf16_bt64 + CudaTier3FirstGraph (LINATTN_SANITIZED=1)" >>"$OUT/ab-tests.txt"
  env $SW=1 LINATTN_SANITIZED=1 timeout "$(cap 30)" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/test_cuda_tier3" --gtest_brief=1 \
    --gtest_filter='Dtypes/CudaTier3First.MatchesReferenceTier1AndDefaultSchedule/bf16_bt64:CudaTier3FirstGraph.*' \
    >>"$OUT/ab-tests.txt" 2>&1
  t3_rc=$?
  say "memcheck tier3 first: exit $t3_rc ($(grep 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
  [ "$t3_rc" -eq 0 ] || status=1
else
  say "tier3 first: memcheck skipped (no time)"
fi
