#!/usr/bin/env bash
# Builds the llama.cpp peer for benchmarks (not CI): a separate venv with llama-cpp-python 0.3.36
# (its vendored llama.cpp has the deepseek4 architecture; llama_cpp.server speaks the OpenAI API), the gguf
# package and what llama.cpp's convert_hf_to_gguf.py imports, plus that converter (with its conversion/
# modules and the vendored gguf-py it matches) copied out of the sdist into VENV/share/llama.cpp-0.3.36.
# CPU build from the sdist: tens of minutes on 2 busy cores.
#   tools/peers/setup_llama_cpp.sh [VENV_DIR]        (default: .venv-bench at the repository root)
# Then: tools/peers/llama_cpp_peer.py convert|serve|bench (see its --help).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${1:-$root/.venv-bench}"
python="${PYTHON:-python3}"
version=0.3.36
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# LLAVA_BUILD=OFF: the multimodal library is not needed; ccache makes a rebuild cheap.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DGGML_BLAS=OFF}"
if command -v ccache >/dev/null; then
  CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
nice -n 19 "$venv/bin/pip" install --no-binary llama-cpp-python -r "$root/requirements-bench.txt"

share="$venv/share/llama.cpp-$version"
if [ ! -f "$share/convert_hf_to_gguf.py" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$version"
  tar -xzf "$tmp"/llama_cpp_python-$version.tar.gz -C "$tmp"
  src="$tmp/llama_cpp_python-$version/vendor/llama.cpp"
  mkdir -p "$share/models"
  cp -r "$src/convert_hf_to_gguf.py" "$src/conversion" "$src/gguf-py" "$share/"
  cp -r "$src/models/templates" "$share/models/"
fi
"$venv/bin/python" -c 'import llama_cpp, gguf; print("llama_cpp", llama_cpp.__version__, "gguf ok")'
echo "converter: $share/convert_hf_to_gguf.py"
