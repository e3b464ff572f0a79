#!/usr/bin/env bash
# Expert parallelism is bit-identical to one process: `mpirun -n N deepinfer generate ... --data-parallel-size N
# --enable-expert-parallel` must print exactly what one process prints (greedy token ids and logprobs of
# several prompts, spread over the ranks), on the tiny presets of the architectures named, and with --ep-stats
# every rank reports its steps' time. With --eplb the expert load balancer runs with one redundant expert per
# rank and rebalances every 2 steps: the outputs stay identical across the placements it swaps in, and rank 0
# reports at least one applied.
# Usage: mpi_generate_identity.sh DEEPINFER MPIRUN [--eplb] [--preset tiny|small] ARCH:RANKS[,RANKS...]...
#   e.g. v4:2,4 v4.1:2,4
set -euo pipefail
deepinfer=$1
mpirun=$2
shift 2
eplb=0
if [[ ${1:-} == --eplb ]]; then eplb=1; shift; fi
preset=tiny
if [[ ${1:-} == --preset ]]; then preset=$2; shift 2; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/mpi_env.sh"

prompts=(--prompt-ids 1,2,3,4,5 --prompt-ids 9,8,7 --prompt-ids 40,41,42,43,44,45,46 --prompt-ids 5)
for spec in "$@"; do
  arch=${spec%%:*}
  IFS=, read -ra ranks <<< "${spec#*:}"
  "$deepinfer" init-model --preset "$preset" --arch "$arch" --out "$work/$arch" > /dev/null
  # Token ids need no tokenizer, and reading one costs most of a tiny model's start-up; V4.1's Engram
  # hashes need it.
  [[ $arch == v4 ]] && rm "$work/$arch/tokenizer.json"
  args=(generate --model "$work/$arch" "${prompts[@]}" --max-tokens 6 --logprobs 2 --ignore-eos)
  # A generous exchange deadline: a loaded CI machine must not end the unit (the drills test the deadline).
  "$deepinfer" "${args[@]}" > "$work/single.txt" 2> "$work/single.err"
  for n in "${ranks[@]}"; do
    balancer=()
    (( eplb )) && balancer=(--num-redundant-experts "$n" --eplb-step-interval 2 --eplb-window-size 4)
    if ! "$mpirun" "${MPIRUN_ARGS[@]}" -n "$n" "$deepinfer" "${args[@]}" --data-parallel-size "$n" \
         --enable-expert-parallel --ep-timeout-s 30 --ep-stats "${balancer[@]}" > "$work/ep.txt" 2> "$work/ep.err"; then
      echo "FAIL: $arch EP$n exited non-zero"; cat "$work/ep.err"; exit 1
    fi
    if ! cmp -s "$work/single.txt" "$work/ep.txt"; then
      echo "FAIL: $arch EP$n printed other outputs than one process"
      diff "$work/single.txt" "$work/ep.txt" | head -20
      exit 1
    fi
    # --ep-stats: every rank times its steps; 6 tokens take at least 5 steps after the first (which is not
    # counted), and the agreement and the exchanges are parts of the steps' time.
    if ! awk -v n="$n" '/generate: rank [0-9]+: [0-9]+ steps in/ {
           steps = $4; step_s = $7; agreement_s = $11; exchanges_s = $19
           if (steps >= 5 && step_s > 0 && agreement_s + exchanges_s <= step_s) ok++
         } END { exit ok == n ? 0 : 1 }' "$work/ep.err"; then
      echo "FAIL: $arch EP$n: --ep-stats did not print every rank's steps"; grep "generate: rank" "$work/ep.err"; exit 1
    fi
    # ... and where it waited: one pairs/outputs couple per routed layer (as many as the balance line's
    # layers), shares of the step time that sum to at most all of it.
    layers=$(sed -n 's/.*expert load balance per layer[^:]*: //p' "$work/ep.err" | wc -w)
    if ! awk -v n="$n" -v layers="$layers" '/waiting beyond each layer.s fastest exchange/ {
           line = $0; sub(/.*us per step\):/, "", line); sub(/;.*/, "", line)
           split($0, share, /pairs |%, outputs |% of step/)
           if (split(line, couples, " ") == layers && layers > 0 && share[2] + share[3] <= 100) ok++
         } END { exit ok == n ? 0 : 1 }' "$work/ep.err"; then
      echo "FAIL: $arch EP$n: --ep-stats did not say where every rank waited"; grep "generate: rank" "$work/ep.err"; exit 1
    fi
    applied=$(sed -n 's/.*expert balance since the first rebalance (\([0-9]*\) applied.*/\1/p' "$work/ep.err")
    if (( eplb )) && ! (( ${applied:-0} >= 1 )); then
      echo "FAIL: $arch EP$n: the load balancer applied no placement"; grep "generate:" "$work/ep.err"; exit 1
    fi
    echo "ok: $arch EP$n identical to one process ($(wc -l < "$work/ep.txt") outputs${applied:+, $applied placements applied})"
  done
done
