#!/usr/bin/env bash
# Every committed PyTorch fixture with test data (testdata/onnx, from
# testdata/torch/export_onnx.py; onnxio/lift/testdata, from export_more.py
# and attention_op.py: unbatched (T, d) exports and bool masks among them) is
# lifted with `attnrun import`, and ONNX Runtime runs the lifted file as a
# drop-in replacement for the source (scripts/lifted_ort.mjs): the same
# declared inputs and outputs (names, element types, fixed and symbolic
# dimensions), and on the source's own test-data sets the source's outputs
# at 1e-5 relative, 1e-6 absolute; onnx.checker (full_check) accepts every
# lifted file. The fixtures are committed, so SEED does not matter. Prints one line per fixture and a final "N passed, M failed".
#
#   scripts/lifted_ort.sh
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
crosscheck_start "lifted fixtures in ONNX Runtime" scripts/lifted_ort.sh

mkdir -p "$work/lifted"
pairs=()
for model in testdata/onnx/*_opset*/model.onnx onnxio/lift/testdata/*/model.onnx; do
  dir=$(dirname "$model")
  name=$(basename "$dir")
  out=$work/lifted/$name.onnx
  if "$work/attnrun" import "$model" -o "$out" >"$work/lifted/$name.log" 2>&1; then
    pairs+=("$dir" "$out")
  else
    result FAIL "import $name" "$(tail -1 "$work/lifted/$name.log")"
  fi
done

# onnx.checker (full_check: shape inference too) accepts every lifted file.
/usr/bin/python3 - "$work/lifted" >"$work/checker.log" 2>&1 <<'PY'
import glob, os, sys
import onnx
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.onnx"))):
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
        print("ok", os.path.basename(path)[:-5])
    except Exception as e:
        print("FAIL", os.path.basename(path)[:-5], str(e).strip().splitlines()[0])
PY
while read -r status name detail; do
  [ "$status" = FAIL ] && result FAIL "onnx.checker $name" "$detail"
done < <(grep -E '^(ok|FAIL) ' "$work/checker.log")
grep -qE '^(ok|FAIL) ' "$work/checker.log" || result FAIL "onnx.checker" "$(tail -3 "$work/checker.log" | tr '\n' ' ')"

node scripts/lifted_ort.mjs "$ORT_HOME" "${pairs[@]}" >"$work/ort.log" 2>&1
found=0
while read -r status name detail; do
  found=1
  result "$status" "onnxruntime ${name%:}" "$detail"
done < <(grep -E '^(ok|FAIL) ' "$work/ort.log")
[ "$found" = 1 ] || result FAIL "onnxruntime" "$(tail -3 "$work/ort.log" | tr '\n' ' ')"

crosscheck_summary
