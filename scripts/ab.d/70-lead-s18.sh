# Lead, session 18: the KDA gate reduce (1024 threads a head, session 18) by its ncu duration (66 us at 32/32 1x32768
# before, ncu h200-ncu-deep-20261202-s16-75a0119), and where the short varlen prefill's update-replay time goes: an
# nsys trace of GDN 16/32 over 128+96+200+88 tokens in graph-update-replay (per-kernel start / end on the GPU, the
# gaps between the copy kernel and the graph's kernels), into $OUT/s18-*.txt. Own share S18_SHARE (default 90 s).
s18_t0=$(date +%s)
s18_left() { local a=$(( ${S18_SHARE:-90} - ($(date +%s) - s18_t0) )) b=$(left); [ "$a" -lt "$b" ] && echo "$a" || echo "$b"; }
if [ "$(s18_left)" -gt 30 ]; then
  say "s18: ncu durations of the KDA backward's kernels (32/32 1x32768, training cache)"
  timeout "$(cap 45)" ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name "regex:gate_reduce|sweep|chunk" \
    --launch-count 6 "$LA" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 1 --saved 1 \
    >"$OUT/s18-ncu-kdabwd.txt" 2>&1 || say "s18 ncu kda: exit $?"
  grep -E "^  [a-zA-Z_].*\(|gpu__time_duration" "$OUT/s18-ncu-kdabwd.txt" | tee -a "$LOG"
fi
if [ "$(s18_left)" -gt 25 ] && command -v nsys >/dev/null; then
  say "s18: nsys trace of the short prefill's graph-update-replay"
  timeout "$(cap 40)" nsys profile -t cuda --cuda-graph-trace=node -o /tmp/s18-short -f true \
    "$LA" bench-cuda --hqk 16 --hv 32 --lengths 128,96,200,88 --iters 30 --check 0 >"$OUT/s18-nsys-run.txt" 2>&1 ||
    say "s18 nsys: exit $?"
  timeout "$(cap 30)" nsys stats -r cuda_gpu_trace -f csv -o /tmp/s18-trace /tmp/s18-short.nsys-rep >/dev/null 2>&1
  f=$(ls /tmp/s18-trace*gpu_trace*.csv 2>/dev/null | head -1)
  [ -n "$f" ] && tail -n 400 "$f" >"$OUT/s18-short-gpu-trace.csv" && say "s18 trace: $(wc -l <"$f") rows"
elif ! command -v nsys >/dev/null; then
  say "s18: no nsys on this machine"
fi

true
