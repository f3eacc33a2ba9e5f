#!/usr/bin/env bash
# CI: the CPU build's doctest suite under AddressSanitizer and UndefinedBehaviorSanitizer (clang,
# build-sanitize/). Every UBSan finding is fatal (-fno-sanitize-recover), and the run fails on any
# sanitizer report, also from the switchyard processes the tests start, whose stderr the tests often
# discard: reports go to files (log_path), printed at the end. docs/fuzzing.md.
# Environment: SANITIZE_BUILD_DIR (default build-sanitize).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SANITIZE_BUILD_DIR:-build-sanitize}

scripts/install-sanitizer-deps.sh
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSWITCHYARD_CUDA=OFF \
  -DSWITCHYARD_SANITIZE=address,undefined
cmake --build "$build"

reports="$(pwd)/$build/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
# log_path: one file per process that reports (asan.PID, ubsan.PID); no file, no finding.
# fast_unwind_on_malloc=0: whole allocation stacks through libomp, which has no frame pointers, so
# that scripts/lsan-suppressions.txt can name libomp's own function (the run takes ~2.5x longer).
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:fast_unwind_on_malloc=0:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$(pwd)/scripts/lsan-suppressions.txt:print_suppressions=0"
status=0
ctest --test-dir "$build" --output-on-failure || status=1
if [ -n "$(ls -A "$reports")" ]; then
  for report in "$reports"/*; do
    echo "==== sanitizer report $report"
    cat "$report"
  done
  echo "ci-sanitizers: sanitizer reports above ($reports)"
  status=1
fi
[ "$status" -eq 0 ] && echo "ci-sanitizers: the ASan/UBSan test run is clean"
exit "$status"
