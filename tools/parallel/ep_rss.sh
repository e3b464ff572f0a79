#!/usr/bin/env bash
# Resident memory per rank of an expert-parallel unit at 1, 2 and 4 ranks: each rank maps the whole
# checkpoint but keeps only its own experts' pages. Starts `mpirun -n N deepinfer generate` on MODEL (any
# V4 / V4.1 checkpoint whose routed experts 4 divides), reads every rank's VmRSS once all are generating,
# and ends the run.
# Usage: tools/parallel/ep_rss.sh MODEL_DIR [--deepinfer BIN] [--ranks "1 2 4"]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=${1:?usage: ep_rss.sh MODEL_DIR [--deepinfer BIN] [--ranks "1 2 4"]}
shift
deepinfer=$root/build/release/bin/deepinfer
rank_counts="1 2 4"
while (($#)); do
  case $1 in
    --deepinfer) deepinfer=$2; shift 2 ;;
    --ranks) rank_counts=$2; shift 2 ;;
    *) echo "ep_rss.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
source "$root/tests/parallel/mpi_env.sh"
for n in $rank_counts; do
  ep=()
  ((n > 1)) && ep=(--data-parallel-size "$n" --enable-expert-parallel)
  prompts=()
  for i in $(seq 1 "$n"); do prompts+=(--prompt-ids "$i,2,3"); done
  mpirun "${MPIRUN_ARGS[@]}" -n "$n" "$deepinfer" generate --model "$model" "${prompts[@]}" --max-tokens 100000 \
      --ignore-eos --kv-cache-mib 64 --max-num-seqs 4 "${ep[@]}" > /dev/null 2>&1 &
  launcher=$!
  for _ in $(seq 1 1200); do
    stepping=0
    for child in $(pgrep -P "$launcher"); do
      grep -qx di-engine-step /proc/"$child"/task/*/comm 2>/dev/null && stepping=$((stepping + 1))
    done
    ((stepping >= n)) && break
    sleep 0.05
  done
  sleep 1
  line="ranks $n: VmRSS per rank (MiB):"
  for child in $(pgrep -P "$launcher"); do
    kb=$(awk "/^VmRSS/ {print \$2}" /proc/"$child"/status); grep -E "RssAnon|RssFile" /proc/"$child"/status | tr -s " \t\n" " " >&2
    line+=" $((kb / 1024))"
  done
  echo "$line"
  for child in $(pgrep -P "$launcher"); do kill -9 "$child" 2>/dev/null; done
  wait "$launcher" 2>/dev/null
done
