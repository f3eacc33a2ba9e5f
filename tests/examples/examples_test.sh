#!/usr/bin/env bash
# Switchyard as a library, the way a user gets it: `cmake --install` of the build into a fresh
# prefix, examples/ configured and built on its own against that prefix (find_package), every
# installed header compiled by a program that sees only the install (all_headers/), then the
# examples run:
#   - check_profile prints exactly the table of `switchyard check` with the same profile and
#     model, and exits as it does, for a shipped profile and for a broken one;
#   - stream_tokens runs a make-model checkpoint: MAX_NEW_TOKENS ids, each in the vocabulary, the
#     same ones again with the same seed; with a tokenizer beside the weights, a text prompt and
#     each token's text.
#   usage: examples_test.sh CMAKE BUILD_DIR SOURCE_DIR [CMAKE_ARGUMENT...]
# CMAKE_ARGUMENTs go to the examples' configure: the build's generator, compiler and compiler
# launcher (a sanitizer build's libraries need its compiler's runtime; ccache keeps reruns cheap).
set -euo pipefail
cmake=$1
build=$(cd "$2" && pwd)
source=$(cd "$3" && pwd)
shift 3
# A scratch directory at a fixed path, so that a compiler launcher's cache (ccache) recognises
# the examples' compile commands on the next run; removed when done.
work=$build/library_examples_test
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "examples_test: $*" >&2; exit 1; }
step() { echo "== $*"; }

prefix=$work/prefix
step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" || fail "cmake --install failed: $(cat "$work/install.log")"
for file in bin/switchyard lib/cmake/Switchyard/SwitchyardConfig.cmake lib/cmake/Switchyard/SwitchyardConfigVersion.cmake \
            include/switchyard/placement/check.h include/switchyard/operators/model/causal_lm.h; do
  [[ -f $prefix/$file ]] || fail "the install has no $file"
done
switchyard=$prefix/bin/switchyard

step "examples/ against $prefix"
examples=$work/examples-build
"$cmake" -S "$source/examples" -B "$examples" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "$@" \
  > "$work/configure.log" 2>&1 || fail "configuring examples/ failed: $(cat "$work/configure.log")"
grep -qx "Switchyard_DIR:PATH=$prefix/lib/cmake/Switchyard" "$examples/CMakeCache.txt" ||
  fail "find_package(Switchyard) did not find the install: $(grep Switchyard_DIR "$examples/CMakeCache.txt")"
"$cmake" --build "$examples" > "$work/build.log" 2>&1 || fail "building examples/ failed: $(cat "$work/build.log")"
# Only the install's headers, not the source tree's (the build's include directory is its root).
if grep -rhoE --include=build.ninja --include=flags.make -e "-(I|isystem) ?$source/?( |$)" "$examples"; then
  fail "the examples were compiled with the source tree's headers"
fi

step "every installed header, in a program that sees only the install"
headers=$work/all-headers-build
"$cmake" -S "$source/tests/examples/all_headers" -B "$headers" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "$@" \
  > "$work/headers.log" 2>&1 && "$cmake" --build "$headers" >> "$work/headers.log" 2>&1 ||
  fail "the installed headers do not compile in a program: $(cat "$work/headers.log")"

model=$work/tiny
"$switchyard" make-model --preset tiny-deepseek-v3 --out "$model" > /dev/null || fail "make-model failed"

step "check_profile"
# The same plan and the same exit status as `switchyard check`, whose last line is its timing.
check_same() {
  local name=$1 profile=$2 model=$3 budget=$4 expected_status=$5 status=0
  "$examples/check_profile" "$profile" "$model" "$budget" > "$work/example.txt" 2> "$work/example.err" || status=$?
  [[ $status == "$expected_status" ]] || fail "check_profile ($name) exited $status, not $expected_status: $(cat "$work/example.err")"
  local source_flag=--arch
  [[ -d $model ]] && source_flag=--model_path
  status=0
  "$switchyard" check --optimize_config_path "$profile" $source_flag "$model" --gpu_memory "$budget" 2> /dev/null |
    grep -v '^checked [0-9]* modules in ' > "$work/check.txt" || status=${PIPESTATUS[0]}
  [[ $status == "$expected_status" ]] || fail "switchyard check ($name) exited $status, not $expected_status"
  grep -q "^MODULES " "$work/example.txt" || fail "check_profile ($name) printed no table: $(cat "$work/example.txt")"
  diff -u "$work/check.txt" "$work/example.txt" || fail "check_profile ($name) and switchyard check print different plans"
}
check_same "DeepSeek-V3 on 8 GPUs" "$source/optimize_rules/DeepSeek-V3-Chat-multi-gpu-8.yaml" deepseek-v3 80GiB 0
# A regex that does not compile: exit 1, and the table names the profile's line.
cat > "$work/broken.yaml" << 'EOF'
- match:
    name: '^model\.layers\.(\d+'
  replace:
    class: default
    kwargs: {generate_device: "cpu", prefill_device: "cpu"}
EOF
check_same "a broken regex" "$work/broken.yaml" "$model" 24GiB 1
grep -q "broken.yaml:2" "$work/example.txt" || fail "check_profile did not name the broken regex's line: $(cat "$work/example.txt")"
status=0
"$examples/check_profile" "$work/no-such.yaml" "$model" 2> "$work/example.err" > /dev/null || status=$?
[[ $status == 2 ]] || fail "check_profile with a missing profile exited $status, not 2"
grep -q "^check_profile: error: .*no-such.yaml" "$work/example.err" || fail "check_profile's error: $(cat "$work/example.err")"

step "stream_tokens"
vocab=$(grep -o '"vocab_size": *[0-9]*' "$model/config.json" | grep -o '[0-9]*$')
# The generated ids: one line each, after the prompt's line and before the finish line.
stream() {
  "$examples/stream_tokens" "$@" > "$work/stream.txt" 2> "$work/stream.err" || fail "stream_tokens $* exited $?: $(cat "$work/stream.err")"
  grep -q "^prompt: [0-9]* ids$" "$work/stream.txt" && grep -q "^finish: " "$work/stream.txt" ||
    fail "stream_tokens $* printed: $(cat "$work/stream.txt")"
  sed -n '/^prompt: /,/^finish: /p' "$work/stream.txt" | sed '1d;$d' | cut -d' ' -f1
}
for sampling in "0" "0.8 7"; do
  first=$(stream "$model" 1,2,3 12 $sampling)
  [[ $(wc -l <<< "$first") == 12 ]] || fail "stream_tokens (temperature ${sampling%% *}) gave not 12 ids: $first"
  while read -r id; do
    [[ $id =~ ^[0-9]+$ ]] && (( id < vocab )) || fail "stream_tokens gave '$id', not an id of the vocabulary of $vocab"
  done <<< "$first"
  [[ $(stream "$model" 1,2,3 12 $sampling) == "$first" ]] || fail "stream_tokens (temperature ${sampling%% *}) is not deterministic"
done
status=0
"$examples/stream_tokens" "$work/no-such-model" 1,2,3 > /dev/null 2> "$work/stream.err" || status=$?
[[ $status == 2 ]] || fail "stream_tokens without a model exited $status, not 2: $(cat "$work/stream.err")"

tokenizer=$source/.tokenizers/deepseek_v3
if [[ -f $tokenizer/tokenizer.json ]]; then
  "$switchyard" make-model --preset tiny-deepseek-v3 --tokenizer "$tokenizer" --out "$model-text" > /dev/null || fail "make-model --tokenizer failed"
  stream "$model-text" "Why is the sky blue?" 6 0.7 3 > /dev/null
  # Each token's line: its id and its text as a JSON string.
  lines=$(sed -n '/^prompt: /,/^finish: /p' "$work/stream.txt" | sed '1d;$d')
  [[ -n $lines ]] || fail "stream_tokens with a tokenizer gave no tokens: $(cat "$work/stream.txt")"
  grep -vqE '^[0-9]+ ".*"$' <<< "$lines" && fail "stream_tokens with a tokenizer printed: $lines"
  grep -qE "^prompt: ([2-9]|[1-9][0-9]+) ids$" "$work/stream.txt" || fail "the text prompt was not encoded: $(cat "$work/stream.txt")"
else
  echo "(no $tokenizer: the text half is skipped; scripts/fetch-tokenizers.sh fetches it)"
fi
echo "examples_test: the installed package builds the examples, and they work"
