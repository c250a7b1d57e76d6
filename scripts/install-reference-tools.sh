#!/usr/bin/env bash
# Installs the reference tools the cross-checks compare attnrun against, when
# they are missing: Debian's PyTorch and ONNX (for /usr/bin/python3), ONNX's
# backend node tests, and ONNX Runtime for Node.js. Idempotent; prints what it
# does on stderr. ORT_HOME (default ~/.cache/attnrun/ort) is where
# onnxruntime-node is installed.
set -euo pipefail

ORT_HOME=${ORT_HOME:-$HOME/.cache/attnrun/ort}
ORT_VERSION=1.30.0

need_apt=()
/usr/bin/python3 -c 'import torch, onnx' 2>/dev/null || need_apt+=(python3-torch python3-onnx)
[ -d /usr/include/onnx/backend/test/data/node ] || need_apt+=(libonnx-testdata)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]} (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${need_apt[@]}" >&2
fi

if [ ! -f "$ORT_HOME/node_modules/onnxruntime-node/package.json" ]; then
  echo "installing onnxruntime-node@$ORT_VERSION into $ORT_HOME (npm)" >&2
  mkdir -p "$ORT_HOME"
  # The package's install script downloads extra binaries, which fails
  # offline; the CPU library ships inside the package itself.
  npm install --silent --prefix "$ORT_HOME" --ignore-scripts "onnxruntime-node@$ORT_VERSION" >&2
fi
