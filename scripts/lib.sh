# What the live cross-checks share (scripts/crosscheck.sh,
# scripts/attention_ort.sh): sourced from the repository root, not run.
#
#   . scripts/lib.sh
#   crosscheck_start "cross-check" scripts/crosscheck.sh
#   result ok "some case" "max_abs=1e-07"
#   crosscheck_summary

# crosscheck_start LABEL SCRIPT installs the reference tools, sets ORT_HOME
# (default ~/.cache/attnrun/ort) and SEED (default random), makes $work, a
# temporary directory removed on exit, builds attnrun into $work/attnrun,
# and prints the seed and how to rerun SCRIPT with it. It exits the script
# when the tools or the build fail.
crosscheck_start() {
  bash scripts/install-reference-tools.sh || { echo "could not install the reference tools"; exit 1; }
  ORT_HOME=${ORT_HOME:-$HOME/.cache/attnrun/ort}
  SEED=${SEED:-$((RANDOM * 32768 + RANDOM))}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT

  go build -o "$work/attnrun" ./cmd/attnrun || exit 1
  echo "$1 seed $SEED (rerun with SEED=$SEED $2)"
  passed=0
  failed=0
}

# result ok|FAIL NAME [DETAIL] prints one result line and counts it.
result() {
  if [ "$1" = ok ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  printf '%-4s %-48s %s\n' "$1" "$2" "${3:-}"
}

# crosscheck_summary prints "N passed, M failed" and fails if any failed.
crosscheck_summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
