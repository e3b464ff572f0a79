#!/usr/bin/env bash
# deepinfer against llama.cpp on the same DeepSeek-V3 weights (a benchmark, not CI): prefill of one 512-token
# prompt and decode at batch 1 and 32 after 256 tokens of context, one system at a time on the same thread
# count, then `deepinfer bench model --peer` prints both and the ratios (ours ÷ llama.cpp's tokens/s).
#
#   tools/peers/compare_v3_llama_cpp.sh CHECKPOINT GGUF [LLAMA_BIN_DIR]
#
# CHECKPOINT: a V3 checkpoint (`deepinfer init-model --arch v3 --preset bench --format bf16 --out DIR`).
# GGUF: the same weights for llama.cpp; when the file is missing it is converted from CHECKPOINT by llama.cpp's
#   own convert_hf_to_gguf.py (it reads DeepseekV3ForCausalLM as `deepseek2`) at CONVERTER (default: the one in
#   the sdist unpacked by setup_llama_cpp.sh --bench), run by CONVERT_PYTHON (a Python with torch), to
#   OUTTYPE (default bf16; q8_0 is llama.cpp's nearest to an FP8 checkpoint).
# LLAMA_BIN_DIR: holds llama-bench and llama-batched-bench (default .peer-llama-bench/build/bin, built by
#   tools/peers/setup_llama_cpp.sh --bench).
# THREADS (default: all cores) goes to both systems; DEEPINFER (default build/release/bin/deepinfer).
# Each phase prints the load average first: on a shared machine the figures are only as steady as that.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ $# -lt 2 ]; then
  sed -n '5,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
checkpoint="$1"
gguf="$2"
bin="${3:-$root/.peer-llama-bench/build/bin}"
threads="${THREADS:-$(nproc)}"
deepinfer="${DEEPINFER:-$root/build/release/bin/deepinfer}"
converter="${CONVERTER:-$root/.peer-llama-bench/llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py}"
prompt=512
context=256
decode_steps=32
reps="${REPS:-3}"

for tool in llama-bench llama-batched-bench; do
  [ -x "$bin/$tool" ] || { echo "no $bin/$tool: run tools/peers/setup_llama_cpp.sh --bench" >&2; exit 1; }
done
[ -x "$deepinfer" ] || { echo "no $deepinfer: build the deepinfer target" >&2; exit 1; }
[ -f "$checkpoint/config.json" ] || { echo "no $checkpoint/config.json" >&2; exit 1; }

if [ ! -f "$gguf" ]; then
  [ -f "$converter" ] || { echo "no converter at $converter: set CONVERTER" >&2; exit 1; }
  "${CONVERT_PYTHON:-python3}" "$converter" "$checkpoint" --outfile "$gguf" --outtype "${OUTTYPE:-bf16}"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }

echo "== llama.cpp: prefill $prompt, decode batch 1 after $context tokens ($threads threads)"; load
"$bin/llama-bench" -m "$gguf" -t "$threads" -r "$reps" -p "$prompt" -n 0 -o json >"$work/prefill.json"
"$bin/llama-bench" -m "$gguf" -t "$threads" -r "$reps" -p 0 -n "$decode_steps" -d "$context" -o json \
  >"$work/decode1.json"
# -pps: the 32 sequences share one 256-token prompt (prefilled once, not 32 times: only the decode is timed
# here, and each sequence still attends its 256 + n entries).
echo "== llama.cpp: decode batch 32 after $context tokens each"; load
if ! "$bin/llama-batched-bench" -m "$gguf" -t "$threads" -c $((32 * (context + decode_steps + 32))) -b 2048 \
  -ub 512 -npp "$context" -ntg "$decode_steps" -npl 32 -pps --output-format jsonl >"$work/decode32.jsonl" \
  2>"$work/decode32.log" || ! grep -q '^{' "$work/decode32.jsonl"; then
  tail -20 "$work/decode32.log" >&2
  exit 1
fi

# The peer file `bench model --peer` reads: tokens/s by prompt length and by batch size.
python3 - "$work" >"$work/peer.json" <<'EOF'
import json, sys
work = sys.argv[1]
prefill = json.load(open(f"{work}/prefill.json"))[0]
decode1 = json.load(open(f"{work}/decode1.json"))[0]
decode32 = [json.loads(l) for l in open(f"{work}/decode32.jsonl") if l.startswith("{")][-1]
system = f"llama.cpp {prefill.get('build_commit', '')} {prefill.get('type_k', '')} kv".strip()
print(json.dumps({"system": system,
                  "prefill": {str(prefill["n_prompt"]): prefill["avg_ts"]},
                  "decode": {"1": decode1["avg_ts"], str(decode32["pl"]): decode32["speed_tg"]}}))
EOF
cat "$work/peer.json"

echo "== deepinfer bench model ($threads threads)"; load
DEEPINFER_THREADS="$threads" "$deepinfer" bench model --model "$checkpoint" --prompts "$prompt" --batches 1,32 \
  --context "$context" --peer "$work/peer.json"
load
