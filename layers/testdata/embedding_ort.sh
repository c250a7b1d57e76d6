#!/usr/bin/env bash
# ONNX Runtime on the exports of the typed-input layers: the round-trip
# configs with int64 inputs (testdata/export/multi/embedding_*.yaml:
# nn.embedding with padding_idx, position.learned with an offset and with
# position_ids, a tied nn.linear, scaled embeddings, activation.softcap,
# mask.padding, pool.mean over an int64 attention_mask, nn.normalize) are
# exported by `attnrun export` at opsets 13, 17 and 23, run in ONNX Runtime
# (testdata/torch/run_ort.mjs) on random int64 ids of two shapes, and
# compared with `attnrun run` on the same inputs (1e-5
# relative, 1e-6 absolute). Prints one line per case and exits 1 on any
# failure. (scripts/export_roundtrip.sh knows float inputs only.)
#
#   layers/testdata/embedding_ort.sh
#
# Needs /usr/bin/python3 with numpy, node, and onnxruntime-node in $ORT_HOME
# (scripts/install-reference-tools.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
ORT_HOME=${ORT_HOME:-$HOME/.cache/attnrun/ort}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/attnrun" ./cmd/attnrun

failed=0
for config in testdata/export/multi/embedding_*.yaml; do
  name=$(basename "$config" .yaml)
  # One .npy per '# input: NAME [B, T] idsN' line, for (B, T) = (2, 6) and (3, 5).
  for shape in "2 6" "3 5"; do
    dir=$work/$name.${shape// /x}
    mkdir -p "$dir"
    /usr/bin/python3 - "$config" "$dir" $shape <<'PY'
import re, sys
import numpy as np
config, out, b, t = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(b * 100 + t)
for k, m in enumerate(re.finditer(r"^# input: (\w+) \[B, T\] ids(\d+)$", open(config).read(), re.M)):
    np.save(f"{out}/input_{k}.npy", rng.integers(0, int(m.group(2)), size=(b, t), dtype=np.int64))
PY
    inputs=()
    for f in "$dir"/input_*.npy; do inputs+=(--input "$f"); done
    "$work/attnrun" run "$config" --seed 7 "${inputs[@]}" -o "$dir/want.npy"
    for opset in 13 17 23; do
      "$work/attnrun" export "$config" --seed 7 --opset "$opset" -o "$dir/model$opset.onnx"
      mkdir -p "$dir/ort$opset"
      ORT_HOME=$ORT_HOME node testdata/torch/run_ort.mjs "$dir/model$opset.onnx" "${inputs[@]}" --out "$dir/ort$opset" >/dev/null
      if line=$(/usr/bin/python3 - "$dir/want.npy" "$dir/ort$opset/y.npy" <<'PY'
import sys
import numpy as np
want, got = np.load(sys.argv[1]), np.load(sys.argv[2])
diff = float(np.max(np.abs(got - want))) if want.shape == got.shape else float("inf")
ok = want.shape == got.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)
print(f"{'ok' if ok else 'FAIL'} shape={got.shape} max_abs={diff:.3g}")
sys.exit(0 if ok else 1)
PY
      ); then :; else failed=$((failed + 1)); fi
      echo "$line $name B,T=${shape// /,} opset $opset"
    done
  done
done
[ "$failed" -eq 0 ] || { echo "$failed failed"; exit 1; }
echo "all passed"
