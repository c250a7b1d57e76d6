#!/usr/bin/env bash
# The export round trip, live: every preset and every config under
# testdata/export/ (one or more per built-in layer) is exported by
# `attnrun export` at opsets 13, 17 and 23, run in ONNX Runtime
# (testdata/torch/run_ort.mjs) and compared with `attnrun run` on the same
# inputs (1e-5 relative, 1e-6 absolute; NaN exactly where attnrun has NaN);
# python3-onnx's onnx.checker.check_model(full_check=True) must accept every
# file up to opset 17. onnx 1.12 knows no later opset, so at opset 23 (the
# Attention op's) the checker is skipped, and each such result line says so.
# Each model runs on three sets of inputs: its own (a preset's (T, d) input
# fed as (1, T, d)), random ones of another batch size and length, which
# exercises the dynamic axes, and a sequence of 40 tokens, longer than most
# context_lengths here: what attnrun refuses, ONNX Runtime must refuse too.
# The configs under testdata/export/multi/ take several inputs (masks,
# memories), described by a '# sizes: B=2 T=6 S=4' line and one
# '# input: NAME [dims] KIND' line per input (KIND tokens, bool, float, or
# idsN for int64 ids in [0, N)).
# Prints one line per case, `ok|FAIL name max_abs=...`, then
# "N passed, M failed"; exits 1 on any failure.
#
#   scripts/export_roundtrip.sh                 # builds attnrun
#   scripts/export_roundtrip.sh path/to/attnrun # uses a built binary
#   ONLY='multihead|seed-simple' scripts/export_roundtrip.sh  # some models
#   OPSETS='17 23' scripts/export_roundtrip.sh  # some opsets
#
# Needs /usr/bin/python3 with numpy and onnx, node, and onnxruntime-node in
# $ORT_HOME (scripts/install-reference-tools.sh installs them).
set -uo pipefail
cd "$(dirname "$0")/.."

ORT_HOME=${ORT_HOME:-$HOME/.cache/attnrun/ort}
PY=/usr/bin/python3
read -r -a OPSETS <<<"${OPSETS:-13 17 23}"
CHECKER_MAX_OPSET=17 # the newest opset python3-onnx 1.12's checker knows
SEED=7               # weights of the configs

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

# The models: name, what `attnrun` takes, extra flags, where the inputs
# come from. Presets are listed by the binary itself; their inputs are the
# embedded ones.
models=()
while read -r name _; do
  models+=("$name|$name|--attention=|npy:models/presets/$name/input.npy")
done < <("$bin" presets)
for config in testdata/export/*.yaml; do
  shape=$(sed -n 's/^# input: \[\(.*\)\]$/\1/p' "$config")
  [ -n "$shape" ] || { echo "FAIL $config has no '# input: [B, T, d]' line"; exit 1; }
  models+=("$(basename "$config" .yaml)|$config|--seed=$SEED|random:$shape")
done
for config in testdata/export/multi/*.yaml; do
  grep -q '^# sizes: ' "$config" || { echo "FAIL $config has no '# sizes:' line"; exit 1; }
  models+=("multi-$(basename "$config" .yaml)|$config|--seed=$SEED|multi:$config")
done

if [ -n "${ONLY:-}" ]; then
  kept=()
  for m in "${models[@]}"; do
    if grep -Eq -- "$ONLY" <<<"${m%%|*}"; then kept+=("$m"); fi
  done
  models=("${kept[@]}")
fi
[ ${#models[@]} -gt 0 ] || { echo "no models to check (ONLY=${ONLY:-})"; exit 1; }

# Inputs, three sets per model: the example, batched; random ones of another
# batch size and length; a long one. Input K of set I of model M is
# $work/in/M.I.K.npy.
inputs_spec=$work/inputs.txt
for m in "${models[@]}"; do
  IFS='|' read -r name _ _ input <<<"$m"
  echo "$name|$input" >>"$inputs_spec"
done
"$PY" - "$inputs_spec" "$work/in" <<'PYEOF' || { echo "FAIL writing the inputs"; exit 1; }
import re, sys, numpy as np
spec, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20240607)

def save(name, i, arrays):
    for k, a in enumerate(arrays):
        a = np.asarray(a)
        np.save(f"{out}/{name}.{i}.{k}.npy", a if a.dtype == np.int64 else a.astype(np.float32))

def multi(path):
    """The three input sets of a multi-input config."""
    text = open(path).read()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in re.search(r"^# sizes: (.*)$", text, re.M).group(1).split())}
    specs = re.findall(r"^# input: (\w+) \[([^\]]*)\](?: (\w+))?$", text, re.M)
    variants = [sizes,
                {"B": sizes.get("B", 1) + 1, "T": max(sizes.get("T", 2) - 1, 1), "S": sizes.get("S", 1) + 2},
                {"B": 1, "T": 40, "S": 40}]
    for v in variants:
        arrays = []
        for _, dims, kind in specs:
            shape = [int(d) if d.isdigit() else v[d] for d in dims.split(", ")]
            if kind == "bool":
                arrays.append(rng.random(shape) < 0.5)
            elif kind.startswith("ids"):  # int64 ids in [0, N) for inputs a config declares int64
                arrays.append(rng.integers(0, int(kind[3:]), shape, dtype=np.int64))
            else:
                arrays.append(rng.standard_normal(shape))
        yield arrays

for line in open(spec):
    name, source = line.strip().split("|")
    if source.startswith("multi:"):
        for i, arrays in enumerate(multi(source[6:])):
            save(name, i, arrays)
        continue
    if source.startswith("random:"):
        x = rng.standard_normal([int(s) for s in source[7:].split(",")]).astype(np.float32)
    else:
        x = np.load(source[4:]).astype(np.float32)
        if x.ndim == 2:
            x = x[None]  # a (T, d) caller feeds (1, T, d)
    b, t, d = x.shape
    save(name, 0, [x])
    save(name, 1, [rng.standard_normal((b + 1, max(t - 1, 1), d))])
    save(name, 2, [rng.standard_normal((1, 40, d))])
PYEOF

# inputs NAME SET: the --input flags of one input set, in order.
inputs() {
  local k=0
  while [ -f "$work/in/$1.$2.$k.npy" ]; do
    printf -- '--input\n%s\n' "$work/in/$1.$2.$k.npy"
    k=$((k + 1))
  done
}

# Each case: export, run in attnrun and in ONNX Runtime; the comparison
# and the checker run afterwards in one Python process.
cases=$work/cases.txt
for m in "${models[@]}"; do
  IFS='|' read -r name target flags _ <<<"$m"
  for i in 0 1 2; do
    mapfile -t args < <(inputs "$name" "$i")
    "$bin" run "$target" $flags "${args[@]}" -o "$work/out/$name.$i.attnrun.npy" \
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
      mapfile -t args < <(inputs "$name" "$i")
      status=ok
      node testdata/torch/run_ort.mjs "$onnx" --ort "$ORT_HOME" "${args[@]}" --out "$out" \
        >"$out.log" 2>&1 || status=ort
      echo "$name/opset$opset/input$i|$status|$out.log|$onnx|$opset|$work/out/$name.$i.attnrun.npy|$out/y.npy" >>"$cases"
    done
  done
done

"$PY" - "$cases" "$CHECKER_MAX_OPSET" <<'PYEOF'
import sys, numpy as np, onnx
np.seterr(invalid="ignore")  # inf − inf where both are −Inf: compared as equal below

RTOL, ATOL = 1e-5, 1e-6
CHECKER_MAX_OPSET = int(sys.argv[2])
passed = failed = unchecked = 0
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
    onnx_path, opset, want_path, got_path = rest
    note = ""
    if int(opset) > CHECKER_MAX_OPSET:
        note = f"; onnx.checker skipped (onnx {onnx.__version__} knows opsets up to {CHECKER_MAX_OPSET})"
        unchecked += 1
    elif onnx_path not in checked:
        try:
            onnx.checker.check_model(onnx.load(onnx_path), full_check=True)
            checked[onnx_path] = None
        except Exception as e:
            checked[onnx_path] = str(e).strip().splitlines()[0]
    if checked.get(onnx_path):
        result(False, name, "onnx.checker: " + checked[onnx_path])
        continue
    try:
        want = np.load(want_path)
    except OSError:  # attnrun refused the input: ONNX Runtime must refuse it too
        refused = last_line(want_path[:-4] + ".log")
        if status == "ort":
            result(True, name, "refused by both: " + refused.rsplit(": ", 1)[-1] + note)
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
    nan = np.isnan(want)
    if not np.array_equal(nan, np.isnan(got)):
        result(False, name, f"NaN at {int(np.isnan(got).sum())} places, attnrun at {int(nan.sum())}")
        continue
    got = got.astype(np.float64)
    err = np.where(got == want, 0, np.abs(got - want))[~nan]  # equal infinities are exact
    ok = bool(np.all(err <= ATOL + RTOL * np.abs(want[~nan])))
    nans = f", NaN at {int(nan.sum())} places as attnrun" if nan.any() else ""
    result(ok, name, f"max_abs={err.max() if err.size else 0:.2e}{nans}{note}")

if unchecked:
    print(f"note: onnx.checker skipped for {unchecked} case(s) above opset {CHECKER_MAX_OPSET}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF
