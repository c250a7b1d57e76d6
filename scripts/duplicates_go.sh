#!/usr/bin/env bash
# Runs the `duplicates` tool on attnrun's hand-written, non-test Go code only
# (no tests, no generated protobuf code, no assembly, no fixture generators):
# the measure the house issue's acceptance uses. Extra arguments go to
# `duplicates` (for example --most 200).
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
git ls-files '*.go' | grep -v '_test\.go$' | grep -v '^onnxio/onnxpb/' | grep -v '^testdata/' |
	while read -r f; do
		mkdir -p "$tree/$(dirname "$f")"
		cp "$f" "$tree/$f"
	done
cd "$tree"
duplicates --seconds 120 "$@"
