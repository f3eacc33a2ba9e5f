#!/usr/bin/env bash
# CI: builds the libFuzzer targets (clang, ASan + UBSan, build-fuzz/) and runs each for a bounded
# time from a fresh scratch corpus plus the committed seeds. Any finding fails the run: a crash, a
# sanitizer report, an uncaught exception, a leak, an input slower than the time-out or one that
# needs more memory than the limit. Findings are kept in build-fuzz/fuzz-findings/. docs/fuzzing.md.
#
#   scripts/ci-fuzz.sh [SECONDS [TARGET...]]   SECONDS per target (default 45); TARGET: fuzz_rules, ...
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_CORPUS_DIR (keep each target's scratch
# corpus in DIR/TARGET across runs instead of a fresh one).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-45}
shift || true
build=${FUZZ_BUILD_DIR:-build-fuzz}
timeout_s=20    # one input: the slowest seed takes ~1 s instrumented
rss_limit_mb=2048

# Each target's committed seeds, dictionary and largest input (bytes); the shipped profiles are
# the rule target's seeds as they are, so that every profile we ship is replayed.
declare -A seeds=(
  [fuzz_safetensors]="tests/fuzz/corpus/safetensors"
  [fuzz_rules]="tests/fuzz/corpus/rules optimize_rules"
  [fuzz_model_config]="tests/fuzz/corpus/model_config"
  [fuzz_gguf]="tests/fuzz/corpus/gguf"
  [fuzz_tokenizer]="tests/fuzz/corpus/tokenizer"
  [fuzz_chat_template]="tests/fuzz/corpus/chat_template"
  [fuzz_openai_request]="tests/fuzz/corpus/openai_request"
)
declare -A dictionary=(
  [fuzz_safetensors]=tests/fuzz/safetensors.dict
  [fuzz_rules]=tests/fuzz/rules.dict
  [fuzz_model_config]=tests/fuzz/model_config.dict
  [fuzz_gguf]=tests/fuzz/gguf.dict
  [fuzz_tokenizer]=tests/fuzz/tokenizer.dict
  [fuzz_chat_template]=tests/fuzz/chat_template.dict
  [fuzz_openai_request]=tests/fuzz/openai_request.dict
)
declare -A max_len=([fuzz_safetensors]=4096 [fuzz_rules]=24576 [fuzz_model_config]=8192 [fuzz_gguf]=4096 [fuzz_tokenizer]=8192 [fuzz_chat_template]=8192 [fuzz_openai_request]=8192)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_safetensors fuzz_rules fuzz_model_config fuzz_gguf fuzz_tokenizer fuzz_chat_template fuzz_openai_request)
for target in "${targets[@]}"; do
  [ -n "${seeds[$target]:-}" ] || { echo "ci-fuzz: unknown target $target; known: ${!seeds[*]}" >&2; exit 2; }
done

scripts/install-sanitizer-deps.sh
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSWITCHYARD_CUDA=OFF -DSWITCHYARD_FUZZ=ON
cmake --build "$build" --target fuzz_targets

# libFuzzer sets ASan's options; UBSan's stack is ours, and libomp keeps no hot teams, whose
# structures it never frees (scripts/ci-sanitizers.sh).
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export KMP_HOT_TEAMS_MAX_LEVEL=0
findings="$build/fuzz-findings"
rm -rf "$findings"
mkdir -p "$findings"
failed=()
for target in "${targets[@]}"; do
  if [ -n "${FUZZ_CORPUS_DIR:-}" ]; then
    scratch="$FUZZ_CORPUS_DIR/$target"
    mkdir -p "$scratch"
  else
    scratch=$(mktemp -d)
  fi
  log="$findings/$target.log"
  echo "ci-fuzz: $target for $seconds s (log $log)"
  # shellcheck disable=SC2086  # the seed directories are a list
  if "$build/tests/$target" "$scratch" ${seeds[$target]} -dict="${dictionary[$target]}" -max_len="${max_len[$target]}" \
      -max_total_time="$seconds" -timeout="$timeout_s" -rss_limit_mb="$rss_limit_mb" \
      -artifact_prefix="$findings/$target-" -print_final_stats=1 > "$log" 2>&1; then
    # "#123 DONE cov: 4153 ft: 10827 corp: 26/61Kb ..." and "Done 1718 runs in 151 second(s)"
    echo "ci-fuzz: $target: no finding; $(grep -E '^Done [0-9]+ runs' "$log" | tail -1);" \
         "$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' "$log" | tail -1)"
  else
    failed+=("$target")
    echo "ci-fuzz: $target: FINDING; the end of its log:"
    tail -n 60 "$log"
    echo "ci-fuzz: the input is $(ls "$findings/$target-"* 2>/dev/null | tr '\n' ' ');" \
         "replay it with $build/tests/$target FILE (docs/fuzzing.md)"
  fi
  [ -n "${FUZZ_CORPUS_DIR:-}" ] || rm -rf "$scratch"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "ci-fuzz: findings in ${failed[*]}"
  exit 1
fi
echo "ci-fuzz: no finding in ${targets[*]}"
