#!/usr/bin/env bash
# attention.sdpa's qk_norm, sinks and score_mod in ONNX Runtime 1.31 (the
# reference virtualenv's onnxruntime): every PyTorch case of
# layers/testdata/sdpa_frontier_cases.json (Hugging Face's Qwen3Attention
# and GptOssAttention, flex_attention) is exported at opsets 17 and 23 and
# with ai.onnx.preview's FlexAttention by
# TestSDPAFrontierExportsAgainstPyTorch, which also checks each on attnrun's
# executor. Every export must pass onnx.checker.check_model(full_check=True)
# (onnx 1.23 knows FlexAttention); the standard-op ones are then run by
# ONNX Runtime and compared with PyTorch's output (1e-5 relative, 1e-6
# absolute). ONNX Runtime 1.31 does not register FlexAttention, so the
# FlexAttention exports are checked, not run. Prints one line per export
# and "N passed, M failed"; exits 1 on any failure.
#
#   scripts/sdpa_frontier_ort.sh
#   PY=/path/to/python scripts/sdpa_frontier_ort.sh   # another interpreter with onnxruntime
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-$HOME/.cache/attnrun/venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! ATTNRUN_SDPA_EXPORTS="$work/exports" go test -count=1 -run '^TestSDPAFrontierExportsAgainstPyTorch$' ./layers >"$work/go.log" 2>&1; then
  echo "FAIL go test -run TestSDPAFrontierExportsAgainstPyTorch ./layers"
  tail -20 "$work/go.log"
  exit 1
fi

"$PY" - "$work/exports" <<'PYEOF'
import glob, os, sys
import numpy as np
import onnx
import onnxruntime as ort

RTOL, ATOL = 1e-5, 1e-6
passed = failed = 0
print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}")
for folder in sorted(glob.glob(os.path.join(sys.argv[1], "*.*"))):
    name = os.path.basename(folder)
    path = os.path.join(folder, "model.onnx")
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
    except Exception as e:
        print(f"FAIL {name:48s} onnx.checker: {str(e).splitlines()[0][:120]}")
        failed += 1
        continue
    if name.endswith(".flex"):
        print(f"ok   {name:48s} onnx.checker (FlexAttention: not run by onnxruntime)")
        passed += 1
        continue
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        feeds = {i.name: np.load(os.path.join(folder, f"input_{k}.npy")) for k, i in enumerate(sess.get_inputs())}
        got = sess.run(None, feeds)[0].astype(np.float64).reshape(-1)
    except Exception as e:  # a refusal is a failure, reported with its first line
        print(f"FAIL {name:48s} {str(e).splitlines()[0][:120]}")
        failed += 1
        continue
    want = np.load(os.path.join(folder, "expected.npy")).astype(np.float64).reshape(-1)
    nan = np.isnan(want)
    err = np.abs(got - want)[~nan]
    ok = got.size == want.size and np.array_equal(nan, np.isnan(got)) and bool(np.all(err <= ATOL + RTOL * np.abs(want[~nan])))
    print(f"{'ok  ' if ok else 'FAIL'} {name:48s} max_abs={err.max() if err.size else 0:.2e}")
    passed, failed = passed + ok, failed + (not ok)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or not passed else 0)
PYEOF
