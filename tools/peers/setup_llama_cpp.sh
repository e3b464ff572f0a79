#!/usr/bin/env bash
# Builds the llama.cpp peer for benchmarks (not CI): a separate venv with llama-cpp-python 0.3.36
# (its vendored llama.cpp has the deepseek4 architecture; llama_cpp.server speaks the OpenAI API), the gguf
# package and what llama.cpp's convert_hf_to_gguf.py imports, plus that converter (with its conversion/
# modules and the vendored gguf-py it matches) copied out of the sdist into VENV/share/llama.cpp-0.3.36.
# CPU build from the sdist: tens of minutes on 2 busy cores.
#   tools/peers/setup_llama_cpp.sh [VENV_DIR]        (default: .venv-bench at the repository root)
#   tools/peers/setup_llama_cpp.sh --server [DIR]    llama.cpp's C++ llama-server only (default: .peer-llama-server)
#   tools/peers/setup_llama_cpp.sh --bench [DIR]     llama-bench and llama-batched-bench (default: .peer-llama-bench)
#   tools/peers/setup_llama_cpp.sh --converter VENV  only what convert_hf_to_gguf.py imports, into VENV (no
#                                                    llama-cpp-python build); prints the converter's command
# Then: tools/peers/llama_cpp_peer.py convert|serve|bench (see its --help).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-python3}"
version=0.3.36

# The C++ llama-server from the same sdist's vendored llama.cpp: the server llama.cpp's users run (continuous
# batching over -np slots, per-slot prompt cache). Only the server target is built; with ccache a rebuild
# from a fresh source tree is mostly cache hits, because the base dir makes the compile commands relative.
# --bench builds llama.cpp's own benchmark tools from the same tree instead, for compare_v3_llama_cpp.sh.
# --converter: a Python for llama.cpp's own converter (compare_v3_llama_cpp.sh's CONVERT_PYTHON) without the
# tens of minutes of building llama-cpp-python; the converter reads the gguf-py beside it, so no gguf package.
# llama.cpp's converter (with its conversion package, the gguf-py it reads and the chat templates) copied from
# the sdist into VENV/share once; prints that directory.
install_converter() {
  local venv="$1" share="$1/share/llama.cpp-$version"
  if [ ! -f "$share/convert_hf_to_gguf.py" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$version" >&2
    tar -xzf "$tmp"/llama_cpp_python-$version.tar.gz -C "$tmp"
    local src="$tmp/llama_cpp_python-$version/vendor/llama.cpp"
    mkdir -p "$share/models"
    cp -r "$src/convert_hf_to_gguf.py" "$src/conversion" "$src/gguf-py" "$share/"
    cp -r "$src/models/templates" "$share/models/"
  fi
  echo "$share"
}

if [ "${1:-}" = "--converter" ]; then
  venv="${2:?--converter needs a venv directory}"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  nice -n 19 "$venv/bin/pip" install -q torch numpy safetensors sentencepiece transformers protobuf
  share="$(install_converter "$venv")"
  echo "converter: CONVERT_PYTHON=$venv/bin/python CONVERTER=$share/convert_hf_to_gguf.py"
  exit 0
fi

if [ "${1:-}" = "--server" ] || [ "${1:-}" = "--bench" ]; then
  if [ "$1" = "--server" ]; then
    out="${2:-$root/.peer-llama-server}"
    targets=(llama-server)
  else
    out="${2:-$root/.peer-llama-bench}"
    targets=(llama-bench llama-batched-bench)
  fi
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  src="$out/llama_cpp_python-$version/vendor/llama.cpp"
  if [ ! -f "$src/CMakeLists.txt" ]; then
    sdist="$out/llama_cpp_python-$version.tar.gz"
    [ -f "$sdist" ] || "$python" -m pip download -q --no-deps --no-binary :all: -d "$out" "llama-cpp-python==$version"
    tar -xzf "$sdist" -C "$out"
  fi
  launcher=()
  if command -v ccache >/dev/null; then
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$out}" CCACHE_NOHASHDIR=1
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # No web UI download, no HTTPS, no tests or examples: the bench talks plain HTTP to the API only.
  # Release puts -DNDEBUG on every compile line, as llama.cpp's users build it: llama-bench prints "asserts
  # enabled, performance may be affected" when a build lacks it, and such figures are not the peer's.
  cmake -S "$src" -B "$out/build" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_BLAS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_CURL=OFF >/dev/null
  nice -n 19 cmake --build "$out/build" --target "${targets[@]}" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
  # The warning is printed before llama-bench reads its arguments, so --help shows it.
  if [ -x "$out/build/bin/llama-bench" ] && "$out/build/bin/llama-bench" --help 2>&1 | grep -q "asserts enabled"; then
    echo "llama-bench was built with asserts (no NDEBUG): its figures would not be llama.cpp's" >&2
    exit 1
  fi
  for target in "${targets[@]}"; do echo "$target: $out/build/bin/$target"; done
  echo "converter:    $src/convert_hf_to_gguf.py (needs a venv from the default mode)"
  exit 0
fi

venv="${1:-$root/.venv-bench}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# LLAVA_BUILD=OFF: the multimodal library is not needed; ccache makes a rebuild cheap.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DGGML_BLAS=OFF}"
if command -v ccache >/dev/null; then
  CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
nice -n 19 "$venv/bin/pip" install --no-binary llama-cpp-python -r "$root/requirements-bench.txt"

share="$(install_converter "$venv")"
"$venv/bin/python" -c 'import llama_cpp, gguf; print("llama_cpp", llama_cpp.__version__, "gguf ok")'
echo "converter: $share/convert_hf_to_gguf.py"
