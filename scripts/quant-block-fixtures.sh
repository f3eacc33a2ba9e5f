#!/usr/bin/env bash
# Remakes tests/fixtures/quant_blocks/ (scripts/quant-block-fixtures.py says what it holds) end to
# end from a llama.cpp source tree and our build; downloads nothing.
#   usage: scripts/quant-block-fixtures.sh LLAMA_CPP_SRC [OUT_DIR]
#   1. builds llama.cpp for the CPU only (llama-quantize, llama-imatrix) in LLAMA_BUILD
#      (default LLAMA_CPP_SRC/build-cpu);
#   2. `switchyard make-model --preset small-qwen3-moe --format gguf --dtype f32 --seed 7` with
#      Qwen3's tokenizer (every width 256: whole super-blocks; f32 because llama.cpp's CPU
#      backend multiplies f32 activations by no bf16 norm weights; the tokenizer because
#      llama-imatrix tokenizes text and a file without a vocabulary has no tokenizer);
#   3. llama-imatrix over README.md (4 chunks of 128 tokens): IQ1_*, IQ2_XXS and IQ2_XS need one;
#   4. llama-quantize --imatrix to each IQ type with --pure (the type in every 2-D and expert
#      matrix too; the token embedding and output in Q8_0, which llama.cpp's imatrix does not
#      cover), MXFP4_MOE by its own recipe (the expert tensors MXFP4, the rest Q8_0), and
#      mixed-IQ1_M.gguf by IQ1_M's default recipe (a mix of types per tensor, for other tests);
#      ggml's IQ2_S is llama-quantize's IQ2_M recipe (its IQ2_S recipe stores IQ2_XS);
#   5. scripts/quant-block-fixtures.py reads one tensor of each type and writes OUT_DIR
#      (default tests/fixtures/quant_blocks), then checks it (--check).
# The files stay in WORK (default /tmp/iqfx): model/, imatrix.gguf, <TYPE>.gguf, *.log.
# Environment: SWITCHYARD (default build/switchyard), TOKENIZER (a directory with tokenizer.json,
# default .tokenizers/qwen3, which scripts/fetch-tokenizers.sh fetches), WORK, LLAMA_BUILD, JOBS
# (build jobs, default 2), THREADS (default 2), PYTHON (one that has numpy; default: python3 if it
# has, else /usr/bin/python3), IMATRIX_TEXT (default README.md).
set -euo pipefail
[[ $# -ge 1 && -f "$1/CMakeLists.txt" ]] || { sed -n 2,5p "$0" >&2; exit 2; }
src=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
out=${2:-tests/fixtures/quant_blocks}
sy=${SWITCHYARD:-build/switchyard}
tokenizer=${TOKENIZER:-.tokenizers/qwen3}
work=${WORK:-/tmp/iqfx}
lbuild=${LLAMA_BUILD:-$src/build-cpu}
jobs=${JOBS:-2}
threads=${THREADS:-2}
text=${IMATRIX_TEXT:-README.md}
if [[ -z ${PYTHON:-} ]]; then
  PYTHON=python3
  "$PYTHON" -c 'import numpy' 2> /dev/null || PYTHON=/usr/bin/python3
fi
[[ -x $sy ]] || { echo "quant-block-fixtures: no $sy (build Switchyard, or set SWITCHYARD)" >&2; exit 2; }
[[ -f $tokenizer/tokenizer.json ]] || {
  echo "quant-block-fixtures: no $tokenizer/tokenizer.json (scripts/fetch-tokenizers.sh, or set TOKENIZER)" >&2; exit 2; }
"$PYTHON" -c 'import numpy' || { echo "quant-block-fixtures: $PYTHON has no numpy (set PYTHON)" >&2; exit 2; }

mkdir -p "$work"
echo "== 1. llama.cpp (CPU) in $lbuild"
generator=()
[[ ! -f $lbuild/CMakeCache.txt ]] && command -v ninja > /dev/null && generator=(-G Ninja)
# Options an older or newer llama.cpp does not know are only warned about.
cmake -S "$src" -B "$lbuild" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DGGML_NATIVE=ON \
  -DGGML_CCACHE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF > "$work/cmake.log" 2>&1 \
  || { tail -30 "$work/cmake.log" >&2; exit 1; }
cmake --build "$lbuild" -j "$jobs" --target llama-quantize llama-imatrix > "$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; exit 1; }
bin=$lbuild/bin

echo "== 2. model in $work/model"
"$sy" make-model --preset small-qwen3-moe --format gguf --dtype f32 --seed 7 --tokenizer "$tokenizer" \
  --out "$work/model" --force | tail -2

echo "== 3. importance matrix"
"$bin/llama-imatrix" -m "$work/model/model.gguf" -f "$text" -o "$work/imatrix.gguf" -c 128 --chunks 4 \
  -t "$threads" > "$work/imatrix.log" 2>&1 || { tail -30 "$work/imatrix.log" >&2; exit 1; }

echo "== 4. llama-quantize"
quantize() {  # output name, then llama-quantize's options and recipe
  local name=$1
  shift
  "$bin/llama-quantize" --imatrix "$work/imatrix.gguf" "${@:1:$#-1}" "$work/model/model.gguf" \
    "$work/$name.gguf" "${@: -1}" "$threads" > "$work/$name.log" 2>&1 || { tail -30 "$work/$name.log" >&2; exit 1; }
  echo "  $name.gguf: llama-quantize --imatrix $*"
}
pure=(--pure --token-embedding-type q8_0 --output-tensor-type q8_0)
for t in IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ3_XXS IQ3_S IQ4_XS IQ4_NL; do
  quantize "$t" "${pure[@]}" "$t"
done
quantize IQ2_S "${pure[@]}" IQ2_M
quantize MXFP4_MOE MXFP4_MOE
quantize mixed-IQ1_M IQ1_M

echo "== 5. fixtures in $out"
export PYTHONPATH=$src/gguf-py${PYTHONPATH:+:$PYTHONPATH}
"$PYTHON" scripts/quant-block-fixtures.py "$work" "$out"
"$PYTHON" scripts/quant-block-fixtures.py --check "$out"
echo "llama.cpp: $(git -C "$src" log -1 --format='%H %cd' 2> /dev/null || echo "$src (not a git checkout)")"
