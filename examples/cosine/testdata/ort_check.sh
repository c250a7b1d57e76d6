#!/usr/bin/env bash
# The ONNX Runtime cross-check of attention.cosine, live. For each reference
# case of reference.py (cosine: causal, biased, then nn.linear, batched;
# noncausal: scale 5, an unbatched (T, d) input with a zero token):
#
#   export     attnrun-cosine export writes testdata/<case>.yaml with
#              PyTorch's weights at opsets 13 and 17; ONNX Runtime runs it on
#              PyTorch's input (a (T, d) input fed as (1, T, d)) and must give
#              PyTorch's output, and on a random batch of another size and
#              length (the axes are dynamic) what `attnrun-cosine run` gives.
#   torch      ONNX Runtime runs PyTorch's own export, <case>_torch.onnx, on
#              the input as PyTorch took it: PyTorch's output (the fixture
#              itself is sound).
#   import     attnrun-cosine import lifts <case>_torch.onnx into
#              attention.cosine and writes it back as an attnrun graph with
#              the interface of <case>_torch.onnx; ONNX Runtime runs that on
#              the input as PyTorch took it: PyTorch's output.
#
# Every comparison is at 1e-5 relative, 1e-6 absolute; onnx.checker
# (full_check) must accept every file attnrun wrote. Prints one line per
# check, `ok|FAIL name max_abs=...`, then "N passed, M failed"; exits 1 on
# any failure.
#
#   examples/cosine/testdata/ort_check.sh          # from anywhere
#
# Needs go, /usr/bin/python3 with numpy and onnx, node, and onnxruntime-node
# in $ORT_HOME (scripts/install-reference-tools.sh installs them).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
example=$(dirname "$here")
root=$(cd "$example/../.." && pwd)

ORT_HOME=${ORT_HOME:-$HOME/.cache/attnrun/ort}
PY=/usr/bin/python3
RUN_ORT=$root/testdata/torch/run_ort.mjs

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$example" && go build -o "$work/attnrun-cosine" ./cmd/attnrun-cosine) || { echo "FAIL building attnrun-cosine"; exit 1; }
bin=$work/attnrun-cosine

# Inputs: PyTorch's, batched, and a random batch of another size and length.
"$PY" - "$here" "$work" <<'EOF' || { echo "FAIL writing the inputs"; exit 1; }
import sys, numpy as np
here, work = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20241122)
for case in ("cosine", "noncausal"):
    x = np.load(f"{here}/{case}_input.npy").astype(np.float32)
    y = np.load(f"{here}/{case}_expected.npy").astype(np.float32)
    np.save(f"{work}/{case}.raw.npy", x)  # as PyTorch's export takes it
    np.save(f"{work}/{case}.raw.expected.npy", y)
    if x.ndim == 2:  # a (T, d) caller feeds (1, T, d)
        x, y = x[None], y[None]
    np.save(f"{work}/{case}.input.npy", x)
    np.save(f"{work}/{case}.expected.npy", y)
    b, t, d = x.shape
    np.save(f"{work}/{case}.random.npy", rng.standard_normal((b + 1, t + 2, d)).astype(np.float32))
EOF

# ort MODEL INPUT OUTDIR: runs ONNX Runtime; the log holds its message.
ort() { node "$RUN_ORT" "$1" --ort "$ORT_HOME" --input "$2" --out "$3" >"$3.log" 2>&1; }

# Each check appends "name|status|log|onnx or -|want.npy|got.npy".
checks=$work/checks.txt
for case in cosine noncausal; do
  config=$here/$case.yaml weights=$here/${case}_weights.npz
  "$bin" run "$config" --weights "$weights" --input "$work/$case.random.npy" -o "$work/$case.random.attnrun.npy" \
    >"$work/$case.random.attnrun.log" 2>&1
  for opset in 13 17; do
    onnx=$work/$case.opset$opset.onnx
    if ! "$bin" export "$config" --weights "$weights" --opset "$opset" -o "$onnx" >"$onnx.log" 2>&1; then
      echo "export/$case/opset$opset|export|$onnx.log|-|-|-" >>"$checks"
      continue
    fi
    for input in input random; do
      out=$work/out.$case.opset$opset.$input status=ok
      ort "$onnx" "$work/$case.$input.npy" "$out" || status=ort
      want=$work/$case.expected.npy
      [ "$input" = random ] && want=$work/$case.random.attnrun.npy
      echo "export/$case/opset$opset/$input|$status|$out.log|$onnx|$want|$out/y.npy" >>"$checks"
    done
  done

  out=$work/out.$case.torch status=ok
  ort "$here/${case}_torch.onnx" "$work/$case.raw.npy" "$out" || status=ort
  echo "torch/$case|$status|$out.log|-|$work/$case.raw.expected.npy|$out/y.npy" >>"$checks"

  lifted=$work/$case.lifted.onnx
  if ! "$bin" import "$here/${case}_torch.onnx" -o "$lifted" >"$lifted.log" 2>&1; then
    echo "import/$case|import|$lifted.log|-|-|-" >>"$checks"
    continue
  fi
  out=$work/out.$case.lifted status=ok
  ort "$lifted" "$work/$case.raw.npy" "$out" || status=ort
  echo "import/$case|$status|$out.log|$lifted|$work/$case.raw.expected.npy|$out/y.npy" >>"$checks"
done

"$PY" - "$checks" <<'EOF'
import sys, numpy as np, onnx

RTOL, ATOL = 1e-5, 1e-6
passed = failed = 0

def result(ok, name, detail):
    global passed, failed
    passed += ok
    failed += not ok
    print(f"{'ok' if ok else 'FAIL':4} {name:34} {detail}")

def last_line(path):
    lines = [l.strip() for l in open(path, errors="replace") if l.strip()]
    return lines[-1] if lines else "(no output)"

checked = {}
for line in open(sys.argv[1]):
    name, status, log, model, want_path, got_path = line.rstrip("\n").split("|")
    if status in ("export", "import", "ort"):
        result(False, name, f"{status}: {last_line(log)}")
        continue
    if model != "-" and model not in checked:
        try:
            onnx.checker.check_model(onnx.load(model), full_check=True)
            checked[model] = ""
        except Exception as e:
            checked[model] = "onnx.checker: " + str(e).strip().splitlines()[0]
    if model != "-" and checked[model]:
        result(False, name, checked[model])
        continue
    try:
        want = np.load(want_path)
    except OSError:
        result(False, name, "attnrun-cosine run: " + last_line(want_path[:-4] + ".log"))
        continue
    got = np.load(got_path)
    if got.shape != want.shape:
        result(False, name, f"shape {got.shape}, want {want.shape}")
        continue
    err = np.abs(got.astype(np.float64) - want)
    result(bool(np.all(err <= ATOL + RTOL * np.abs(want))), name, f"max_abs={err.max():.2e}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
