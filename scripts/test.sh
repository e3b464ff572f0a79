#!/usr/bin/env bash
# Builds deepinfer and runs every test: set-up, Release build with all tests (ctest), an ASan+UBSan build
# running the unit tests, short libFuzzer runs, and the Python tests (pytest).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="$(nproc)"
start=$(date +%s)

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
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_WERROR=ON >/dev/null
ninja -C build/release -j "$jobs"
stage "Release tests"
ctest --test-dir build/release -j "$jobs" --output-on-failure --timeout 900

stage "ASan+UBSan build"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEEPINFER_SANITIZE=ON \
  -DDEEPINFER_WERROR=ON -DDEEPINFER_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
ninja -C build/asan -j "$jobs"
stage "ASan+UBSan unit tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan -j "$jobs" -L unit --output-on-failure --timeout 900

stage "Fuzz build"
CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEEPINFER_FUZZ=ON \
  -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_BUILD_BENCH=OFF >/dev/null
fuzzers=$(ninja -C build/fuzz -t targets all | grep -oE "^fuzz_[A-Za-z0-9_]+" | sort -u)
ninja -C build/fuzz -j "$jobs" $fuzzers
stage "Fuzzers (short runs)"
for fuzzer in build/fuzz/fuzz/fuzz_*; do
  [ -x "$fuzzer" ] || continue
  name="$(basename "$fuzzer")"
  work="$(mktemp -d)"
  corpus=("$work")
  [ -d "fuzz/seeds/${name#fuzz_}" ] && corpus+=("fuzz/seeds/${name#fuzz_}")
  echo "-- $name"
  if ! "$fuzzer" -max_total_time="${DEEPINFER_FUZZ_SECONDS:-20}" -print_final_stats=1 -artifact_prefix="$work/" \
      "${corpus[@]}" >"$work/log" 2>&1; then
    tail -n 60 "$work/log"
    echo "fuzzer $name failed; reproducer kept in $work"
    exit 1
  fi
  grep -E "stat::number_of_executed_units" "$work/log" || true
  rm -rf "$work"
done

stage "Python tests"
export DEEPINFER_BUILD_DIR="$root/build/release" DEEPINFER_ASAN_BUILD_DIR="$root/build/asan"
set +e
.venv/bin/python -m pytest -q tests/python
status=$?
set -e
[ $status -eq 5 ] && { echo "pytest: no Python tests collected"; status=0; }
echo "test.sh: finished in $(( $(date +%s) - start ))s"
exit $status
