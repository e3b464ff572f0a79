#!/usr/bin/env bash
# Installs everything deepinfer needs on a fresh Debian 12 machine: Debian packages (apt) and the Python
# test/tool packages into .venv. Idempotent: when everything is present it only checks, in about a second.
#   scripts/setup.sh              build + test dependencies
#   scripts/setup.sh --reference  also torch + transformers (fixture generators; large, not for CI)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(
  g++ cmake ninja-build pkg-config git    # toolchain
  libgtest-dev libgmock-dev               # GoogleTest: unit tests
  libbenchmark-dev                        # Google Benchmark: bench/
  nlohmann-json3-dev                      # JSON parsing (requests, config.json, tokenizer.json)
  libxxhash-dev                           # XXH3-128: prefix-block hashes, weights fingerprint, checksums
  liblzma-dev                             # xz: the tokenizers in data/ are stored and embedded compressed
  libboost-dev                            # Boost.Asio/Beast (header-only): the HTTP server (src/server)
  libicu-dev                              # ICU: Unicode normalisation of DeepSeek-V4.1's Engram token map
  clang libclang-rt-14-dev                # libFuzzer targets (fuzz/)
  python3 python3-venv time               # test tooling (GNU time: peak RSS of the hostile-input cases)
  python3-dev                             # Python.h: the Python package's module (src/python)
  liburing-dev libxxhash-dev fio          # KV store: io_uring, XXH3 checksums, the device's limit in bench kvstore
  libfuse2 fuse                           # KV store tests: a slow FUSE filesystem (fusepy), fusermount
  libopenmpi-dev openmpi-bin              # parallel units: the MPI module (src/parallel/mpi) and mpirun
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

requirements=(requirements-test.txt)
[ "${1:-}" = "--reference" ] && requirements+=(requirements-reference.txt)
stamp=".venv/.deepinfer-requirements"
want="$(cat "${requirements[@]}" requirements-test-nodeps.txt | sha256sum | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
have="$(cat "$stamp" 2>/dev/null || true)"
# The stamp records what was installed last; a superset (--reference) also satisfies the plain set-up.
if [ "$have" != "$want" ] && ! grep -qx "$want" "$stamp.all" 2>/dev/null; then
  echo "setup: installing Python packages (${requirements[*]})"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  for r in "${requirements[@]}"; do .venv/bin/python -m pip install -q --disable-pip-version-check -r "$r"; done
  # Packages whose pins conflict with the SDKs above, installed without their dependencies (the file says why).
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements-test-nodeps.txt
  echo "$want" > "$stamp"
  echo "$want" >> "$stamp.all"
fi
