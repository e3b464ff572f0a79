#!/usr/bin/env bash
# Builds deepinfer (Release) and starts `deepinfer serve` on the embedded default model: the `small`
# DeepSeek-V4 preset with random weights (its text is noise), created on first use in
# ${DEEPINFER_CACHE_DIR:-~/.cache/deepinfer}. Arguments go to `deepinfer serve`, e.g.
#   scripts/serve.sh --port 8080 --api-key secret
#   scripts/serve.sh /path/to/model --served-model-name my-model
# Ctrl-C (SIGINT) or SIGTERM stops it gracefully.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_WERROR=ON >/dev/null
ninja -C build/release deepinfer
bin=build/release/bin/deepinfer

host=127.0.0.1 port=8000 model=deepinfer-small key=""
args=("$@")
# A model directory given first names the model after itself (as `deepinfer serve` does).
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then model="$(basename "$1")"; fi
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --host) host="${args[i + 1]:-$host}" ;;
    --port) port="${args[i + 1]:-$port}" ;;
    --served-model-name) model="${args[i + 1]:-$model}" ;;
    --api-key) key="${args[i + 1]:-}" ;;
    -*) ;;
  esac
done
url="http://$host:$port"
auth=""
[ -n "$key" ] && auth=" -H 'Authorization: Bearer $key'"
cat <<EOF

deepinfer: starting the server at $url (model "$model"); it logs "ready" when it takes requests.
Try, from another terminal:

  curl $url/v1/chat/completions$auth -H 'Content-Type: application/json' \\
    -d '{"model": "$model", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

  .venv/bin/python -c 'from openai import OpenAI
c = OpenAI(base_url="$url/v1", api_key="${key:-none}")
print(c.chat.completions.create(model="$model", messages=[{"role": "user", "content": "Hello!"}], max_tokens=32))'

EOF
exec "$bin" serve "$@"
