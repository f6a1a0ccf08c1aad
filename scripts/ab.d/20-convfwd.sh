# Conv forward: what cudaMemcpy does that SM copies do not, and v10 (convfwd9; perf-notes "Version 10").
# Sourced by gpu-final's ab step (BIN, LA, OUT, LOG, COMMIT, ab_test, cap, left, say). About 75-90 s, every
# step guarded by the time left; results go into the existing files (bench.jsonl, ab-tests.txt, ncu.txt, log.txt).
# 1. conv-probe at 1 GiB and 256 MiB (the bytes of 8192 x 65536 / 8192 x 16384 bf16): cudaMemcpy, memset,
#    read-only, write-only, grid-stride copies (bytes per thread in flight, 32-byte items, st.global.cs), block
#    phases through shared memory (P KiB read, then written; 1 or 2 buffers; st / cs / bulk stores), grid-wide
#    phases (cooperative: every block reads, barrier, every block writes; _nomem = the barriers alone), and the
#    engine test (does a 1 GiB memcpy finish while spinners hold every SM?) -> bench.jsonl, env_switch conv-probe.
# 2. v10 tests: the in-process sweep (bitwise vs v6, every option) + rejected keys; the rest of test_conv_cuda
#    with phase=32 forced (graph replay, awkward lengths, long sequences, dense / varlen).
# 3. conv-ab at 8192 x 65536 and 8192 x 16384: default (v6), memcpy, x=cp,waves=2 (v9's best), v10 variants;
#    3 rounds x 30 calls, synced + queued, --verify (y bitwise vs default), FLA / ours with FLA's earlier times.
# 4. ncu (time-boxed): kernel replay of the probe at 256 MiB (memcpy + copy kernels: a memcpy served by a copy
#    engine shows no kernel; a memcpy kernel shows its name, grid and block), app-range replay of memcpy vs the
#    stride copy (DRAM bytes read / written, L2 hit rate, L2 / DRAM throughput over the range), and the conv
#    forward kernels default vs x=cp,waves=2 vs phase=32 at 8192 x 16384.
# 5. memcheck of the sanitized v10 test; then (if time is left) app-range again with L2 sectors / throughput and
#    the L2 fabric (partition-crossing) metric, names range replay may refuse (their own call).
SWF=LINATTN_CONV_CUDA_FWD
cf_t0=$(date +%s)
cf_used() { echo $(( $(date +%s) - cf_t0 )); }  # this piece's seconds so far: optional steps stop at ~85 s
PROBE_M="memcpy,memset,read,write,stride_v4_u1,stride_v4_u4,stride_v4_u4_cs,stride_v4_u16,stride_v8_u4,stride_v8_u8"
PROBE_M="$PROBE_M,phase_8k_nb1_st,phase_32k_nb1_st,phase_32k_nb1_cs,phase_32k_nb1_bulk,phase_32k_nb2_st"
PROBE_M="$PROBE_M,phase_32k_nb2_bulk,phase_64k_nb1_st,phase_64k_nb1_bulk,phase_192k_nb1_st"
PROBE_M="$PROBE_M,gphase_192k,gphase_192k_nomem,gphase_64k,gphase_96k"
NCU_M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum"
NCU_M="$NCU_M,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed"
NCU_M="$NCU_M,lts__t_sector_hit_rate.pct,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum"

if [ "$(left)" -gt 20 ]; then
  say "conv-probe: memcpy vs copy kernels (1 GiB, 256 MiB) + engine test"
  timeout "$(cap 25)" env CUDA_VISIBLE_DEVICES=0 "$LA" conv-probe --mib 1024,256 --methods "$PROBE_M" --rounds 3 \
    --iters 10 --engine 2>>"$LOG" | sed 's/^{/{"env_switch":"conv-probe",/' >>"$OUT/bench.jsonl" ||
    say "conv-probe incomplete"
  grep '"env_switch":"conv-probe"' "$OUT/bench.jsonl" 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r["kind"] == "probe":
        print("conv-probe %4d MiB %-20s %s" % (r["mib"], r["method"], "ERROR " + r["error"] if "error" in r else
              "synced %.4f queued %.4f ms %s TB/s" % (r["p50_ms"], r["p50_ms_queued"], r.get("tbps_queued", "-"))))
    elif r["kind"] in ("engine", "config", "env"):
        print("conv-probe", json.dumps(r))
' >>"$LOG" 2>&1 || true
fi

# v10 tests: the in-process sweep first (each variant string set and unset by the test), then phase=32 forced on
# the conv tests that do not set the variable themselves
ab_test $SWF=phase=32 test_conv_cuda 'ConvCuda.ForwardPhase*:ConvCuda.ForwardVariantRejects*'
ab_test $SWF=phase=32 test_conv_cuda 'ConvCuda.*:-ConvCuda.ForwardVariant*:ConvCuda.ForwardTma*:ConvCuda.ForwardPhase*'

V="default;memcpy;x=cp,waves=2;phase=32;phase=32,pbuf=1;phase=64,pbuf=1;phase=16,pbuf=3;phase=32,pst=st16"
V="$V;phase=32,waves=2;phase=64,pbuf=1,pst=cs;phase=48,pbuf=1,pst=st16"
for shape in 8192x65536:25 8192x16384:12; do
  [ "$(left)" -gt $(( ${shape#*:} + 10 )) ] || { say "conv-ab ${shape%:*} skipped (no time)"; continue; }
  timeout "$(cap "${shape#*:}")" env CUDA_VISIBLE_DEVICES=0 "$LA" conv-ab --shapes "${shape%:*}" --variants "$V" \
    --rounds 3 --iters 30 --verify --fla 8192x65536=0.8135,8192x16384=0.2077 2>>"$LOG" |
    sed 's/^{/{"env_switch":"conv-ab",/' >>"$OUT/bench.jsonl" || say "conv-ab ${shape%:*} incomplete"
done
grep '"env_switch":"conv-ab"' "$OUT/bench.jsonl" 2>/dev/null | grep '"kind":"case"' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if "p50_ms" not in r: print("conv-ab", r["d"], r["lengths"][0], r["variant"], "ERROR", r.get("error")); continue
    print("conv-ab %dx%d %-32s synced %.4f queued %.4f fla/ours %s / %s equal %s" % (r["d"], r["lengths"][0],
          r["variant"], r["p50_ms"], r.get("p50_ms_queued", 0), r.get("fla_over_ours", "-"),
          r.get("fla_over_ours_queued", "-"), r.get("bitwise_equal_default", "-")))
' >>"$LOG" 2>&1 || true

if command -v ncu >/dev/null 2>&1; then
  if [ "$(left)" -gt 30 ] && [ "$(cf_used)" -lt 60 ]; then
    say "ncu (kernel replay): conv-probe 256 MiB, memcpy + stride / phase / gphase copies (no memcpy row = copy engine)"
    echo "===== ncu kernel replay: conv-probe --range --mib 256 (each method: 1 warm-up + 1 call) =====" >>"$OUT/ncu.txt"
    CUDA_VISIBLE_DEVICES=0 timeout "$(cap 20)" ncu --clock-control none --launch-count 12 --metrics "$NCU_M" \
      --section LaunchStats "$LA" conv-probe --range --mib 256 --methods memcpy,stride_v4_u4,phase_32k_nb1_st,gphase_192k \
      >>"$OUT/ncu.txt" 2>&1 || say "ncu probe kernels: exit $?"
  fi
  if [ "$(left)" -gt 30 ] && [ "$(cf_used)" -lt 65 ]; then
    say "ncu (app-range replay): memcpy vs stride_v4_u4 over a profiler range, 256 MiB"
    echo "===== ncu app-range replay: conv-probe --range --mib 256 --methods memcpy,stride_v4_u4 =====" >>"$OUT/ncu.txt"
    CUDA_VISIBLE_DEVICES=0 timeout "$(cap 20)" ncu --clock-control none --replay-mode app-range --profile-from-start off \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
      "$LA" conv-probe --range --mib 256 --methods memcpy,stride_v4_u4 >>"$OUT/ncu.txt" 2>&1 ||
      say "ncu app-range: exit $?"
  fi
  grep -E "memcpy|Memcpy|No kernels|==PROF==|==ERROR==|==WARNING==" "$OUT/ncu.txt" | tail -n 20 >>"$LOG"
fi

if [ "$(left)" -gt 25 ] && [ "$(cf_used)" -lt 65 ]; then
  echo "### memcheck test_conv_cuda ForwardPhase (sanitized, $SWF in-process)" >>"$OUT/ab-tests.txt"
  LINATTN_SANITIZED=1 timeout "$(cap 20)" compute-sanitizer --tool memcheck --error-exitcode 99 "$BIN/test_conv_cuda" \
    --gtest_filter='ConvCuda.ForwardPhase*' >>"$OUT/ab-tests.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  say "memcheck v10 (phase): exit $rc ($(grep 'ERROR SUMMARY' "$OUT/ab-tests.txt" | tail -n 1))"
fi
if command -v ncu >/dev/null 2>&1 && [ "$(left)" -gt 25 ] && [ "$(cf_used)" -lt 70 ]; then  # names range replay may refuse: their own call
  echo "===== ncu app-range: L2 / DRAM throughput, L2 sectors, L2 fabric (partition-crossing) sectors =====" >>"$OUT/ncu.txt"
  CUDA_VISIBLE_DEVICES=0 timeout "$(cap 15)" ncu --clock-control none --replay-mode app-range --profile-from-start off \
    --metrics "$NCU_M,lts__t_sectors_srcunit_ltcfabric.sum" "$LA" conv-probe --range --mib 256 \
    --methods memcpy,stride_v4_u4 >>"$OUT/ncu.txt" 2>&1 || say "ncu app-range 2: exit $?"
fi
if command -v ncu >/dev/null 2>&1 && [ "$(left)" -gt 30 ] && [ "$(cf_used)" -lt 65 ]; then
  say "ncu: conv forward kernels at 8192 x 16384, default vs x=cp,waves=2 vs phase=32"
  echo "===== ncu: conv-ab 8192x16384 default;x=cp,waves=2;phase=32 (4 calls each) =====" >>"$OUT/ncu.txt"
  CUDA_VISIBLE_DEVICES=0 timeout "$(cap 20)" ncu --clock-control none --kernel-name "regex:fwd_(run|tma|phase)_kernel" \
    --launch-count 12 --metrics "$NCU_M" --section LaunchStats --section Occupancy "$LA" conv-ab --shapes 8192x16384 \
    --variants "default;x=cp,waves=2;phase=32" --rounds 1 --iters 1 >>"$OUT/ncu.txt" 2>&1 || say "ncu conv: exit $?"
fi
say "20-convfwd.sh: $(cf_used) s"
