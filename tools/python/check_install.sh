#!/usr/bin/env bash
# `pip install .` as a user does it: a clean clone of the committed tree (HEAD) into a temporary directory, a
# fresh virtual environment with nothing in it, and pip's isolated build (scikit-build-core and nanobind come
# from pyproject.toml's build-system; the C++ build needs only the Debian packages of scripts/setup.sh). Then
# the installed package and its console script are run on the embedded default model. Not CI: the build
# compiles the whole project (CI builds the module inside its Release build and packs the wheel from there).
#   tools/python/check_install.sh [--ccache]
# --ccache compiles through ccache when it is installed, with the warning flags of scripts/test.sh's build;
# the build directory is build/wheel inside the clone, so that with CCACHE_BASEDIR set to a directory above
# both, a clone in TMPDIR shares the cache of a checkout's build/release (the same relative paths and flags).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
extra=(-Cbuild-dir=build/wheel)
if [ "${1:-}" = "--ccache" ] && command -v ccache >/dev/null; then
  extra+=(-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache -Ccmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache
         -Ccmake.define.DEEPINFER_WERROR=ON)
fi
start=$(date +%s)
git clone -q --no-local "$root" "$work/src"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "${extra[@]}" "$work/src"
echo "check_install: pip install took $(( $(date +%s) - start ))s"
cd "$work"  # not the source tree: the installed package is what is imported
"$work/venv/bin/deepinfer" --version
DEEPINFER_CACHE_DIR="$work/cache" "$work/venv/bin/python" - <<'PY'
from deepinfer import LLM, SamplingParams
llm = LLM()
out = llm.chat([{"role": "user", "content": "Hello"}], SamplingParams(max_tokens=8, seed=0))
assert len(out[0].outputs[0].token_ids) > 0
print("check_install: LLM() on the embedded default generated", len(out[0].outputs[0].token_ids), "tokens")
PY
