#!/usr/bin/env bash
# A parallel unit refuses what it cannot run with one error line and a non-zero exit: a rank count that does
# not divide the routed experts (with redundant copies, their sum: ExpertGroup's unit test), a missing MPI module, ranks that loaded different weights or configs or run
# different builds, and --data-parallel-size without mpirun.
# Usage: mpi_bad_input.sh DEEPINFER MPIRUN
set -uo pipefail
deepinfer=$1
mpirun=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/mpi_env.sh"
"$deepinfer" init-model --preset tiny --arch v4 --out "$work/a" > /dev/null || exit 1
"$deepinfer" init-model --preset tiny --arch v4 --seed 1 --out "$work/b" > /dev/null || exit 1
rm "$work/a/tokenizer.json" "$work/b/tokenizer.json"  # token ids only: start-up without reading a tokenizer
# c: a's weights under a config that differs in one value no tensor depends on.
cp -r "$work/a" "$work/c"
sed -i 's/"rope_theta": 10000.0/"rope_theta": 20000.0/' "$work/c/config.json"
cmp -s "$work/a/config.json" "$work/c/config.json" && { echo "FAIL: config.json unchanged"; exit 1; }
# Another build: a copy of deepinfer (and its MPI module beside it) whose GNU build id differs in one byte.
mkdir "$work/other"
cp "$deepinfer" "$(dirname "$deepinfer")/libdeepinfer_mpi.so" "$work/other/"
build_id=$(readelf -n "$deepinfer" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
python3 - "$work/other/deepinfer" "$build_id" <<'PY' || exit 1
import sys
path, build_id = sys.argv[1], bytes.fromhex(sys.argv[2])
data = open(path, "rb").read()
assert build_id and data.count(build_id) == 1, "the build id is not in the executable exactly once"
open(path, "wb").write(data.replace(build_id, build_id[:-1] + bytes([build_id[-1] ^ 1])))
PY
failures=0

# expect NAME PATTERN COMMAND...: the command exits non-zero and its stderr matches PATTERN.
expect() {
  local name=$1 pattern=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  if ((rc == 0)); then
    echo "FAIL: $name: exit 0"; failures=$((failures + 1))
  elif ! grep -qE -- "$pattern" "$work/err"; then
    echo "FAIL: $name: exit $rc without /$pattern/ on stderr:"; head -5 "$work/err"; failures=$((failures + 1))
  elif [[ -s $work/out ]]; then
    echo "FAIL: $name: printed outputs"; failures=$((failures + 1))
  else
    echo "ok: $name: exit $rc, $(grep -m1 -E -- "$pattern" "$work/err")"
  fi
}

args=(generate --model "$work/a" --prompt-ids 1,2,3 --max-tokens 2)
# The tiny preset has 8 routed experts.
expect "3 ranks for 8 experts" "3 ranks do not divide the model's 8 routed experts" \
  "$mpirun" "${MPIRUN_ARGS[@]}" -n 3 "$deepinfer" "${args[@]}" --data-parallel-size 3 --enable-expert-parallel
expect "load balancer without expert parallelism" "--num-redundant-experts need --enable-expert-parallel" \
  "$deepinfer" "${args[@]}" --num-redundant-experts 2
expect "missing MPI module" "MPI is not available .*no-such-module.so" \
  env DEEPINFER_MPI_MODULE="$work/no-such-module.so" \
  "$mpirun" "${MPIRUN_ARGS[@]}" -x DEEPINFER_MPI_MODULE -n 2 "$deepinfer" "${args[@]}" --data-parallel-size 2 \
  --enable-expert-parallel
expect "ranks on different checkpoints" "rank 1 loaded a different checkpoint from rank 0's" \
  "$mpirun" "${MPIRUN_ARGS[@]}" -n 1 "$deepinfer" "${args[@]}" --data-parallel-size 2 --enable-expert-parallel : \
  -n 1 "$deepinfer" generate --model "$work/b" --prompt-ids 1,2,3 --max-tokens 2 --data-parallel-size 2 \
  --enable-expert-parallel
expect "ranks on different configs" "rank 1 loaded a different checkpoint from rank 0's" \
  "$mpirun" "${MPIRUN_ARGS[@]}" -n 1 "$deepinfer" "${args[@]}" --data-parallel-size 2 --enable-expert-parallel : \
  -n 1 "$deepinfer" generate --model "$work/c" --prompt-ids 1,2,3 --max-tokens 2 --data-parallel-size 2 \
  --enable-expert-parallel
expect "ranks on different builds" "rank 1 runs a different deepinfer build from rank 0's" \
  "$mpirun" "${MPIRUN_ARGS[@]}" -n 1 "$deepinfer" "${args[@]}" --data-parallel-size 2 --enable-expert-parallel : \
  -n 1 "$work/other/deepinfer" "${args[@]}" --data-parallel-size 2 --enable-expert-parallel
expect "--data-parallel-size without mpirun" "needs 2 processes: start it as .mpirun -n 2" \
  "$deepinfer" "${args[@]}" --data-parallel-size 2
expect "ranks disagree with --data-parallel-size" "--data-parallel-size 4 but the launcher started 2" \
  "$mpirun" "${MPIRUN_ARGS[@]}" -n 2 "$deepinfer" "${args[@]}" --data-parallel-size 4
((failures == 0))
