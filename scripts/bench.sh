#!/usr/bin/env bash
# The performance comparison of issue 5, in one run on one machine with the
# same shapes and thread count for everybody: attnrun (layers and graph
# executor), ONNX Runtime (onnxruntime-node) and PyTorch (Debian's 1.13) on
# the seeds' split-heads multi-head attention (d 768, 12 heads, causal,
# B=4, T=512); attnrun's GEMM against OpenBLAS and gonum at 1024³; a sweep
# T = 128 ... 8192 of time and peak RSS; and single-head attention at
# T = 16384. It prints progress on stderr and, on stdout, a markdown block
# for docs/performance.md with the ratios against the issue's targets.
#
#   scripts/bench.sh                 # about 3 minutes on 2 cores
#   QUICK=1 scripts/bench.sh         # a smoke run: 1 round, short timings, sweep to T=1024
#   ROUNDS=9 TIME=3 scripts/bench.sh # more rounds, longer timings
#   KEEP=/tmp/bench scripts/bench.sh # keep every tool's raw output there
#
# The machine is shared and its speed drifts, so the four engines of the
# main comparison run in turns, ROUNDS times; each reports its median
# latency per turn, and the table shows the median of those. Every timing
# warms up, then runs until TIME seconds have passed (at least 3 runs).
#
# OpenBLAS: Debian's numpy and PyTorch call libblas.so.3, the reference BLAS
# unless OpenBLAS is installed (apt-get install libopenblas0-pthread). This
# script puts OpenBLAS first on LD_LIBRARY_PATH for the Python processes
# only, so it does not depend on which BLAS alternative the system selects.
set -uo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
TIME=${TIME:-1.5}
SWEEP_MAX=${SWEEP_MAX:-8192}
# Single products per round, about TIME seconds of each (with the benchmark's
# untimed first call), as the numpy and PyTorch timings.
GEMM_SAMPLES=${GEMM_SAMPLES:-100}
GONUM_SAMPLES=${GONUM_SAMPLES:-8}
CONTEXT=2048 # context_length of the PyTorch export: its mask costs CONTEXT² bytes in the file
if [ "${QUICK:-}" = 1 ]; then
  ROUNDS=1 TIME=0.3 SWEEP_MAX=1024 GEMM_SAMPLES=20 GONUM_SAMPLES=2
fi
OPENBLAS_DIR=/usr/lib/x86_64-linux-gnu/openblas-pthread
ORT_HOME=${ORT_HOME:-$HOME/.cache/attnrun/ort}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=${KEEP:-$work/logs}
mkdir -p "$logs"
say() { echo "bench: $*" >&2; }
die() { say "$*"; exit 1; }

bash scripts/install-reference-tools.sh || die "could not install the reference tools"
go build -o "$work/attnrun" ./cmd/attnrun || die "go build failed"
"$work/attnrun" bench --help >/dev/null 2>&1 || die "this attnrun has no bench command"
go test -c -o "$work/kernels.test" ./internal/kernels || die "go test -c ./internal/kernels failed"
/usr/bin/python3 testdata/bench/torch_bench.py export --out "$work/onnx" --context "$CONTEXT" >"$logs/export.log" 2>&1 ||
  die "PyTorch export failed: $(tail -3 "$logs/export.log")"

pylib=""
if [ -e "$OPENBLAS_DIR/libblas.so.3" ]; then
  pylib=$OPENBLAS_DIR
else
  say "OpenBLAS is not installed (apt-get install libopenblas0-pthread): numpy and PyTorch use the reference BLAS"
fi
# The Python processes: PyTorch's intra-op threads and OpenBLAS's both THREADS.
py() { LD_LIBRARY_PATH=$pylib OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS /usr/bin/python3 "$@"; }

# kv KEY: the value of KEY=value in the line on stdin.
kv() { grep -o "$1=[^ ]*" | tail -1 | cut -d= -f2; }
# median: the median of the numbers on stdin, one per line ("nan" for a failed run is left out).
median() { grep -E '^[0-9.]+([eE][-+]?[0-9]+)?$' | sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
# larger A B: the larger of two numbers, "nan" counting as missing.
larger() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan") print b; else if (b == "nan" || a + 0 > b + 0) print a; else print b}'; }
# fmt1 X: X with one decimal, two below 10, three significant digits below 1.
fmt1() { awk -v x="$1" 'BEGIN {if (x == "" || x == "nan") print "n/a"; else if (x < 1) printf "%.3g\n", x; else if (x < 10) printf "%.2f\n", x; else printf "%.1f\n", x}'; }
# cell X: a table cell: X with one decimal, "–" when not run, "n/a" when it failed.
cell() { if [ "$1" = - ]; then echo "–"; else fmt1 "$1"; fi; }
# verdict OK: met or not met.
verdict() { if [ "$1" = 1 ]; then echo "met"; else echo "**not met**"; fi; }

# attnrun_run LOG ARGS...: one attnrun bench; prints "median_ms p10_ms peak_rss_mib min_ms", or "nan nan nan nan".
attnrun_run() {
  local log=$1
  shift
  if "$work/attnrun" bench "$@" --threads "$THREADS" --time "${TIME}s" >"$log" 2>&1; then
    echo "$(tail -1 "$log" | kv median_ms) $(sed -n 's/^latency.* p10 \([0-9.]*\),.*/\1/p' "$log")" \
      "$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$log") $(sed -n 's/^latency.* min \([0-9.]*\),.*/\1/p' "$log")"
  else
    say "attnrun bench $* failed: $(tail -2 "$log" | tr '\n' ' ')"
    echo "nan nan nan nan"
  fi
}
# tool_run LOG COMMAND...: one ort_bench.mjs or torch_bench.py run; prints "median_ms p10_ms peak_rss_mib min_ms".
tool_run() {
  local log=$1
  shift
  if "$@" >"$log" 2>&1; then
    echo "$(tail -1 "$log" | kv median_ms) $(tail -1 "$log" | kv p10_ms) $(tail -1 "$log" | kv peak_rss_mib) $(tail -1 "$log" | kv min_ms)"
  else
    say "$* failed: $(tail -2 "$log" | tr '\n' ' ')"
    echo "nan nan nan nan"
  fi
}
# ms_rss: keeps the median and the peak RSS of a run's "median p10 rss".
ms_rss() { awk '{print $1, $3}'; }
ort() { node testdata/bench/ort_bench.mjs "$@" --threads "$THREADS" --time "$TIME" --ort "$ORT_HOME"; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# 1. Multi-head attention, B=4, T=512, d=768, in turns.
shape=4,512,768
for r in $(seq "$ROUNDS"); do
  say "multi-head attention $shape, round $r of $ROUNDS"
  attnrun_run "$logs/mha_layers_$r.log" testdata/bench/mha_768.yaml --shape $shape >>"$work/mha_layers"
  attnrun_run "$logs/mha_executor_$r.log" "$work/onnx/mha_768.onnx" --shape $shape >>"$work/mha_executor"
  tool_run "$logs/mha_ort_$r.log" ort "$work/onnx/mha_768.onnx" --shape $shape >>"$work/mha_ort"
  tool_run "$logs/mha_torch_$r.log" py testdata/bench/torch_bench.py mha --shape $shape --threads "$THREADS" --time "$TIME" --context "$CONTEXT" >>"$work/mha_torch"
done
gflop=$(sed -n 's/^work *\([0-9.]*\) GFLOP.*/\1/p' "$logs/mha_layers_1.log")
isa=$(sed -n 's/^threads.*kernels \(.*\)/\1/p' "$logs/mha_layers_1.log")
for e in layers executor ort torch; do
  eval "mha_$e=$(cut -d' ' -f1 "$work/mha_$e" | median)"
  eval "mha_${e}_p10=$(cut -d' ' -f2 "$work/mha_$e" | median)"
  eval "mha_${e}_rss=$(cut -d' ' -f3 "$work/mha_$e" | median)"
  eval "mha_${e}_best=$(cut -d' ' -f4 "$work/mha_$e" | grep -v nan | sort -g | head -1)"
done

# 2. GEMM 1024³: attnrun's kernels and gonum (go test benchmarks, one product
# per sample), OpenBLAS (numpy and PyTorch, one product per sample).
for r in $(seq "$ROUNDS"); do
  say "GEMM 1024³, round $r of $ROUNDS"
  for e in "$isa" gonum; do
    samples=$GEMM_SAMPLES
    [ "$e" = gonum ] && samples=$GONUM_SAMPLES
    "$work/kernels.test" -test.run '^$' -test.bench "^BenchmarkGemm\$/^$e\$/^n=1024\$" -test.cpu "$THREADS" \
      -test.benchtime 1x -test.count "$samples" >"$logs/gemm_${e}_$r.log" 2>&1 || say "kernels benchmark failed: $(tail -2 "$logs/gemm_${e}_$r.log")"
  done
  py testdata/bench/torch_bench.py gemm --n 1024 --threads "$THREADS" --time "$TIME" >"$logs/gemm_blas_$r.log" 2>&1 ||
    say "torch_bench.py gemm failed: $(tail -2 "$logs/gemm_blas_$r.log")"
  # BenchmarkGemm/avx512/n=1024-2  1  7012345 ns/op  153.1 GFLOP/s  76.5 GFLOP/cpu-s
  for e in "$isa" gonum; do
    awk -v e="$e" '$1 ~ "^BenchmarkGemm/" e "/n=1024" {for (i = 1; i < NF; i++) if ($(i+1) == "GFLOP/s") print $i}' "$logs/gemm_${e}_$r.log" >"$work/gemm_samples"
    echo "$(median <"$work/gemm_samples") $(sort -g "$work/gemm_samples" | tail -1)" >>"$work/gemm_${e/$isa/attnrun}"
  done
  for e in numpy torch; do
    echo "$(grep "^$e " "$logs/gemm_blas_$r.log" | kv gflops) $(grep "^$e " "$logs/gemm_blas_$r.log" | kv best_gflops)" >>"$work/gemm_$e"
  done
done
for e in attnrun gonum numpy torch; do
  eval "gemm_$e=$(cut -d' ' -f1 "$work/gemm_$e" | median)"
  eval "gemm_${e}_best=$(cut -d' ' -f2 "$work/gemm_$e" | sort -g | tail -1)"
done
blas=$(sed -n 's/^blas=//p' "$logs/gemm_blas_1.log")
gemm_openblas=$(larger "$gemm_numpy" "$gemm_torch")
gemm_openblas_best=$(larger "$gemm_numpy_best" "$gemm_torch_best")
blas_version=$(tr ',' '\n' <<<"$blas" | grep -o 'libopenblas[^/]*$' | head -1)

# 3. The T sweep: multi-head attention at B=1, single-head causal attention (d=64).
sweep=()
for ((t = 128; t <= SWEEP_MAX; t *= 2)); do sweep+=("$t"); done
for t in "${sweep[@]}"; do
  say "sweep T=$t"
  row="$t $(attnrun_run "$logs/sweep_mha_layers_$t.log" testdata/bench/mha_768.yaml --shape 1,$t,768 --warmup 1 | ms_rss)"
  if [ "$t" -le "$CONTEXT" ]; then
    row+=" $(tool_run "$logs/sweep_mha_ort_$t.log" ort "$work/onnx/mha_768.onnx" --shape 1,$t,768 --warmup 1 | ms_rss)"
  else
    row+=" - -"
  fi
  row+=" $(attnrun_run "$logs/sweep_head_layers_$t.log" testdata/bench/attention_d64.yaml --shape 1,$t,64 --warmup 1 | ms_rss)"
  row+=" $(attnrun_run "$logs/sweep_head_executor_$t.log" "$work/onnx/attention_d64.onnx" --shape 1,$t,64 --warmup 1 | ms_rss)"
  row+=" $(tool_run "$logs/sweep_head_ort_$t.log" ort "$work/onnx/attention_d64.onnx" --shape 1,$t,64 --warmup 1 | ms_rss)"
  echo "$row" >>"$work/sweep"
done

# 4. Single-head causal attention at T=16384: peak RSS.
say "single head T=16384"
read -r big_ms _ big_rss _ <<<"$(attnrun_run "$logs/head_16384.log" testdata/bench/attention_d64.yaml --shape 1,16384,64 --warmup 1)"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# The report.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.2f\n", a / b}'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN {print (a != "nan" && b != "nan" && a + 0 <= b + 0) ? 1 : 0}'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN {print (a != "nan" && b != "nan" && a + 0 >= b + 0) ? 1 : 0}'; }
gf() { fmt1 "$(awk -v g="$gflop" -v t="$1" 'BEGIN {if (t == "nan" || t + 0 == 0) print "nan"; else print g / t * 1000}')"; }
# mha_row LABEL ENGINE [TARGET]: a row of the multi-head table.
mha_row() {
  local m p b r rm rp rb
  eval "m=\$mha_$2 p=\$mha_${2}_p10 b=\${mha_${2}_best:-nan} r=\$mha_${2}_rss"
  rm=$(ratio "$m" "$mha_ort") rp=$(ratio "$p" "$mha_ort_p10") rb=$(ratio "$b" "${mha_ort_best:-nan}")
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$(fmt1 "$m")" "$(fmt1 "$p")" "$(fmt1 "$b")" "$(gf "$m")" "$(fmt1 "$r")" \
    "$rm" "$rp" "$rb" "${3:+≤ $3: $(verdict "$(le "$rm" "${3:-0}")") (p10: $(verdict "$(le "$rp" "${3:-0}")"), best: $(verdict "$(le "$rb" "${3:-0}")"))}"
}
# per_round ENGINE: the engine's median over ONNX Runtime's, round by round.
per_round() {
  paste -d' ' <(cut -d' ' -f1 "$work/mha_$1") <(cut -d' ' -f1 "$work/mha_ort") |
    while read -r a b; do ratio "$a" "$b"; done | tr '\n' ' ' | sed 's/ $//'
}
# gemm_row LABEL ENGINE [TARGET]: a row of the GEMM table; the target is attnrun ≥ TARGET × it.
gemm_row() {
  local m b rm rb
  eval "m=\$gemm_$2 b=\$gemm_${2}_best"
  rm=$(ratio "$gemm_attnrun" "$m") rb=$(ratio "$gemm_attnrun_best" "$b")
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$(fmt1 "$m")" "$(fmt1 "$b")" "$rm" "$rb" \
    "${3:+≥ $3: $(verdict "$(ge "$rm" "${3:-0}")") (best: $(verdict "$(ge "$rb" "${3:-0}")"))}"
}

cat <<EOF
<!-- scripts/bench.sh: begin -->
- Machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1) (CPU family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM; shared with other jobs
- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average (1, 5, 15 min) $load_start at the start, $load_end at the end
- Software: $(go version | cut -d' ' -f3), attnrun kernels $isa; ONNX Runtime $(node -p "require('$ORT_HOME/node_modules/onnxruntime-node/package.json').version" 2>/dev/null) (onnxruntime-node, CPU); PyTorch $(py -c 'import torch; print(torch.__version__)' 2>/dev/null) (Debian); numpy and PyTorch on ${blas_version:-${blas:-an unknown BLAS}}
- Command: \`scripts/bench.sh\` (THREADS=$THREADS ROUNDS=$ROUNDS TIME=$TIME), $THREADS threads for every engine

**Multi-head attention**, split heads, d=768, 12 heads, causal, B=4, T=512: $gflop GFLOP per forward pass (attention counted over all T×T pairs). Each engine ran $ROUNDS times, in turns; the table shows the median of the runs' median and p10 latencies, and the best single pass of all runs. The target is judged on the medians, and in parentheses on the p10s and the best passes (closer to a quiet machine).

| engine | median ms | p10 ms | best ms | GFLOP/s (median) | peak RSS MiB | time / ORT (median) | (p10) | (best) | target |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---|
$(mha_row "attnrun layers" layers 0.8)
$(mha_row "attnrun executor, PyTorch export" executor 1.2)
$(mha_row "ONNX Runtime, PyTorch export" ort)
$(mha_row "PyTorch, inference_mode" torch)

Per round, time / ONNX Runtime's time in the same round (medians): attnrun layers $(per_round layers), executor $(per_round executor), PyTorch $(per_round torch); ONNX Runtime's medians were $(cut -d' ' -f1 "$work/mha_ort" | while read -r v; do fmt1 "$v"; done | tr '\n' ' ' | sed 's/ $//') ms.

**GEMM** 1024×1024×1024 float32, $THREADS threads: median and best GFLOP/s of single products over $ROUNDS rounds (attnrun and gonum: \`go test -bench\` samples of one product each; OpenBLAS: the faster of numpy, median $(fmt1 "$gemm_numpy"), and torch.matmul, median $(fmt1 "$gemm_torch")). The target is judged on the medians, and in parentheses on the best.

| implementation | median GFLOP/s | best GFLOP/s | attnrun / it (median) | attnrun / it (best) | target |
|---|---:|---:|---:|---:|---|
$(gemm_row "attnrun kernels ($isa, Go assembly)" attnrun)
$(gemm_row "OpenBLAS (pthreads)" openblas 0.7)
$(gemm_row "gonum Sgemm (pure Go)" gonum 6)

**Sweep over T**, one run each; ms = median latency, MiB = peak RSS of the process (VmHWM). Multi-head: the model above at B=1 (ONNX Runtime up to the export's context_length, $CONTEXT). Single head: causal softmax(x·xᵀ/√64)·x for x of shape (1, T, 64), the attention core alone.

| T | MHA attnrun ms | MiB | MHA ORT ms | MiB | head attnrun ms | MiB | head executor ms | MiB | head ORT ms | MiB |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
EOF
while read -r t a ar o or h hr x xr ho hor; do
  echo "| $t | $(cell "$a") | $(cell "$ar") | $(cell "$o") | $(cell "$or") | $(cell "$h") | $(cell "$hr") | $(cell "$x") | $(cell "$xr") | $(cell "$ho") | $(cell "$hor") |"
done <"$work/sweep"
cat <<EOF

**Single-head causal attention, T=16384, d=64** (attnrun layers): $(fmt1 "$big_ms") ms, peak RSS $(fmt1 "$big_rss") MiB; target < 512 MiB: $(verdict "$(awk -v r="$big_rss" 'BEGIN {print (r != "nan" && r < 512) ? 1 : 0}')").
<!-- scripts/bench.sh: end -->
EOF
