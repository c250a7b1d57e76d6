#!/usr/bin/env bash
# The live cross-check of PyTorch 2.x and Hugging Face exports: every fixture
# of testdata/pytorch2/gen.py regenerated with a fresh seed, the real
# all-MiniLM-L6-v2 included, in the reference virtualenv; ONNX Runtime's
# outputs (checked by gen.py) and `attnrun check` on each test-data set
# against PyTorch's. What testdata/pytorch2/known_failures.txt lists must
# still fail (or, listed for "tolerance", may pass) and is printed as
# "known", not counted; anything else that fails, or a known failure that now
# passes, counts as failed. Prints one
# line per check and a final "N passed, M failed".
#
#   scripts/pytorch2_crosscheck.sh            # seed from $RANDOM
#   SEED=42 scripts/pytorch2_crosscheck.sh    # reproduce a run
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
crosscheck_start "PyTorch 2.x cross-check" scripts/pytorch2_crosscheck.sh
python=${VENV:-$HOME/.cache/attnrun/venv}/bin/python
known_file=testdata/pytorch2/known_failures.txt
known=0

# known_reason RUNTIME KEY prints the reason known_failures.txt gives for
# KEY (a fixture, or FIXTURE/test_data_set_N) under RUNTIME, if any.
known_reason() {
  awk -v runtime="$1" -v key="$2" '$1 == runtime && $2 == key { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' "$known_file"
}

# verdict RUNTIME KEY FIXTURE PASSED DETAIL prints and counts one result,
# with the known-failure list applied: a known failure (listed under KEY or
# its whole FIXTURE) must fail, except one for "tolerance", which may pass.
verdict() {
  local reason
  reason=$(known_reason "$1" "$2")
  [ -n "$reason" ] || reason=$(known_reason "$1" "$3")
  if [ -z "$reason" ] || { [ "$4" = yes ] && [[ $reason == tolerance* ]]; }; then
    if [ "$4" = yes ]; then result ok "$1 $2" "$5"; else result FAIL "$1 $2" "$5"; fi
  elif [ "$4" = yes ]; then
    result FAIL "$1 $2" "listed in $known_file ($reason) but passes: remove it"
  else
    known=$((known + 1))
    printf '%-4s %-48s %s\n' known "$1 $2" "$reason"
  fi
}

# 1. Fresh exports of every case with every exporter. gen.py runs ONNX
# Runtime on each and fails if an export fails that the case does not
# expect to.
if "$python" testdata/pytorch2/gen.py --out "$work/pytorch2" --seed "$SEED" --all >"$work/gen.log" 2>&1; then
  result ok "gen.py --seed $SEED --all" "$(tail -1 "$work/gen.log")"
else
  result FAIL "gen.py --seed $SEED --all" "$(grep -E '^UNEXPECTED|Error' "$work/gen.log" | head -3 | tr '\n' ' ')"
fi
[ -f "$work/pytorch2/manifest.json" ] || { crosscheck_summary; exit 1; }

# 2. Each fixture as one line: NAME STATUS SETS ONNXRUNTIME-VERDICT, where
# STATUS is ok or export_failed (then the verdict is the reason).
"$python" - "$work/pytorch2/manifest.json" >"$work/fixtures.tsv" <<'EOF'
import json, sys
for f in json.load(open(sys.argv[1]))["fixtures"]:
    detail = f.get("onnxruntime") if f["status"] == "ok" else f.get("reason", "")
    print("\t".join([f["name"], f["status"], str(len(f.get("test_data_sets", []))), detail]))
EOF

while IFS=$'\t' read -r name status sets ort; do
  if [ "$status" != ok ]; then
    # gen.py already failed the run if this was not expected.
    known=$((known + 1))
    printf '%-4s %-48s %s\n' known "export $name" "$ort"
    continue
  fi
  if [ "$ort" = ok ]; then ort_passed=yes; else ort_passed=no; fi
  # ONNX Runtime is a second opinion, not the code under test: where it
  # runs the graph and differs from PyTorch by less than 1e-5 (float32
  # rounding, seed to seed), it counts as agreeing, and the line says so.
  if [[ $ort =~ ^mismatch.*max_abs\ ([0-9.e+-]+) ]] && awk -v d="${BASH_REMATCH[1]}" 'BEGIN { exit !(d < 1e-5) }'; then
    ort_passed=yes ort="within 1e-5 of PyTorch (float32 rounding): $ort"
  fi
  verdict onnxruntime "$name" "$name" "$ort_passed" "$ort"
  for ((k = 0; k < sets; k++)); do
    set="$name/test_data_set_$k"
    if out=$("$work/attnrun" check "$work/pytorch2/$name/model.onnx" --data "$work/pytorch2/$set" 2>&1); then
      verdict attnrun "$set" "$name" yes "$(grep -o 'max_abs=[^ ]*' <<<"$out" | sort -t= -k2 -g | tail -1)"
    else
      verdict attnrun "$set" "$name" no "$(grep -v '  ok  ' <<<"$out" | head -2 | tr '\n' ' ' | cut -c1-300)"
    fi
  done
done <"$work/fixtures.tsv"

echo "$known known failures (testdata/pytorch2/known_failures.txt, and exports gen.py expects to fail)"
crosscheck_summary
