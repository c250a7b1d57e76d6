#!/usr/bin/env bash
# The performance comparison of issue 15 across the shape range, in one run
# on one machine, the same thread count for everybody: the seeds'
# split-heads causal multi-head attention (d 768, 12 heads, GPT-2 small's
# attention) as PyTorch exported it, at (B, T) = (1, 1), (1, 16), (1, 128),
# (8, 128), (1, 1024) and (4, 512), on
#
#   - attnrun's graph executor, on the PyTorch export;
#   - attnrun's layers, on the export lifted by `attnrun import`;
#   - ONNX Runtime 1.31.1 (Python, CPU provider), on the PyTorch export;
#   - PyTorch 2.15 eager (inference_mode), on the module itself.
#
# The engines run in turns, shape by shape, ROUNDS times; each reports its
# median latency per turn, and the table shows the median of those and the
# ratio to ONNX Runtime's median. attnrun's columns also show the heap
# objects and bytes allocated per forward pass. It prints progress on
# stderr and a markdown block for docs/performance.md on stdout.
#
#   scripts/bench_shapes.sh                  # about 4 minutes on 2 cores
#   QUICK=1 scripts/bench_shapes.sh          # 1 round, short timings
#   SHAPES="1,1 1,16" ROUNDS=5 TIME=1 scripts/bench_shapes.sh
#   KEEP=/tmp/shapes scripts/bench_shapes.sh # keep every tool's raw output
#   BASE=main scripts/bench_shapes.sh        # also attnrun as of that commit, in the same turns
#
# The export is Debian's PyTorch 1.13 exporter's (testdata/bench/torch_bench.py
# export, as scripts/bench.sh), the file issue 15's table was measured on.
set -uo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
TIME=${TIME:-0.5}
SHAPES=${SHAPES:-"1,1 1,16 1,128 8,128 1,1024 4,512"}
if [ "${QUICK:-}" = 1 ]; then
  ROUNDS=1 TIME=0.2
fi
VENV=${VENV:-$HOME/.cache/attnrun/venv}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=${KEEP:-$work/logs}
mkdir -p "$logs"
say() { echo "bench_shapes: $*" >&2; }
die() { say "$*"; exit 1; }

bash scripts/install-reference-tools.sh || die "could not install the reference tools"
go build -o "$work/attnrun" ./cmd/attnrun || die "go build failed"
if [ -n "${BASE:-}" ]; then
  mkdir -p "$work/base"
  git archive "$BASE" | tar -x -C "$work/base" || die "git archive $BASE failed"
  (cd "$work/base" && go build -o "$work/attnrun.base" ./cmd/attnrun) || die "go build of $BASE failed"
fi
/usr/bin/python3 testdata/bench/torch_bench.py export --out "$work/onnx" >"$logs/export.log" 2>&1 ||
  die "PyTorch export failed: $(tail -3 "$logs/export.log")"
"$work/attnrun" import "$work/onnx/mha_768.onnx" -o "$work/onnx/mha_768_lifted.onnx" >"$logs/import.log" 2>&1 ||
  die "attnrun import failed: $(tail -3 "$logs/import.log")"

# The Python processes: one thread pool of THREADS for PyTorch, OpenMP and MKL.
vpy() { OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$VENV/bin/python" "$@"; }
# kv KEY: the value of KEY=value in the last line on stdin, "nan" if none.
kv() { local v; v=$(tail -1 | grep -o "$1=[^ ]*" | tail -1 | cut -d= -f2); echo "${v:-nan}"; }
# median: the median of the numbers on stdin ("nan" lines left out).
median() { grep -E '^[0-9.]+([eE][-+]?[0-9]+)?$' | sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.2f×\n", a / b}'; }
fmt() { awk -v x="$1" 'BEGIN {if (x == "nan") print "n/a"; else if (x < 1) printf "%.3f\n", x; else if (x < 10) printf "%.2f\n", x; else printf "%.1f\n", x}'; }

# run ENGINE B T LOG: one timing; appends "median allocs bytes" to $work/ENGINE_B_T.
run() {
  local e=$1 b=$2 t=$3 log=$4 ok=0
  case $e in
  executor) "$work/attnrun" bench "$work/onnx/mha_768.onnx" --shape "$b,$t,768" --threads "$THREADS" --time "${TIME}s" >"$log" 2>&1 && ok=1 ;;
  layers) "$work/attnrun" bench "$work/onnx/mha_768_lifted.onnx" --shape "$b,$t,768" --threads "$THREADS" --time "${TIME}s" >"$log" 2>&1 && ok=1 ;;
  base_executor) "$work/attnrun.base" bench "$work/onnx/mha_768.onnx" --shape "$b,$t,768" --threads "$THREADS" --time "${TIME}s" >"$log" 2>&1 && ok=1 ;;
  base_layers) "$work/attnrun.base" bench "$work/onnx/mha_768_lifted.onnx" --shape "$b,$t,768" --threads "$THREADS" --time "${TIME}s" >"$log" 2>&1 && ok=1 ;;
  ort) vpy testdata/bench/ort_bench.py "$work/onnx/mha_768.onnx" --shape "$b,$t,768" --threads "$THREADS" --time "$TIME" >"$log" 2>&1 && ok=1 ;;
  torch) vpy testdata/bench/torch_bench.py mha --shape "$b,$t,768" --threads "$THREADS" --time "$TIME" >"$log" 2>&1 && ok=1 ;;
  esac
  if [ $ok = 1 ]; then
    # attnrun's "allocs   12.0 objects, 7.4 KiB per forward pass" (older builds lack allocs_op=).
    local objects bytes
    objects=$(sed -n 's/^allocs *\([0-9.]*\) objects.*/\1/p' "$log") bytes=$(sed -n 's/^allocs .* objects, \(.*\) per forward pass/\1/p' "$log" | tr -d ' ')
    echo "$(kv median_ms <"$log") ${objects:-nan} ${bytes:-nan}" >>"$work/${e}_${b}_$t"
  else
    say "$e at ($b, $t) failed: $(tail -2 "$log" | tr '\n' ' ')"
    echo "nan nan nan" >>"$work/${e}_${b}_$t"
  fi
}

engines="executor layers ort torch"
[ -n "${BASE:-}" ] && engines+=" base_executor base_layers"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
  for shape in $SHAPES; do
    b=${shape%,*} t=${shape#*,}
    say "round $r of $ROUNDS: (B, T) = ($b, $t)"
    for e in $engines; do
      run "$e" "$b" "$t" "$logs/${e}_${b}_${t}_$r.log"
    done
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

col() { cut -d' ' -f"$2" "$work/$1" | median; }
# last: the last round's value of column $2 (the allocations vary little).
last() { tail -1 "$work/$1" | cut -d' ' -f"$2"; }
cat <<EOF
<!-- scripts/bench_shapes.sh: begin -->
- Machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, shared with other jobs; load average (1, 5, 15 min) $load_start at the start, $load_end at the end
- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(go version | cut -d' ' -f3); ONNX Runtime $(vpy -c 'import onnxruntime; print(onnxruntime.__version__)' 2>/dev/null) (Python, CPU); PyTorch $(vpy -c 'import torch; print(torch.__version__)' 2>/dev/null)
- Command: \`scripts/bench_shapes.sh\` (THREADS=$THREADS ROUNDS=$ROUNDS TIME=$TIME), $THREADS threads for every engine

| (B, T) | executor ms | layers ms | ORT ms | PyTorch ms | executor / ORT | layers / ORT | PyTorch / ORT | executor objects, bytes per pass | layers objects, bytes per pass |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
EOF
for shape in $SHAPES; do
  b=${shape%,*} t=${shape#*,}
  x=$(col "executor_${b}_$t" 1) l=$(col "layers_${b}_$t" 1) o=$(col "ort_${b}_$t" 1) p=$(col "torch_${b}_$t" 1)
  xa=$(last "executor_${b}_$t" 2) xb=$(last "executor_${b}_$t" 3) la=$(last "layers_${b}_$t" 2) lb=$(last "layers_${b}_$t" 3)
  printf '| (%s, %s) | %s | %s | %s | %s | %s | %s | %s | %s, %s | %s, %s |\n' "$b" "$t" "$(fmt "$x")" "$(fmt "$l")" "$(fmt "$o")" "$(fmt "$p")" \
    "$(ratio "$x" "$o")" "$(ratio "$l" "$o")" "$(ratio "$p" "$o")" "$xa" "$xb" "$la" "$lb"
done
if [ -n "${BASE:-}" ]; then
  echo
  echo "attnrun as of \`$BASE\` ($(git rev-parse --short "$BASE")), in the same turns:"
  echo
  echo "| (B, T) | executor ms | layers ms | executor / ORT | layers / ORT | executor objects, bytes per pass |"
  echo "|---|---:|---:|---:|---:|---:|"
  for shape in $SHAPES; do
    b=${shape%,*} t=${shape#*,}
    x=$(col "base_executor_${b}_$t" 1) l=$(col "base_layers_${b}_$t" 1) o=$(col "ort_${b}_$t" 1)
    printf '| (%s, %s) | %s | %s | %s | %s | %s, %s |\n' "$b" "$t" "$(fmt "$x")" "$(fmt "$l")" "$(ratio "$x" "$o")" "$(ratio "$l" "$o")" \
      "$(last "base_executor_${b}_$t" 2)" "$(last "base_executor_${b}_$t" 3)"
  done
fi
echo "<!-- scripts/bench_shapes.sh: end -->"
