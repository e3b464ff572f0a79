#!/usr/bin/env bash
# The server soak (opt-in, never in CI: it takes --hold-seconds plus start-up): starts
# `deepinfer serve` on the embedded default model (`small`, random weights) and holds STREAMS concurrent
# SSE chat streams against it for SECONDS with `deepinfer bench server --hold`, each connection streaming
# chats of TOKENS tokens back to back. Prints every 30 s the open streams, completions, errors and the
# server's RSS, then the held streams' TTFT/TBT p50/p99 and the KV blocks still used after the streams
# close (0 = nothing leaked); the figures also go to JSON (default build/soak_server.json).
#   scripts/soak_server.sh                       # 1,000 streams, 600 s, 256 tokens each
#   STREAMS=200 SECONDS_=60 scripts/soak_server.sh --max-num-seqs 128   # arguments go to `deepinfer serve`
# Needs a Release build (build/release/bin/deepinfer, or DEEPINFER_BUILD_DIR).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin="${DEEPINFER_BUILD_DIR:-$root/build/release}/bin/deepinfer"
[ -x "$bin" ] || { echo "soak_server.sh: $bin not built (ninja -C build/release deepinfer)" >&2; exit 2; }
streams="${STREAMS:-1000}" seconds="${SECONDS_:-600}" tokens="${TOKENS:-256}"
json="${JSON:-$root/build/soak_server.json}"
log="$(mktemp)"
"$bin" serve --port 0 --served-model-name soak "$@" >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
url=""
for _ in $(seq 600); do
  url="$(grep -oE ' ready url=http://[0-9.]+:[0-9]+' "$log" | head -1 | sed 's/ ready url=//')" || true
  [ -n "$url" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
[ -n "$url" ] || { echo "soak_server.sh: serve did not get ready" >&2; cat "$log" >&2; exit 1; }
echo "serve at $url (pid $pid); holding $streams streams for $seconds s; load: $(uptime)"
"$bin" bench server --url "$url" --connections 1 --seconds 1 --stream-tokens 0 \
  --hold "$streams" --hold-seconds "$seconds" --hold-tokens "$tokens" --json "$json"
echo "figures in $json; load: $(uptime)"
kill -TERM $pid
status=0
wait $pid || status=$?
trap 'rm -f "$log"' EXIT
grep -E " stopped" "$log" || true
exit $status
