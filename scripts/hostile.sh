#!/usr/bin/env bash
# The hostile-input sweep (issue 10's acceptance): builds attnrun, writes the
# corpus of testdata/hostile/gen.go (memory bombs, endless work, FIFOs, a
# sparse 16 GiB external-data file, names that would become paths or sizes)
# and runs every command on every case under `ulimit -v 8388608` and
# --timeout. Each run must:
#   - exit 0, 1 or 2: no Go runtime crash, no panic, no "internal error";
#   - end within the timeout and a few seconds of grace;
#   - when it fails, and the command reads the case's target (run, check,
#     export and plot), name the limit the case exceeds (the case's
#     expect.txt: the memory budget, --timeout, "regular file", ...), on
#     stderr or, for check's per-set lines, stdout;
#   - write nothing outside its output folder.
# It prints one line per failed check and a summary; the exit status is 1 if
# any check failed.
#
#   scripts/hostile.sh                      # --timeout 20s --max-memory 1GiB
#   HOSTILE_TIMEOUT=5s HOSTILE_CASES='fifo_*' scripts/hostile.sh
set -uo pipefail
cd "$(dirname "$0")/.."

timeout=${HOSTILE_TIMEOUT:-20s}
max_memory=${HOSTILE_MAX_MEMORY:-1GiB}
pattern=${HOSTILE_CASES:-*}
grace=10
seconds=${timeout%s}
commands=(run check inspect import export plot)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/attnrun" ./cmd/attnrun || exit 1
go run ./testdata/hostile/gen.go -o "$work/corpus" || exit 1

# strict lists the commands whose failure must name the case's limit: those
# that read the target as the case means it (an ONNX file, a config, a
# preset with --input).
strict() {
  local case=$1 cmd=$2 target=$3
  case "$target" in
    *.onnx) [[ $cmd == run || $cmd == check ]] ;;
    *.yaml) [[ $cmd == run || $cmd == check || $cmd == export || $cmd == plot ]] ;;
    *) [[ $cmd == run || $cmd == plot ]] ;;
  esac
}

failed=0 runs=0
fail() {
  failed=$((failed + 1))
  echo "FAIL $1"
  sed 's/^/    /' "$work/stderr" | head -5
}

for dir in "$work"/corpus/$pattern/; do
  name=$(basename "$dir")
  mapfile -t args < <(sed "s|@|${dir%/}|g" "$dir/args.txt")
  expect=$(cat "$dir/expect.txt")
  for cmd in "${commands[@]}"; do
    extra=()
    case $cmd in
      import | export) extra=(-o "$work/out/$name.onnx") ;;
      plot) extra=(-o "$work/out/$name.png") ;;
    esac
    mkdir -p "$work/out"
    start=$(date +%s)
    (
      ulimit -v 8388608
      exec timeout -k 5 $((seconds + 60)) "$work/attnrun" "$cmd" "${args[@]}" "${extra[@]}" \
        --timeout "$timeout" --max-memory "$max_memory"
    ) >"$work/stdout" 2>"$work/stderr" </dev/null
    status=$?
    elapsed=$(($(date +%s) - start))
    runs=$((runs + 1))
    what="$name: attnrun $cmd (status $status, ${elapsed}s)"
    if ((status > 2)); then
      fail "$what: exit status above 2 (a crash, a signal or the outer timeout)"
    elif grep -qE 'panic|goroutine [0-9]+ \[|fatal error|internal error|SIGSEGV|runtime error' "$work/stderr" "$work/stdout"; then
      fail "$what: a panic, runtime error or internal error"
    elif ((elapsed > seconds + grace)); then
      fail "$what: ran past --timeout $timeout"
    elif ((status == 1)) && strict "$name" "$cmd" "${args[0]}" && ! grep -qE -- "$expect" "$work/stderr" "$work/stdout"; then
      fail "$what: the error does not name the limit (want /$expect/)"
    fi
  done
done

if [ -n "$(find "$work/corpus" -maxdepth 1 -name 'escaped*')" ] || [ -e "$work/escaped.npy" ]; then
  failed=$((failed + 1))
  echo "FAIL npz_traversal: a file was written outside --output"
fi

echo "hostile sweep: $runs runs, $failed failed (--timeout $timeout, --max-memory $max_memory, ulimit -v 8388608)"
((failed == 0))
