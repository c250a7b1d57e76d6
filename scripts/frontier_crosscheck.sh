#!/usr/bin/env bash
# The live cross-check of attention.linear and attention.mla against
# Hugging Face's Qwen3-Next gated DeltaNet and DeepSeek-V3 latent attention:
# layers/testdata/frontier_layers.py draws fresh cases with a fresh seed
# (the committed ones stay as they are), then
#   1. the Go tests check the layers against them: Forward, every way of
#      stepping, the modules' own cached decoding (TestFrontierLayers*);
#   2. `attnrun run` on each case's model.yaml and weights gives the
#      module's output, whole and with --incremental=1 and --incremental=3;
#   3. `attnrun export` at opsets 17 and 23, run by ONNX Runtime 1.31
#      (Python, the reference virtualenv), gives the module's output.
# Every comparison is 1e-5 relative / 1e-6 absolute against the module's
# float32 output, or else the float64 rule of docs/crosscheck.md against the
# module run in float64 (the delta rules' β(v − Sᵀk) cancels, and two
# correct float32 recurrences can stray more than 1e-6 from each other).
# Prints one line per case and "N passed, M failed".
#
#   scripts/frontier_crosscheck.sh            # seed from $RANDOM
#   SEED=42 scripts/frontier_crosscheck.sh    # reproduce a run
#
# Needs the reference virtualenv (torch 2.15, transformers 5.23,
# onnxruntime 1.31.1) at $ATTNRUN_VENV (default ~/.cache/attnrun/venv).
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
crosscheck_start "frontier cross-check" scripts/frontier_crosscheck.sh
py=${ATTNRUN_VENV:-$HOME/.cache/attnrun/venv}/bin/python
if ! "$py" -c 'import torch, transformers, onnxruntime' 2>/dev/null; then
  result FAIL "reference virtualenv" "$py cannot import torch, transformers and onnxruntime"
  crosscheck_summary
  exit
fi

cases=$work/cases
if ! "$py" layers/testdata/frontier_layers.py --seed "$SEED" --out "$cases" >"$work/gen.log" 2>&1; then
  result FAIL "frontier_layers.py --seed $SEED" "$(tail -3 "$work/gen.log" | tr '\n' ' ')"
  crosscheck_summary
  exit
fi

# 1. The Go tests on the fresh cases, one line per subtest.
ATTNRUN_FRONTIER_CASES="$cases/frontier_layers.json" go test -count=1 -v -run '^TestFrontierLayers' ./layers >"$work/go.log" 2>&1
found=0
while read -r status name; do
  found=1
  if [ "$status" = PASS ]; then result ok "$name"; else result FAIL "$name" "see go test -v"; fi
done < <(sed -n 's#^ *--- \(PASS\|FAIL\): \(TestFrontier[^ ]*/[^ ]*\) .*#\1 \2#p' "$work/go.log")
[ "$found" = 1 ] || result FAIL "go test -run TestFrontierLayers ./layers" "$(tail -5 "$work/go.log" | tr '\n' ' ')"

# 2 and 3. The command and ONNX Runtime; failures to run are results too.
for dir in "$cases"/*/; do
  dir=${dir%/}
  model=(--weights "$dir/weights.npz")
  "$work/attnrun" run "$dir/model.yaml" "${model[@]}" --input "$dir/input.npy" -o "$dir/run.npy" >/dev/null 2>"$dir/run.log"
  "$work/attnrun" run "$dir/model.yaml" "${model[@]}" --input "$dir/input.npy" --incremental=1 -o "$dir/incremental1.npy" >/dev/null 2>>"$dir/run.log"
  "$work/attnrun" run "$dir/model.yaml" "${model[@]}" --input "$dir/input.npy" --incremental=3 -o "$dir/incremental3.npy" >/dev/null 2>>"$dir/run.log"
  for opset in 17 23; do
    "$work/attnrun" export "$dir/model.yaml" "${model[@]}" --opset "$opset" -o "$dir/opset$opset.onnx" >/dev/null 2>>"$dir/run.log"
  done
done
while IFS='|' read -r status name detail; do
  result "$status" "$name" "$detail"
done < <("$py" - "$cases" <<'PYEOF'
import os, sys
import numpy as np
import onnxruntime as ort

RTOL, ATOL = 1e-5, 1e-6
root = sys.argv[1]
for case in sorted(os.listdir(root)):
    d = os.path.join(root, case)
    if not os.path.isdir(d):
        continue
    want = np.load(os.path.join(d, "expected.npy"))
    exact = np.load(os.path.join(d, "expected_float64.npy")).astype(np.float64)
    x = np.load(os.path.join(d, "input.npy"))
    got = {}
    for run in ("run", "incremental1", "incremental3"):
        path = os.path.join(d, run + ".npy")
        got["attnrun " + run] = np.load(path) if os.path.exists(path) else None
    for opset in (17, 23):
        path = os.path.join(d, "opset%d.onnx" % opset)
        name = "onnxruntime %s opset%d" % (ort.__version__, opset)
        try:
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            y = sess.run(None, {sess.get_inputs()[0].name: x.reshape((-1,) + x.shape[-2:])})[0]
            got[name] = y.reshape(want.shape)
        except Exception as e:  # the model did not load or run
            print("FAIL|%s %s|%s" % (case, name, str(e).splitlines()[0][:120]))
            got.pop(name, None)
    for name, y in got.items():
        if y is None:
            log = open(os.path.join(d, "run.log")).read().strip().splitlines()
            print("FAIL|%s %s|%s" % (case, name, log[-1][:120] if log else "no output"))
            continue
        err = np.abs(y.astype(np.float64) - want)
        ok = y.shape == want.shape and bool(np.all(err <= ATOL + RTOL * np.abs(want)))
        detail = "max_abs=%.3g" % err.max()
        if not ok and y.shape == want.shape:
            # The float64 rule of docs/crosscheck.md: no further from the
            # exact result than twice PyTorch float32's distance, plus 1e-6.
            bound = 2 * np.abs(want.astype(np.float64) - exact).max() + ATOL
            off = np.abs(y.astype(np.float64) - exact).max()
            ok = bool(off <= bound)
            detail = "float64 rule: %.3g from float64, bound %.3g (%s)" % (off, bound, detail)
        print("%s|%s %s|%s" % ("ok" if ok else "FAIL", case, name, detail))
PYEOF
)

crosscheck_summary
