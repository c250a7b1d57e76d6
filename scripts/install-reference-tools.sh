#!/usr/bin/env bash
# Installs the reference tools the cross-checks compare attnrun against, when
# they are missing: Debian's PyTorch and ONNX (for /usr/bin/python3), ONNX's
# backend node tests, ONNX Runtime for Node.js, and a pinned Python virtualenv
# with PyTorch 2.x, Hugging Face transformers and ONNX Runtime (below).
# Idempotent; prints what it does on stderr. ORT_HOME (default
# ~/.cache/attnrun/ort) is where onnxruntime-node is installed.
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

# The Python reference toolchain for PyTorch 2.x and Hugging Face
# (scripts/reference-requirements.txt: the whole pinned closure) in a
# virtualenv outside the checkout. A stamp file holds the hash of the
# requirements and of the Python that built the venv; when it matches, the
# venv is up to date and nothing runs. Otherwise the venv is rebuilt from
# scratch; the stamp is written last, so an interrupted install is redone.
# VENV (default ~/.cache/attnrun/venv) is where it lives; PYTHON (default
# python3, >= 3.11 as torch 2.15 requires) is the interpreter it is built on.
# Measured on this 2-core machine, cold (no pip cache): 130 s and 6.0 GB
# (3.0 GB of it the nvidia-* wheels, 1.0 GB triton, 1.2 GB torch); a rerun
# with the stamp in place takes under 2 s.
VENV=${VENV:-$HOME/.cache/attnrun/venv}
PYTHON=${PYTHON:-python3}
requirements="$(dirname "$0")/reference-requirements.txt"
want_stamp=$({ cat "$requirements"; "$PYTHON" -VV; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$VENV/.attnrun-stamp" 2>/dev/null)" != "$want_stamp" ]; then
  echo "installing the Python reference tools into $VENV (pip, $(grep -c '==' "$requirements") pinned packages)" >&2
  start=$SECONDS
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV" >&2
  # --no-deps: the list is the closure, and pip check proves it complete.
  # No pip cache: it would double the disk the CUDA-linked torch takes.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps -r "$requirements" >&2
  "$VENV/bin/python" -m pip check --disable-pip-version-check >&2
  "$VENV/bin/python" -c 'import torch, onnx, onnxruntime, onnxscript, transformers, sentence_transformers, safetensors, numpy' >&2
  echo "$want_stamp" >"$VENV/.attnrun-stamp"
  echo "installed in $((SECONDS - start)) s, $(du -sh "$VENV" | cut -f1) on disk" >&2
fi
