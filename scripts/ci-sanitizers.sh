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
# KMP_HOT_TEAMS_MAX_LEVEL=0: libomp (LLVM 14) keeps no "hot" teams between parallel regions. Its hot
# teams' structures, allocated when a region's thread count grows past the last one's, are never
# freed and would be reported as leaks; without them nothing is left to suppress, and allocation
# stacks can use the fast (frame-pointer) unwinder, which the tests' many processes need to finish
# in CI's time.
export KMP_HOT_TEAMS_MAX_LEVEL=0
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
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
