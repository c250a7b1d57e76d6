#!/usr/bin/env bash
# A quick before/after of attnrun's graph executor on the model-level rows
# of issue 15, with ONNX Runtime in the same turns: for each shape, the
# executor at BASE (a commit), the executor of the checkout, then ONNX
# Runtime 1.31.1 (Python), ROUNDS times; one line per shape and round with
# the three medians, the ratios to ONNX Runtime, the checkout's bytes and
# objects per run, and the load average before and after. Where
# scripts/bench_models.sh is the full table (PyTorch and GoMLX too, 12–22
# minutes), this is the A/B of a change (about 3 minutes a round).
#
#   BASE=2965a9e scripts/bench_models_ab.sh                  # every shape, 2 rounds
#   BASE=HEAD~1 ROUNDS=3 scripts/bench_models_ab.sh llama/past_2048 gpt2/greedy_32
#
# The models come from testdata/bench_models/models_bench.py export (run
# scripts/bench_models.sh once, or export them by hand into BENCH_MODELS).
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_MODELS=${BENCH_MODELS:-$HOME/.cache/attnrun/bench}
ROUNDS=${ROUNDS:-2}
BASE=${BASE:?set BASE to the commit to compare with}
PY=${VENV:-$HOME/.cache/attnrun/venv}/bin/python
shapes=("$@")
if [ ${#shapes[@]} -eq 0 ]; then
  shapes=(llama/past_128 llama/past_512 llama/past_2048 minilm/b1_t32 minilm/b32_t128 gpt2/greedy_32)
fi
[ -x "$PY" ] || { echo "bench_models_ab: no $PY: run scripts/install-reference-tools.sh" >&2; exit 1; }
[ -d "$BENCH_MODELS" ] || { echo "bench_models_ab: no $BENCH_MODELS: run scripts/bench_models.sh once" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive "$BASE" | tar -x -C "$work"
(cd "$work" && go test -c -o "$work/base.test" ./bench) || { echo "bench_models_ab: cannot build $BASE" >&2; exit 1; }
go test -c -o "$work/new.test" ./bench

load() { cut -d' ' -f1 /proc/loadavg; }
# median BINARY PATTERN BENCHTIME: the benchmark's median-ms, then its B/op and allocs/op
median() {
  (cd bench && ATTNRUN_BENCH_MODELS=$BENCH_MODELS "$1" -test.run '^$' -test.bench "$2" -test.cpu 2 \
    -test.benchtime "$3" -test.benchmem 2>&1) | awk '/median-ms/ {
      for (i = 1; i < NF; i++) { if ($(i+1) == "median-ms") m = $i; if ($(i+1) == "B/op") b = $i; if ($(i+1) == "allocs/op") a = $i }
      print m, b, a; exit }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "–"; else printf "%.2f", a / b }'; }

echo "machine: $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); base $BASE ($(git rev-parse --short "$BASE")), checkout $(git rev-parse --short HEAD)"
for round in $(seq "$ROUNDS"); do
  for s in "${shapes[@]}"; do
    model=${s%%/*} shape=${s#*/}
    case $shape in
      greedy_*) pattern="Greedy/^$model\$/^$shape\$" benchtime=2x ;;
      b32_*) pattern="Executor/^$model\$/^$shape\$" benchtime=3x ;;
      *) pattern="Executor/^$model\$/^$shape\$" benchtime=2s ;;
    esac
    before=$(load)
    read -r base _ _ < <(median "$work/base.test" "$pattern" "$benchtime")
    read -r new bytes objects < <(median "$work/new.test" "$pattern" "$benchtime")
    ort=$("$PY" testdata/bench_models/models_bench.py time ort "$BENCH_MODELS/$model/$shape" --threads 2 --time 2 2>&1 |
      sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p')
    echo "round $round $s: base ${base} ms, new ${new} ms, ORT ${ort} ms; base/ORT $(ratio "$base" "$ort"), new/ORT $(ratio "$new" "$ort"), new/base $(ratio "$new" "$base"); new ${objects} objects, ${bytes} B per run; load ${before}–$(load)"
  done
done
