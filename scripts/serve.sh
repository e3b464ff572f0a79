#!/usr/bin/env bash
# Builds deepinfer (Release) and runs it on the embedded default model (the `small` preset, created on
# first use under build/release/models/small).
# The HTTP server does not exist yet. Until it does, this runs the most complete pipeline that works
# today, `deepinfer generate`: one Chat Completions request through request parsing, prompt rendering,
# tokenization, the DeepSeek-V4 forward pass (random weights) and output parsing, streamed as SSE.
# Arguments replace the default prompt's options, e.g.  scripts/serve.sh --prompt "Hi" --max-tokens 16
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_WERROR=ON >/dev/null
ninja -C build/release deepinfer
bin=build/release/bin/deepinfer
model=build/release/models/small
if [ ! -f "$model/config.json" ]; then
  "$bin" init-model --preset small --out "$model"
fi
echo
echo "deepinfer: there is no HTTP server yet (see README, Features). Running the most complete thing that"
echo "deepinfer: works today instead: one request through the whole pipeline with 'deepinfer generate' on the"
echo "deepinfer: default model ($model, random weights, so the text is noise)."
echo
if [ $# -eq 0 ]; then
  set -- --prompt "Hello! What can you do?" --max-tokens 48
fi
exec "$bin" generate --model "$model" --stream "$@"
