#!/usr/bin/env bash
# Fault drills for a parallel unit: starts `mpirun -n RANKS deepinfer generate ... --enable-expert-parallel`
# on the tiny V4 preset, and once every rank is generating, kills (SIGKILL) or stops (SIGSTOP) one rank at
# random. Each drill passes when the unit exits non-zero within LIMIT seconds of the signal with a message
# naming a rank; a unit still running past the limit is a hang (it is then killed and the drill fails).
# Usage: tools/parallel/ep_drill.sh [--deepinfer BIN] [--drills N] [--ranks N] [--signal KILL|STOP|both]
#                                   [--limit S] [--seed N]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
deepinfer=$root/build/release/bin/deepinfer
drills=20
ranks=2
signal=both
limit=3
seed=$$
while (($#)); do
  case $1 in
    --deepinfer) deepinfer=$2; shift 2 ;;
    --drills) drills=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --signal) signal=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "ep_drill.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
source "$root/tests/parallel/mpi_env.sh"
RANDOM=$seed
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$deepinfer" init-model --preset tiny --arch v4 --out "$work/model" > /dev/null || exit 1
rm "$work/model/tokenizer.json"  # token ids only: start-up without reading a tokenizer

prompts=()
for i in $(seq 1 "$ranks"); do prompts+=(--prompt-ids "$i,2,3,4"); done
passed=0 hangs=0 failed=0
for d in $(seq 1 "$drills"); do
  sig=$signal
  if [[ $signal == both ]]; then sig=$([[ $((d % 2)) == 1 ]] && echo KILL || echo STOP); fi
  victim=$((RANDOM % ranks))
  mpirun "${MPIRUN_ARGS[@]}" -n "$ranks" "$deepinfer" generate --model "$work/model" "${prompts[@]}" \
      --max-tokens 100000 --ignore-eos --data-parallel-size "$ranks" --enable-expert-parallel \
      > /dev/null 2> "$work/err" &
  launcher=$!
  # Wait until every rank's engine steps (its step thread exists), then a little longer: mid-generation.
  for _ in $(seq 1 600); do
    stepping=0
    for child in $(pgrep -P "$launcher"); do
      grep -qx di-engine-step /proc/"$child"/task/*/comm 2>/dev/null && stepping=$((stepping + 1))
    done
    ((stepping >= ranks)) && break
    sleep 0.05
  done
  sleep "0.$((RANDOM % 8 + 2))"
  pid=""
  for child in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' < "/proc/$child/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim"; then pid=$child; fi
  done
  if [[ -z $pid ]]; then
    echo "drill $d: rank $victim not found"; failed=$((failed + 1)); kill -9 "$launcher" 2>/dev/null; wait "$launcher"; continue
  fi
  start=$(date +%s.%N)
  kill -"$sig" "$pid"
  gone=0
  while [[ $(echo "$(date +%s.%N) - $start < $limit" | bc) == 1 ]]; do
    if ! kill -0 "$launcher" 2>/dev/null; then gone=1; break; fi
    sleep 0.02
  done
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  if ((gone)); then
    wait "$launcher"; rc=$?
  else
    kill -CONT "$pid" 2>/dev/null; for child in $(pgrep -P "$launcher"); do kill -9 "$child" 2>/dev/null; done; kill -9 "$launcher" 2>/dev/null
    wait "$launcher"; rc=$?
  fi
  named=$(grep -oE "rank [0-9]+ (did not answer|with PID)|process rank [0-9]+" "$work/err" | head -1)
  if ((!gone)); then
    hangs=$((hangs + 1)); echo "drill $d: SIG$sig rank $victim: HANG (still running after ${limit} s)"
  elif ((rc == 0)) || [[ -z $named ]]; then
    failed=$((failed + 1)); echo "drill $d: SIG$sig rank $victim: exit $rc after ${elapsed} s without naming a rank"
    tail -5 "$work/err"
  else
    passed=$((passed + 1)); printf 'drill %d: SIG%s rank %d: exit %d after %.2f s (%s)\n' "$d" "$sig" "$victim" "$rc" "$elapsed" "$named"
  fi
done
echo "drills: $drills, passed: $passed, hangs: $hangs, failed: $failed"
((passed == drills))
