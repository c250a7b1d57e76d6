#!/usr/bin/env bash
# The export round trip, live: every preset and every config under
# testdata/export/ (one or more per built-in layer) is exported by
# `attnrun export` at opsets 13 and 17, run in ONNX Runtime
# (testdata/torch/run_ort.mjs) and compared with `attnrun run` on the same
# inputs (1e-5 relative, 1e-6 absolute); python3-onnx's
# onnx.checker.check_model(full_check=True) must accept every file. Each
# model runs on three inputs: its own (a preset's (T, d) input fed as
# (1, T, d)), a random batch of another size and length, which exercises
# the dynamic axes, and a sequence of 40 tokens, longer than most
# context_lengths here: what attnrun refuses, ONNX Runtime must refuse too.
# Prints one line per case, `ok|FAIL name max_abs=...`, then
# "N passed, M failed"; exits 1 on any failure.
#
#   scripts/export_roundtrip.sh                 # builds attnrun
#   scripts/export_roundtrip.sh path/to/attnrun # uses a built binary
#   ONLY='multihead|seed-simple' scripts/export_roundtrip.sh  # some models
#
# Needs /usr/bin/python3 with numpy and onnx, node, and onnxruntime-node in
# $ORT_HOME (scripts/install-reference-tools.sh installs them).
set -uo pipefail
cd "$(dirname "$0")/.."

ORT_HOME=${ORT_HOME:-$HOME/.cache/attnrun/ort}
PY=/usr/bin/python3
OPSETS=(13 17)
SEED=7 # weights of the configs

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -ge 1 ]; then
  bin=$(realpath "$1")
else
  go build -o "$work/attnrun" ./cmd/attnrun || exit 1
  bin=$work/attnrun
fi
[ -x "$bin" ] || { echo "not an executable: $bin"; exit 1; }
mkdir -p "$work/in" "$work/onnx" "$work/out"

# The models: name, what `attnrun` takes, extra flags, example input.
# Presets are listed by the binary itself; their inputs are the embedded ones.
models=()
while read -r name _; do
  models+=("$name|$name|--attention=|models/presets/$name/input.npy")
done < <("$bin" presets)
for config in testdata/export/*.yaml; do
  shape=$(sed -n 's/^# input: \[\(.*\)\]$/\1/p' "$config")
  [ -n "$shape" ] || { echo "FAIL $config has no '# input: [B, T, d]' line"; exit 1; }
  models+=("$(basename "$config" .yaml)|$config|--seed=$SEED|random:$shape")
done

if [ -n "${ONLY:-}" ]; then
  kept=()
  for m in "${models[@]}"; do
    if grep -Eq -- "$ONLY" <<<"${m%%|*}"; then kept+=("$m"); fi
  done
  models=("${kept[@]}")
fi
[ ${#models[@]} -gt 0 ] || { echo "no models to check (ONLY=${ONLY:-})"; exit 1; }

# Inputs: the example, batched; a random batch of another size; a long one.
inputs_spec=$work/inputs.txt
for m in "${models[@]}"; do
  IFS='|' read -r name _ _ input <<<"$m"
  echo "$name|$input" >>"$inputs_spec"
done
"$PY" - "$inputs_spec" "$work/in" <<'EOF' || { echo "FAIL writing the inputs"; exit 1; }
import sys, numpy as np
spec, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20240607)
for line in open(spec):
    name, source = line.strip().split("|")
    if source.startswith("random:"):
        x = rng.standard_normal([int(s) for s in source[7:].split(",")]).astype(np.float32)
    else:
        x = np.load(source).astype(np.float32)
        if x.ndim == 2:
            x = x[None]  # a (T, d) caller feeds (1, T, d)
    b, t, d = x.shape
    np.save(f"{out}/{name}.0.npy", x)
    np.save(f"{out}/{name}.1.npy", rng.standard_normal((b + 1, max(t - 1, 1), d)).astype(np.float32))
    np.save(f"{out}/{name}.2.npy", rng.standard_normal((1, 40, d)).astype(np.float32))
EOF

# Each case: export, run in attnrun and in ONNX Runtime; the comparison
# and the checker run afterwards in one Python process.
cases=$work/cases.txt
for m in "${models[@]}"; do
  IFS='|' read -r name target flags _ <<<"$m"
  for i in 0 1 2; do
    "$bin" run "$target" $flags --input "$work/in/$name.$i.npy" -o "$work/out/$name.$i.attnrun.npy" \
      >"$work/out/$name.$i.attnrun.log" 2>&1
  done
  for opset in "${OPSETS[@]}"; do
    onnx=$work/onnx/$name.opset$opset.onnx
    if ! "$bin" export "$target" ${flags/--attention=/} --opset "$opset" -o "$onnx" >"$onnx.log" 2>&1; then
      echo "$name/opset$opset|export|$onnx.log" >>"$cases"
      continue
    fi
    for i in 0 1 2; do
      out=$work/out/$name.opset$opset.$i
      status=ok
      node testdata/torch/run_ort.mjs "$onnx" --ort "$ORT_HOME" --input "$work/in/$name.$i.npy" --out "$out" \
        >"$out.log" 2>&1 || status=ort
      echo "$name/opset$opset/input$i|$status|$out.log|$onnx|$work/out/$name.$i.attnrun.npy|$out/y.npy" >>"$cases"
    done
  done
done

"$PY" - "$cases" <<'EOF'
import sys, numpy as np, onnx

RTOL, ATOL = 1e-5, 1e-6
passed = failed = 0
checked = {}

def result(ok, name, detail):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(f"{'ok' if ok else 'FAIL':4} {name:52} {detail}")

def last_line(path):
    lines = [l.strip() for l in open(path, errors="replace") if l.strip()]
    return lines[-1] if lines else "(no output)"

for line in open(sys.argv[1]):
    name, status, log, *rest = line.rstrip("\n").split("|")
    if status == "export":
        result(False, name, "attnrun export: " + last_line(log))
        continue
    onnx_path, want_path, got_path = rest
    if onnx_path not in checked:
        try:
            onnx.checker.check_model(onnx.load(onnx_path), full_check=True)
            checked[onnx_path] = None
        except Exception as e:
            checked[onnx_path] = str(e).strip().splitlines()[0]
    problem = checked[onnx_path] and "onnx.checker: " + checked[onnx_path]
    if problem:
        result(False, name, problem)
        continue
    try:
        want = np.load(want_path)
    except OSError:  # attnrun refused the input: ONNX Runtime must refuse it too
        refused = last_line(want_path[:-4] + ".log")
        if status == "ort":
            result(True, name, "refused by both: " + refused.rsplit(": ", 1)[-1])
        else:
            result(False, name, "onnxruntime ran an input attnrun refuses: " + refused)
        continue
    if status == "ort":
        result(False, name, "onnxruntime: " + last_line(log))
        continue
    got = np.load(got_path)
    if got.shape != want.shape:
        result(False, name, f"shape {got.shape}, attnrun {want.shape}")
        continue
    err = np.abs(got.astype(np.float64) - want)
    ok = bool(np.all(err <= ATOL + RTOL * np.abs(want)))
    result(ok, name, f"max_abs={err.max():.2e}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
