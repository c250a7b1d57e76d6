#!/usr/bin/env bash
# The live cross-check of the modern layers (attention.sdpa,
# attention.torch_mha, positions, norms, GELU, MLP) and of the GPT-2, Llama
# and decoder blocks: testdata/torch/modern.py draws fresh PyTorch references
# with a fresh seed into a temporary directory (the committed ones stay as
# they are), then
#   1. attnrun's layers and blocks are checked against them
#      (TestLiveModernAgainstPyTorch, TestLiveBlocksAgainstPyTorch);
#   2. every layer and block is exported at opsets 13, 17 and 23 (the
#      Attention and RotaryEmbedding ops) and run by attnrun's executor on
#      the same inputs (TestLiveModernExportsAgainstPyTorch);
#   3. ONNX Runtime runs those exports too, against the same references.
# Every comparison is 1e-5 relative / 1e-6 absolute, NaN exactly where
# PyTorch has NaN (nn.MultiheadAttention's fully masked rows); the cases
# that carry a float64 output (norms, GELU, MLPs) pass an element beyond
# that by the float64 rule of docs/crosscheck.md. Prints one
# line per case (ok, FAIL, or skip with the reason: skips are not counted)
# and a final "N passed, M failed". Uses scripts/lib.sh, as the other live
# checks do.
#
#   scripts/modern_crosscheck.sh            # seed from $RANDOM
#   SEED=42 scripts/modern_crosscheck.sh    # reproduce a run
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
crosscheck_start "modern cross-check" scripts/modern_crosscheck.sh

# skip NAME REASON prints a case the check cannot run, uncounted.
skip() { printf '%-4s %-48s %s\n' skip "$1" "$2"; }
# finish prints the summary and exits with its status.
finish() {
  crosscheck_summary
  exit
}

if ! /usr/bin/python3 testdata/torch/modern.py --seed "$SEED" --out "$work/torch" >"$work/gen.log" 2>&1; then
  result FAIL "modern.py --seed $SEED" "$(tail -3 "$work/gen.log" | tr '\n' ' ')"
  finish
fi

# test_log NAME prints what go test -v logged for subtest NAME: the lines
# after its "=== RUN" line, up to the next test's.
test_log() {
  awk -v run="=== RUN   $1" '$0 == run { on = 1; next } /^(=== RUN|--- |    --- )/ { on = 0 } on' "$work/go.log"
}

# 1 and 2: the Go tests, one line per subtest.
ATTNRUN_MODERN_CASES="$work/torch/modern_cases.json" ATTNRUN_MODERN_EXPORTS="$work/exports" \
  go test -count=1 -v -run '^TestLive' ./layers >"$work/go.log" 2>&1
found=0
while read -r status name; do
  found=1
  case $status in
    PASS) result ok "$name" ;;
    SKIP) skip "$name" "$(test_log "$name" | head -1 | sed 's/^ *[^:]*:[0-9]*: //')" ;;
    *) result FAIL "$name" "$(test_log "$name" | grep -m2 -E 'Error:|Messages:' | tr -s ' ' | tr '\n' ' ')" ;;
  esac
done < <(sed -n 's#^ *--- \(PASS\|FAIL\|SKIP\): \(TestLive[^ ]*/[^ ]*\) .*#\1 \2#p' "$work/go.log")
if [ "$found" = 0 ] || grep -q '^FAIL\s*github.com/attnrun/attnrun/layers \[build failed\]' "$work/go.log"; then
  result FAIL "go test -run TestLive ./layers" "$(tail -5 "$work/go.log" | tr '\n' ' ')"
fi

# 3: ONNX Runtime on the exports the Go test wrote.
if [ -d "$work/exports" ]; then
  for dir in "$work/exports"/*/; do
    dir=${dir%/}
    args=()
    for f in "$dir"/input_*.npy; do args+=(--input "$f"); done
    if node testdata/torch/run_ort.mjs "$dir/model.onnx" --ort "$ORT_HOME" "${args[@]}" --out "$dir/ort" >"$dir/ort.log" 2>&1; then
      echo "$(basename "$dir")|ok|$dir"
    else
      echo "$(basename "$dir")|ort|$dir"
    fi
  done >"$work/ort.txt"
  while IFS='|' read -r status name detail; do
    result "$status" "onnxruntime $name" "$detail"
  done < <(/usr/bin/python3 - "$work/ort.txt" <<'PYEOF'
import os, sys, numpy as np
np.seterr(invalid="ignore")  # inf − inf where both are −Inf (masked): compared as equal below
RTOL, ATOL = 1e-5, 1e-6
for line in open(sys.argv[1]):
    name, status, folder = line.rstrip("\n").split("|")
    if status == "ort":
        lines = [l.strip() for l in open(f"{folder}/ort.log", errors="replace") if l.strip()]
        print(f"FAIL|{name}|{lines[-1] if lines else 'onnxruntime failed'}")
        continue
    want = np.load(f"{folder}/expected.npy").astype(np.float64)
    got = np.load(f"{folder}/ort/y.npy").astype(np.float64)
    if got.size != want.size:
        print(f"FAIL|{name}|shape {got.shape}, PyTorch {want.shape}")
        continue
    got, want = got.reshape(-1), want.reshape(-1)
    nan = np.isnan(want)
    if not np.array_equal(nan, np.isnan(got)):
        print(f"FAIL|{name}|NaN at {int(np.isnan(got).sum())} places, PyTorch at {int(nan.sum())}")
        continue
    err = np.where(got == want, 0, np.abs(got - want))[~nan]  # equal infinities are exact
    ok = bool(np.all(err <= ATOL + RTOL * np.abs(want[~nan])))
    nans = f", NaN at {int(nan.sum())} places as PyTorch" if nan.any() else ""
    detail = f"max_abs={err.max() if err.size else 0:.2e}{nans}"
    if not ok and os.path.exists(f"{folder}/expected_float64.npy"):
        # The float64 rule of docs/crosscheck.md: where the computation
        # cancels, PyTorch float32 is itself off; ONNX Runtime passes if it
        # is no further from the float64 module than twice PyTorch, + 1e-6.
        exact = np.load(f"{folder}/expected_float64.npy").astype(np.float64).reshape(-1)
        e_torch = float(np.abs(want - exact).max())
        e_ort = float(np.abs(got - exact).max())
        bound = 2 * e_torch + ATOL
        ok = e_ort <= bound
        detail = f"float64 rule: {e_ort:.2e} from float64 (PyTorch {e_torch:.2e}), bound {bound:.2e} ({detail} against PyTorch)"
    print(f"{'ok' if ok else 'FAIL'}|{name}|{detail}")
PYEOF
  )
else
  result FAIL "onnxruntime" "the Go test wrote no exports"
fi

finish
