#!/usr/bin/env bash
# Speculative decoding's identity check beyond CI: the engine's speculative property sweeps (every drafter,
# K 1-7, scheduled verification, batches up to the pool's limit, prefix hits warm and cold, grammar scripts,
# stop tokens, penalties, n > 1, preemption; greedy and seeded outputs and logprobs compared byte for byte
# with speculation off) with ROUNDS rounds each, and the sum of the requests they compared. Fails when a
# sweep fails or fewer than 2,000 requests were compared.
#   tools/spec/identity_check.sh [ROUNDS (default 16)] [BUILD_DIR (default build/release)]
set -euo pipefail
rounds=${1:-16}
build=${2:-build/release}
tests="$build/tests/engine/engine_tests"
[[ -x "$tests" ]] || { echo "identity_check: $tests not built (ninja -C $build engine_tests)" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
DEEPINFER_SPEC_SWEEP_ROUNDS="$rounds" "$tests" --gtest_filter='EngineSpeculative.Property*' 2>&1 |
  grep -v ' INFO ' | tee "$log" || status=$?
requests=$(sed -n 's/.* rounds, \([0-9]*\) requests .*/\1/p' "$log" | awk '{n += $1} END {print n + 0}')
echo "identity_check: $requests requests equal to speculation off over $rounds rounds per sweep"
if [[ $status -ne 0 ]]; then echo "identity_check: FAILED (a sweep differs or failed)"; exit 1; fi
if (( requests < 2000 )); then echo "identity_check: FAILED (fewer than 2,000 requests; raise ROUNDS)"; exit 1; fi
echo "identity_check: passed"
