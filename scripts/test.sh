#!/usr/bin/env bash
# Builds deepinfer and runs every test: set-up, Release build with all tests (ctest), an ASan+UBSan build
# running the unit tests, short libFuzzer runs, and the Python tests (pytest). This is what CI runs.
#
# scripts/test.sh --quick: the local loop. Set-up, the Release build (incremental, through ccache when it is
# installed), then only the tests a change can reach: the C++ unit tests of every component the change
# touches and of every component that depends on one of them (the declared graph, build/release/
# layering.cmake), the layering checks, and the Python tests of those components. The change is what differs
# from DEEPINFER_QUICK_BASE (default: the merge-base with the branch's upstream, else HEAD), committed or not,
# plus untracked files; a change outside src/ and tests/ (CMake, scripts) reaches every component.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="$(nproc)"
start=$(date +%s)
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

# Stage timings, printed at the end (also when a stage fails): wall seconds and CPU seconds (user+sys of
# everything the stage ran, from the shell's reaped children; load-independent, unlike wall time).
stage_names=() stage_walls=() stage_cpus=()
ticks="$(getconf CLK_TCK)"
cpu_now() { awk -v t="$ticks" '{ printf "%.1f", ($16 + $17) / t }' "/proc/$$/stat"; }
stage_end() {
  [ -n "${stage_name:-}" ] || return 0
  stage_names+=("$stage_name")
  stage_walls+=("$(( $(date +%s) - stage_wall0 ))")
  stage_cpus+=("$(awk -v a="$(cpu_now)" -v b="$stage_cpu0" 'BEGIN { printf "%.0f", a - b }')")
  stage_name=""
}
stage() {
  stage_end
  echo "== $1"
  stage_name="$1" stage_wall0=$(date +%s) stage_cpu0="$(cpu_now)"
}
report_stages() {
  local rc=$?
  stage_end
  echo "== Stage timings (wall s, CPU s)"
  local i total_cpu=0
  for i in "${!stage_names[@]}"; do
    printf "  %-28s %6s %7s\n" "${stage_names[$i]}" "${stage_walls[$i]}" "${stage_cpus[$i]}"
    total_cpu=$(( total_cpu + stage_cpus[i] ))
  done
  printf "  %-28s %6s %7s\n" "total" "$(( $(date +%s) - start ))" "$total_cpu"
  return $rc
}
trap report_stages EXIT
# Every test's data is in the repository or installed by setup.sh: a test that skips for missing data fails.
export DEEPINFER_REQUIRE_DATA=1

stage "Set-up"
scripts/setup.sh

stage "Release build"
launcher=()
pch=ON
# A build from scratch compiles each library as one unity batch (what its files share is compiled once, not once
# per batch of eight), and ctest runs each test executable whole rather than a process per GoogleTest case (what a
# file's cases share is loaded once); the local loop keeps batches of eight, quicker to rebuild after an edit, and
# a ctest test per case. CMakeLists.txt says more.
build_shape=(-DDEEPINFER_UNITY_BATCH_SIZE=0 -DDEEPINFER_TEST_PER_CASE=OFF)
if [ $quick = 1 ]; then
  build_shape=(-DDEEPINFER_UNITY_BATCH_SIZE=8 -DDEEPINFER_TEST_PER_CASE=ON)
fi
if [ $quick = 1 ] && command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  pch=OFF  # ccache does not cache what is compiled against a precompiled header
fi
# Both builds compile the libraries with their build type's flags and the test executables' own code with
# little optimisation (DEEPINFER_TEST_COMPILE_OPTIONS, CMakeLists.txt): a test file is small and runs briefly,
# but optimising GoogleTest's and nlohmann::json's templates in it costs more than all the tests' run time. Here
# -Og, which keeps gcc's warnings that need the optimiser's data flow (maybe-uninitialized and the like);
# DEEPINFER_PCH compiles the headers every test file includes once for all of them.
# The Python package's module is part of this build (src/python; every library position-independent), so the
# package is tested from build/release/python without compiling the project a second time.
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_WERROR=ON "${launcher[@]}" \
  -DDEEPINFER_TEST_COMPILE_OPTIONS=-Og -DDEEPINFER_PCH=$pch "${build_shape[@]}" \
  -DDEEPINFER_PYTHON=ON -DPython_EXECUTABLE="$root/.venv/bin/python" >/dev/null
ninja -C build/release -j "$jobs"

if [ $quick = 1 ]; then
  stage "Tests the change reaches"
  base="${DEEPINFER_QUICK_BASE:-}"
  if [ -z "$base" ]; then
    base="$(git merge-base HEAD '@{upstream}' 2>/dev/null || git rev-parse HEAD)"
  fi
  changed="$( { git diff --name-only "$base"; git ls-files --others --exclude-standard; } | sort -u)"
  # Components named by the change, then every component whose dependency closure holds one of them.
  components="$(scripts/quick_components.sh build/release/layering.cmake <<<"$changed")"
  if [ -z "$components" ]; then
    echo "no change against $(git rev-parse --short "$base"): nothing to test"
    exit 0
  fi
  echo "components: $components"
  # Each component's unit tests are one GoogleTest executable (cmake/Component.cmake); run them directly.
  for c in $components; do
    exe="build/release/tests/$c/${c}_tests"
    [ -x "$exe" ] || continue
    echo "-- $exe"
    "$exe" --gtest_brief=1
  done
  ctest --test-dir build/release -j "$jobs" --output-on-failure -R '^(layering|thread_safety)'
  python_dirs=()
  for c in $components; do [ -d "tests/python/$c" ] && python_dirs+=("tests/python/$c"); done
  # The package's tests (tests/python/api) reach every component through the module.
  for c in $components; do [ "$c" = python ] && python_dirs+=(tests/python/api); done
  if ((${#python_dirs[@]})); then
    # Only the Release build exists here: tests that need the sanitizer build or the hostile corpus skip.
    export DEEPINFER_BUILD_DIR="$root/build/release" DEEPINFER_REQUIRE_DATA=0
    .venv/bin/python -m pytest -q -x "${python_dirs[@]}"
  fi
  exit 0
fi
stage "Release tests"
ctest --test-dir build/release -j "$jobs" --output-on-failure --timeout 900

stage "Python wheel"
# `pip wheel .` through pyproject.toml (scikit-build-core) on the Release build above: its configure step
# changes nothing that is compiled, so this packages what was built, and the wheel is installed into a scratch
# directory and run. A build from a clean clone in a fresh virtual environment is tools/python/check_install.sh.
rm -rf build/wheel build/wheel-check
.venv/bin/python -m pip wheel -q --no-build-isolation --no-deps --disable-pip-version-check -w build/wheel \
  -Cbuild-dir=build/release -Ccmake.define.DEEPINFER_BUILD_TESTS=ON -Ccmake.define.DEEPINFER_BUILD_BENCH=ON .
.venv/bin/python -m pip install -q --no-deps --disable-pip-version-check --target build/wheel-check build/wheel/*.whl
PYTHONPATH=build/wheel-check build/wheel-check/bin/deepinfer --version
PYTHONPATH=build/wheel-check .venv/bin/python -c \
  "import deepinfer; assert deepinfer.Tokenizer('deepseek-v4').decode(deepinfer.Tokenizer('deepseek-v4').encode('wheel')) == 'wheel'"

stage "Hostile-input corpus"
# tests/python/hostile runs it; it also seeds the fuzzers.
rm -rf build/hostile
.venv/bin/python tools/hostile/gen_corpus.py --deepinfer "$root/build/release/bin/deepinfer" --out build/hostile

# One clang build serves both the ASan+UBSan unit tests and the fuzzers: every library is compiled once with
# -fsanitize=fuzzer-no-link,address,undefined (DEEPINFER_SANITIZE + DEEPINFER_FUZZ) at -O1; the tests and the CLI
# link the sanitizer runtimes only, the fuzz mains add libFuzzer. The tests' and bench targets' own code, never
# linked into a fuzzer, is compiled with the sanitizers but without coverage counters, at the libraries' -O1: an
# inline function (a header template such as nlohmann::json's) compiled in both a test object and a library keeps
# one copy at link time, often the test object's, so test code at -O0 would make the libraries' own calls into
# such headers run unoptimised under the sanitizers (a grammar test then ran past its translation deadline).
# Asserts stay on (no NDEBUG), and -gline-tables-only keeps file:line
# in every report at a fraction of full debug info's cost; warnings are errors in the gcc Release build above.
# This halves the sanitizer stages' compile time against a gcc ASan+UBSan build plus a separate clang build of
# the fuzzers, which DEEPINFER_ONE_CLANG_BUILD=0 still gives.
if [ "${DEEPINFER_ONE_CLANG_BUILD:-1}" = 1 ]; then
  sanitize_dir=build/sanitize fuzz_dir=build/sanitize/fuzz
  stage "ASan+UBSan+fuzz build (clang)"
  CC=clang CXX=clang++ cmake -S . -B "$sanitize_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDEEPINFER_SANITIZE=ON -DDEEPINFER_FUZZ=ON -DDEEPINFER_BUILD_BENCH=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DDEEPINFER_TEST_COMPILE_OPTIONS=-O1 \
    -DDEEPINFER_PCH=ON "${build_shape[@]}" >/dev/null
  ninja -C "$sanitize_dir" -j "$jobs"
else
  sanitize_dir=build/asan fuzz_dir=build/fuzz/fuzz
  stage "ASan+UBSan build"
  cmake -S . -B "$sanitize_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEEPINFER_SANITIZE=ON \
    -DDEEPINFER_WERROR=ON -DDEEPINFER_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    "${build_shape[@]}" >/dev/null
  ninja -C "$sanitize_dir" -j "$jobs"
fi
stage "ASan+UBSan unit tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$sanitize_dir" -j "$jobs" -L unit --output-on-failure --timeout 900

if [ "${DEEPINFER_ONE_CLANG_BUILD:-1}" != 1 ]; then
  stage "Fuzz build"
  CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEEPINFER_FUZZ=ON \
    -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_BUILD_BENCH=OFF >/dev/null
  fuzzers=$(ninja -C build/fuzz -t targets all | grep -oE "^fuzz_[A-Za-z0-9_]+" | sort -u)
  ninja -C build/fuzz -j "$jobs" $fuzzers
fi
stage "Fuzzers (short runs)"
# Every fuzzer runs its seeds, then the number of inputs fuzz/ci_runs.txt gives it from a fixed -seed
# (DEEPINFER_FUZZ_SEED, default 1): the same exploration on every run, so the verdict depends on the code, not
# on the machine's speed. DEEPINFER_FUZZ_SEED=0 explores at random for DEEPINFER_FUZZ_SECONDS (default 20) instead.
# -max_total_time caps a run either way; $jobs run at a time (15 fuzzers on 2 cores: about 3 minutes).
# -timeout makes an input that runs longer than 120 s (wall, so a loaded machine has slack) a failure, a
# hang, instead of a stage that never ends.
run_fuzzer() {
  local fuzzer="$1" name work out rc=0 runs seed="${DEEPINFER_FUZZ_SEED:-1}"
  name="$(basename "$fuzzer")"
  work="$(mktemp -d)"
  local corpus=("$work") budget=(-max_total_time="${DEEPINFER_FUZZ_SECONDS:-20}")
  [ -d "fuzz/seeds/${name#fuzz_}" ] && corpus+=("fuzz/seeds/${name#fuzz_}")
  [ -d "build/hostile/fuzz/${name#fuzz_}" ] && corpus+=("build/hostile/fuzz/${name#fuzz_}")
  if [ "$seed" != 0 ]; then
    runs="$(awk -v n="${name#fuzz_}" '$1 == n { print $2 }' fuzz/ci_runs.txt)"
    [ -n "$runs" ] || { echo "fuzzer $name has no entry in fuzz/ci_runs.txt"; return 1; }
    budget=(-seed="$seed" -runs="$runs" -max_total_time=300)
  fi
  "$fuzzer" "${budget[@]}" -timeout=120 -print_final_stats=1 \
    -artifact_prefix="$work/" "${corpus[@]}" >"$work/log" 2>&1 || rc=$?
  # One block of output per fuzzer, written at once, so parallel runs do not interleave.
  if [ $rc -ne 0 ]; then
    out="$(tail -n 60 "$work/log")"
    printf -- "-- %s\n%s\nfuzzer %s failed (exit %s); reproducer kept in %s\n" "$name" "$out" "$name" "$rc" "$work"
    return 1
  fi
  printf -- "-- %s %s\n" "$name" "$(grep -E "stat::number_of_executed_units" "$work/log" || true)"
  rm -rf "$work"
}
export -f run_fuzzer
fuzz_bins=()
for fuzzer in "$fuzz_dir"/fuzz_*; do if [ -x "$fuzzer" ]; then fuzz_bins+=("$fuzzer"); fi; done
((${#fuzz_bins[@]})) || { echo "no fuzzers built"; exit 1; }
printf "%s\0" "${fuzz_bins[@]}" | xargs -0 -n 1 -P "$jobs" bash -c 'run_fuzzer "$1"' _ \
  || { echo "fuzzers: at least one failed (above)"; exit 1; }

stage "Python tests"
export DEEPINFER_BUILD_DIR="$root/build/release" DEEPINFER_ASAN_BUILD_DIR="$root/$sanitize_dir"
export DEEPINFER_HOSTILE_DIR="$root/build/hostile"
set +e
# The slowest tests are listed so that one growing past a few seconds is seen (CI must stay under 25 min).
# Much of a test's time is a server or CLI process starting and waiting for its child: two workers
# (pytest-xdist), each taking whole files so that a file's module fixtures start once, fill both cores.
# The load tests (marker `alone`) bound a server's memory under its own load; beside the other workers' servers
# its steps slow down, batches grow and so do its buffers, so they run afterwards with nothing beside them.
.venv/bin/python -m pytest -q -n "$jobs" --dist loadfile --durations=15 -m "not alone" tests/python
status=$?
.venv/bin/python -m pytest -q -m alone tests/python
alone_status=$?
set -e
[ $status -eq 5 ] && { echo "pytest: no Python tests collected"; status=0; }
[ $alone_status -eq 5 ] && { echo "pytest: no load tests collected"; alone_status=1; }
[ $status -ne 0 ] || status=$alone_status
echo "test.sh: finished in $(( $(date +%s) - start ))s"
exit $status
