#!/usr/bin/env bash
# On the GPU machine: GGUF files side by side with llama.cpp (../shared/device/PEERS.md). Builds
# Switchyard and the llama.cpp staged in .peer/llama.cpp (both carried), writes DeepSeek-V2-Lite
# shapes with `make-model --format gguf`, then
#   formats: llama.cpp's quantizer requantizes our bf16 file of a 2-layer shape to each type; our
#            reader decodes its blocks against gguf-py's values (tests/core/test_gguf_peer.cpp);
#            llama.cpp loads and runs our quantised files (llama-bench, 16 tokens).
#   bench:   a 14-layer shape in Q4_K_M and Q8_0: decode and 512-token prefill with the experts on
#            the CPU and the rest on the GPU, ours (`bench decode`, STREAM in the same run) and
#            llama.cpp's (`llama-bench -ngl 99 -ot exps=CPU -fa 1`) on the same files, 16 threads.
#   fit:     llama.cpp's placement flags run: the 14-layer Q4_K_M shape with --fit under a forced
#            --gpu_memory budget (bench decode: speed beside the plan's ceilings; run: RSS and
#            tokens), check --fit on the H200's free memory, -ngl with whole layers on the CPU,
#            and llama.cpp on the -ot string the fit printed.
#   kernels: the CPU machine's view of the quantised kernels: its topology, the kernels' tests, and
#            `bench experts` per block type at 16, 8 and 1 threads (decode and 512-token prefill).
#   marlin:  every test (GPU ones included), the block-type GPU kernels' tests verbosely, and
#            `bench gemv` per weight type (the decode GEMV on blocks kept in HBM).
#   marlin-bench: the 14-layer Q4_K_M and Q8_0 shapes decoded with the GPU's projections dequantized
#            at load (KLinearTorch) and kept in blocks (KLinearMarlin), hybrid and all-GPU, beside
#            llama.cpp's -ngl 99 with and without -ot exps=CPU.
#   experts-gpu: the GPU routed experts on blocks (KExpertsMarlin): their kernels' tests, the GGUF
#            fidelity on the GPU with experts there, the builders' and the folded multi-GPU tests.
#   tests:   every test (the GPU ones included), while llama.cpp builds.
#   iq:      the IQ types and MXFP4 from llama.cpp's own tools: an importance matrix of our f32
#            file (llama-imatrix), then per type of IQ_TYPES (default IQ4_XS MXFP4_MOE IQ2_XXS
#            IQ1_S) llama-quantize, gguf-py's values, and the IQ_LAYERS-layer (14) V2-Lite shape
#            decoded with the experts on the CPU: ours (`bench decode`, STREAM in the same run)
#            beside `llama-bench -ngl 99 -ot exps=CPU -fa 1` (and ik_llama.cpp's with -mla 3 -fmoe 1
#            where /tmp/ik holds its build: ../shared/device/PEERS.md), 16 threads; last, the gguf
#            peer test on every type's values.
#   greedy:  a 6-layer shape with DeepSeek-V3's tokenizer in Q8_0 and Q4_K_M, one prompt, 32 greedy
#            tokens from llama.cpp (llama-completion) and from us (run --prompt), same placement;
#            then 8 more prompts, 4 tokens each (how often the two engines' first choices agree); then
#            the same on models made with --head_tokens (well separated choices). GREEDY_VARIANTS,
#            GREEDY_HEAD_TOKENS (16) and GREEDY_SHORT (how many of the 8 short prompts) narrow it.
#   prefill: the quantised kernels' tests and the GPU embedding's, then PREFILL_AB's CPU kernel
#            options (NAME=VALUE[,...]; default cpu_tile_block_rows=256: the tiles prefill's blocks
#            of 256 rows) against the defaults, A/B in one process: `bench experts` per block type (64 experts,
#            with the tiles prefill's stages timed apart) and `bench decode` of the 14-layer Q4_K_M
#            and Q8_0 shapes (prefill 512 with the experts on the CPU, and decode with its profile
#            table), then DECODE_AB's options (default: the quantised decode without prefetch,
#            panels 8 chunks at a time; comma-separated sets, space-separated runs; "" for none)
#            the same way; `run` for load time and RSS (its resident split), and
#            llama-bench on each file (PEER=0: without llama.cpp).
#            EXPERTS_SPECS="q8_0 deepseek-v2-lite;..." picks the bench experts runs ("" for none);
#            PREFILL_TESTS=0 leaves the tests out (after `tests` on the same machine).
#   peer:    llama-bench alone on the 14-layer Q4_K_M and Q8_0 files (experts on the CPU, 16 threads).
#   usage: scripts/gpu-gguf.sh [formats|iq|bench|fit|kernels|marlin|marlin-bench|experts-gpu|greedy|prefill|peer|all] ...
#          (several at once; the logs in $OUT/logs.tar.gz)
# Needs .device-deps as scripts/gpu-machine.sh says, .peer/llama.cpp (../shared/device/PEERS.md) for
# the sections that run llama.cpp, and .tokenizers (carried).
set -uo pipefail
what=" ${*:-all} "
want() { [[ $what == *" $1 "* || $what == *" all "* ]]; }
# The logs go to /tmp and leave in one archive: the device tool brings back at most 8 files from
# $OUT. Tee this script's own output into $OUT too (it is the summary).
final=${OUT:-/tmp/switchyard-out}
out=/tmp/switchyard-logs
rm -rf "$out"
mkdir -p "$out" "$final"
trap 'tar -czf "$final/logs.tar.gz" -C "$out" . 2> /dev/null' EXIT
for f in .device-deps/*.deb; do dpkg -x "$f" /opt/deps; done
export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps
# llama.cpp builds beside ours, for the sections that run it; each waits for it (peer_ready) only
# when it first needs it, so that tests and model files are made meanwhile.
lcpp=""
needs_peer=false
for section in greedy marlin-bench formats bench fit peer prefill iq; do want $section && needs_peer=true; done
if $needs_peer && [[ ${PEER:-1} == 1 && ! -x /tmp/lcpp/bin/llama-bench ]]; then
  bash .peer/llama.cpp/llama-cpp-build.sh > "$out/lcpp-build.log" 2>&1 &
  lcpp=$!
fi
peer_ready() {
  [[ -n $lcpp ]] && { wait "$lcpp"; lcpp=""; echo "llama.cpp built: $(date +%T)"; }
  [[ -x /tmp/lcpp/bin/llama-bench ]] || { tail -30 "$out/lcpp-build.log"; exit 1; }
}
{ cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/opt/deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build build-dev -j16; } > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "ours built: $(date +%T)"
tests=""
if want tests; then  # while llama.cpp still builds
  { timeout 500 ./build-dev/tests/switchyard_tests > "$out/tests.log" 2>&1; echo "exit $?" >> "$out/tests.log"; } &
  tests=$!
fi
if [[ -n $tests ]]; then
  wait "$tests"
  echo "tests $(tail -1 "$out/tests.log"): $(grep -E 'test cases' "$out/tests.log")"; grep -E 'ERROR|FATAL' -B3 -A6 "$out/tests.log" | head -60
fi
bin=./build-dev/switchyard
m=/tmp/switchyard-gguf
mkdir -p $m
if want kernels; then
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L2|L3' | tr -s ' '
  timeout 120 ./build-dev/tests/switchyard_tests -tc='quant*,cpu kernels*,gguf fidelity*,fidelity*' > "$out/kernel-tests.log" 2>&1
  echo "kernel tests exit $?: $(grep -E 'test cases' "$out/kernel-tests.log")"; grep -E 'ERROR' -A4 "$out/kernel-tests.log" | head -20
  for spec in "q4_k deepseek-v3 16" "q6_k deepseek-v3 16" "q5_k deepseek-v3 16" "q8_0 deepseek-v2-lite 16" "q5_0 deepseek-v2-lite 16" \
              "bf16 deepseek-v2-lite 16" "q4_k deepseek-v3 8" "q8_0 deepseek-v2-lite 8" "q4_k deepseek-v3 1"; do
    read -r dtype shape threads <<< "$spec"
    prefill=512; [[ $threads == 1 ]] && prefill=64
    timeout 60 $bin bench experts --weight_dtype "$dtype" --shape "$shape" --threads "$threads" --decode_tokens 1 \
      --prefill_tokens $prefill --repeat 20 > "$out/experts-$dtype-$threads.log" 2>&1
    echo "experts $dtype $shape $threads threads: $(grep -E 'STREAM triad' "$out/experts-$dtype-$threads.log" | grep -oE '[0-9.]+ GB/s') | $(grep -E "^$shape" "$out/experts-$dtype-$threads.log" | tr -s ' ')"
  done
fi
model() {  # model LAYERS DTYPE: our GGUF of a DeepSeek-V2-Lite shape, made once per machine
  local dir=$m/v2lite-$1-$2
  [[ -f $dir/model.gguf ]] || $bin make-model --preset deepseek-v2-lite --layers "$1" --format gguf --dtype "$2" --seed 7 \
    --out "$dir" >> "$out/make-model.log" 2>&1 || { tail -5 "$out/make-model.log"; exit 1; }
  echo "$dir/model.gguf"
}
gguf_peer_test() {  # gguf_peer_test LOG: every values-* folder of $m/peer in one manifest, then the gguf peer test
  python3 - "$m/peer" <<'PY'
import json, os, sys, glob
root = sys.argv[1]; merged = []
for d in sorted(glob.glob(os.path.join(root, "values-*"))):
    for e in json.load(open(os.path.join(d, "manifest.json"))):
        e["values"] = os.path.join(os.path.basename(d), e["values"]); merged.append(e)
json.dump(merged, open(os.path.join(root, "manifest.json"), "w"), indent=1)
print("peer values:", len(merged), "tensors")
PY
  SWITCHYARD_GGUF_PEER=$m/peer ./build-dev/tests/switchyard_tests -tc='gguf peer*' -s > "$out/$1.log" 2>&1
  echo "gguf peer test exit $?"; grep -E 'MESSAGE|bit-equal|test cases|ERROR' "$out/$1.log" | sed 's/^.*MESSAGE: //' | head -40
}
if want marlin; then
  timeout 360 ./build-dev/tests/switchyard_tests > "$out/tests.log" 2>&1
  echo "tests exit $?: $(grep -E 'test cases' "$out/tests.log")"; grep -E 'ERROR|FATAL' -B3 -A6 "$out/tests.log" | head -60
  timeout 200 ./build-dev/tests/switchyard_tests -s -tc='cuda quant*,cuda dequantize*,cuda linear: prefill on blocks*,gguf fidelity: GPU*' > "$out/quant-gpu-tests.log" 2>&1
  echo "block-type GPU tests exit $?: $(grep -E 'test cases' "$out/quant-gpu-tests.log")"
  grep -E 'MESSAGE: .*relative error' "$out/quant-gpu-tests.log" | sed 's/^.*MESSAGE: //' | head -8
  for dtype in bf16 q8_0 q6_k q5_k q4_k q4_0 q2_k; do
    timeout 60 $bin bench gemv --dtype $dtype > "$out/gemv-$dtype.log" 2>&1
    echo "bench gemv --dtype $dtype exit $?"; grep -E '^ceiling|^q_proj|^o_proj|^shared|^lm_head' "$out/gemv-$dtype.log" | tr -s ' ' | cut -c1-150
  done
fi
if want experts-gpu; then
  timeout 400 ./build-dev/tests/switchyard_tests -s \
    -tc='cuda routed_experts*,gguf fidelity: GPU*,implementation builders*,gpu folded*,run command: a profile for more*,weight storage*' \
    > "$out/experts-gpu-tests.log" 2>&1
  echo "experts-gpu tests exit $?: $(grep -E 'test cases' "$out/experts-gpu-tests.log")"
  grep -E 'ERROR|FATAL' -B3 -A6 "$out/experts-gpu-tests.log" | head -40
  grep -E 'MESSAGE: .*(relative error|blocks:|decode:|prefill:|us a call)' "$out/experts-gpu-tests.log" | sed 's/^.*MESSAGE: //' | cut -c1-220 | head -24
fi
if want prefill; then
  if [[ ${PREFILL_TESTS:-1} == 1 ]]; then
    timeout 200 ./build-dev/tests/switchyard_tests -tc='quant*,linear*,cpu kernels*,cuda kernels: embedding*' > "$out/prefill-tests.log" 2>&1
    echo "kernel tests exit $?: $(grep -E 'test cases' "$out/prefill-tests.log")"; grep -E 'ERROR|FATAL|skipped' -A4 "$out/prefill-tests.log" | head -20
  fi
  ab=${PREFILL_AB:-cpu_tile_block_rows=256}
  for dtype in ${BENCH_DTYPES:-q4_k_m q8_0}; do model 14 $dtype > /dev/null; done
  [[ ${PEER:-1} == 1 ]] && peer_ready  # no build beside the timings
  specs=("q4_k deepseek-v2-lite" "q8_0 deepseek-v2-lite" "q6_k deepseek-v3")
  [[ -n ${EXPERTS_SPECS+x} ]] && IFS=';' read -r -a specs <<< "$EXPERTS_SPECS"  # "" for none
  for spec in "${specs[@]}"; do
    read -r dtype shape <<< "$spec"
    timeout 120 $bin bench experts --weight_dtype $dtype --shape $shape --experts 64 --threads 16 --decode_tokens 1 \
      --prefill_tokens 512 --repeat 8 --ab_option $ab --stages > "$out/prefill-experts-$dtype.log" 2>&1
    echo "experts $dtype $shape exit $?: $(grep -E 'STREAM triad' "$out/prefill-experts-$dtype.log" | grep -oE '[0-9.]+ GB/s')"
    grep -E "^$shape|prefill with|prefill stages" "$out/prefill-experts-$dtype.log" | tr -s ' ' | cut -c1-260
  done
  sed -z 's/prefill_device: "cuda:0"\n      prefill_op: "KExpertsTorch"/prefill_device: "cpu"\n      prefill_op: "KExpertsCPU"/' \
    optimize_rules/DeepSeek-V2-Lite-Chat.yaml > $m/v2lite-cpu-experts.yaml
  # Then DECODE_AB's options, one A/B each.
  for dtype in ${BENCH_DTYPES:-q4_k_m q8_0}; do
    f=$(model 14 $dtype)
    for variables in $ab ${DECODE_AB-cpu_prefetch_bytes=0 cpu_panels_by_row=false}; do
      log="$out/prefill-decode-$dtype-${variables//[^A-Za-z0-9]/_}.log"
      timeout 300 $bin bench decode --gguf_path "$f" --optimize_config_path $m/v2lite-cpu-experts.yaml --cpu_infer 16 \
        --prompt_tokens 512 --ab_option $variables --ab_rounds 4 --profile_tokens 4 > "$log" 2>&1
      echo "bench decode $dtype A/B $variables exit $?"
      grep -E 'STREAM|^decode|^prefill|GPU side|CPU experts|A/B' "$log" | cut -c1-260 | head -14
      grep -E '^layer|^(1|7|13) +[0-9]|^decode step|^CPU experts [0-9.]+ ms' "$log" | cut -c1-260
    done
    # The whole process as a user runs it: load duration and peak RSS beside the file's size.
    timeout 120 $bin run --gguf_path "$f" --optimize_config_path $m/v2lite-cpu-experts.yaml --cpu_infer 16 \
      --prompt_ids 1,2,3,4,5,6,7,8 --max_new_tokens 16 > "$out/run-$dtype.log" 2>&1
    echo "run $dtype exit $?: file $(stat -c %s "$f") bytes; $(grep -E 'load duration|peak RSS|KV cache' "$out/run-$dtype.log" | tr -s ' ' | tr '\n' ';')"
    if [[ ${PEER:-1} == 1 ]]; then
      timeout 300 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -ot exps=CPU -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/lcpp-$dtype.log" 2>&1
      echo "llama.cpp $dtype exit $?"; grep -E 'pp512|tg128' "$out/lcpp-$dtype.log" | tr -s ' '
    fi
  done
fi
if want peer; then  # llama.cpp alone on the 14-layer files, experts on the CPU
  for dtype in ${BENCH_DTYPES:-q4_k_m q8_0}; do model 14 $dtype > /dev/null; done  # while llama.cpp builds
  peer_ready
  for dtype in ${BENCH_DTYPES:-q4_k_m q8_0}; do
    f=$(model 14 $dtype)
    timeout 300 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -ot exps=CPU -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/lcpp-$dtype.log" 2>&1
    echo "llama.cpp $dtype exit $?"; grep -E 'pp512|tg128' "$out/lcpp-$dtype.log" | tr -s ' '
  done
fi
if want greedy; then
  peer_ready
  prompt="The history of the city begins with a small village by the river, where"
  sed -z 's/prefill_device: "cuda:0"\n      prefill_op: "KExpertsTorch"/prefill_device: "cpu"\n      prefill_op: "KExpertsCPU"/' \
    optimize_rules/DeepSeek-V2-Lite-Chat.yaml > $m/v2lite-cpu-experts.yaml
  # Then the same with a head of a few full-scale rows (make-model --head_tokens): choices that
  # lead by a wide margin, so 32 tokens can agree despite the engines' different rounding.
  for variant in ${GREEDY_VARIANTS:-q8_0 q4_k_m q8_0-head q4_k_m-head}; do
    dtype=${variant%-head}; head=0; [[ $variant == *-head ]] && head=${GREEDY_HEAD_TOKENS:-16}
    dir=$m/v2lite-6-$variant-tok
    [[ -f $dir/model.gguf ]] || $bin make-model --preset deepseek-v2-lite --layers 6 --format gguf --dtype $dtype --seed 11 \
      --head_tokens $head --tokenizer .tokenizers/deepseek_v3 --out $dir >> "$out/make-model.log" 2>&1 ||
      { tail -5 "$out/make-model.log"; continue; }
    dtype=$variant
    $bin tokenize --tokenizer $dir/model.gguf --prompt "$prompt" --format json > "$out/greedy-prompt-$dtype.json" 2>&1
    echo "our prompt ids $dtype: $(head -c 400 "$out/greedy-prompt-$dtype.json")"
    timeout 120 $bin run --gguf_path $dir/model.gguf --optimize_config_path $m/v2lite-cpu-experts.yaml --cpu_infer 16 \
      --prompt "$prompt" --max_new_tokens 32 --verbose > "$out/greedy-ours-$dtype.txt" 2> "$out/greedy-ours-$dtype.log"
    echo "ours $dtype exit $?: text [$(head -c 600 "$out/greedy-ours-$dtype.txt")]"
    grep -aE '^(prompt ids|generated ids|eval rate)' "$out/greedy-ours-$dtype.log" | cut -c1-600
    timeout 120 /tmp/lcpp/bin/llama-completion -m $dir/model.gguf -ngl 99 -ot exps=CPU -fa on -t 16 -p "$prompt" -n 32 \
      --temp 0 --top-k 1 --ignore-eos -no-cnv --verbose-prompt -s 1 -sp > "$out/greedy-lcpp-$dtype.txt" 2> "$out/greedy-lcpp-$dtype.log"
    echo "llama.cpp $dtype exit $?: $(head -c 600 "$out/greedy-lcpp-$dtype.txt")"
    grep -E "prompt: |number of tokens in prompt|^ *[0-9]+ -> " "$out/greedy-lcpp-$dtype.log" | head -24 | tr '\n' ';' | cut -c1-900; echo
    python3 scripts/greedy-agreement.py $bin $dir/model.gguf "$out/greedy-ours-$dtype.log" "$out/greedy-lcpp-$dtype.txt" "$prompt"
    i=0
    for p in "Once upon a time" "The best way to learn a language is" "def fibonacci(n):" "In 1969, the first humans" \
             "My favourite food is" "The theory of relativity says that" "Water boils at" "Dear Sir or Madam,"; do
      i=$((i + 1))
      [[ $i -gt ${GREEDY_SHORT:-8} ]] && break
      ours=$(timeout 60 $bin run --gguf_path $dir/model.gguf --optimize_config_path $m/v2lite-cpu-experts.yaml --cpu_infer 16 \
        --prompt "$p" --max_new_tokens 4 --quiet 2> /dev/null | sed -z 's/\n$//; s/\n/\\n/g')
      theirs=$(timeout 60 /tmp/lcpp/bin/llama-completion -m $dir/model.gguf -ngl 99 -ot exps=CPU -fa on -t 16 -p "$p" -n 4 \
        --temp 0 --top-k 1 --ignore-eos -no-cnv -s 1 --no-display-prompt 2> /dev/null | sed -z 's/\n$//; s/\n/\\n/g')
      echo "prompt $i $dtype: ours [$ours] llama.cpp [$theirs]"
    done
  done
fi
if want marlin-bench; then
  peer_ready
  for variant in "" -gpu; do
    sed 's/generate_op: "KLinearTorch"/generate_op: "KLinearMarlin"/' optimize_rules/DeepSeek-V2-Lite-Chat$variant.yaml > $m/v2lite$variant-marlin.yaml
  done
  for dtype in ${MARLIN_DTYPES:-q4_k_m q8_0}; do
    f=$(model 14 $dtype)
    for profile in optimize_rules/DeepSeek-V2-Lite-Chat.yaml $m/v2lite-marlin.yaml optimize_rules/DeepSeek-V2-Lite-Chat-gpu.yaml $m/v2lite-gpu-marlin.yaml; do
      timeout 200 $bin bench decode --gguf_path "$f" --optimize_config_path $profile --cpu_infer 16 --prompt_tokens 512 > "$out/mb.log" 2>&1
      echo "ours $dtype $(basename $profile) exit $?: $(grep -E 'STREAM|^decode|^prefill|GPU side' "$out/mb.log" | tr -s ' ' | cut -c1-200 | tr '\n' ';')"
    done
    timeout 200 $bin run --gguf_path "$f" --optimize_config_path $m/v2lite-marlin.yaml --cpu_infer 16 \
      --prompt_ids 1,2,3,4,5,6,7,8 --max_new_tokens 16 --verbose > "$out/run-marlin-$dtype.log" 2>&1
    echo "run marlin $dtype exit $?: $(grep -E 'generated ids|load duration|peak RSS' "$out/run-marlin-$dtype.log" | tr -s ' ' | tr '\n' ';')"
    for flags in "-ot exps=CPU" ""; do
      timeout 200 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 $flags -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/lcpp.log" 2>&1
      echo "llama.cpp $dtype -ngl 99 $flags exit $?"; grep -E 'pp512|tg128' "$out/lcpp.log" | tr -s ' '
    done
  done
fi
if want formats; then
  peer_ready
  src=$(model 2 bf16)
  rm -rf $m/peer; mkdir -p $m/peer
  for type in Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K; do
    /tmp/lcpp/bin/llama-quantize "$src" "$m/peer/$type.gguf" $type 16 > "$out/quantize-$type.log" 2>&1 || { echo "llama-quantize $type failed"; tail -5 "$out/quantize-$type.log"; }
    PYTHONPATH=/tmp/lcpp-src/gguf-py python3 scripts/gguf-peer-values.py "$m/peer/$type.gguf" "$m/peer/values-$type" 16
  done
  gguf_peer_test gguf-peer
  for dtype in q8_0 q4_k_m q2_k q4_0 q5_1 q3_k; do  # llama.cpp loads and runs what we wrote
    f=$(model 2 $dtype)
    timeout 120 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -p 0 -n 16 -r 1 -t 16 > "$out/lcpp-load-$dtype.log" 2>&1
    echo "llama.cpp runs our $dtype: exit $? $(grep -E 'tg16' "$out/lcpp-load-$dtype.log" | tr -s ' ' | cut -c1-160)"
  done
fi
if want iq; then
  peer_ready
  layers=${IQ_LAYERS:-14}
  # f32: llama.cpp's CUDA build asserts on half-float norms (binbcast.cu, nb10 % sizeof(src1_t)),
  # which its converter never writes and llama-quantize keeps as they are; and a real tokenizer
  # (IQ_TOKENIZER, DeepSeek-V3's: 128,815 tokens), which llama-imatrix needs.
  iq=$m/iq; mkdir -p $iq
  src=$iq/v2lite-$layers-f32/model.gguf
  [[ -f $src ]] || $bin make-model --preset deepseek-v2-lite --layers "$layers" --format gguf --dtype f32 --seed 7 \
    --tokenizer "${IQ_TOKENIZER:-.tokenizers/deepseek_v3}" --out $iq/v2lite-$layers-f32 \
    > "$out/make-model-iq.log" 2>&1 || { tail -5 "$out/make-model-iq.log"; exit 1; }
  # Text for the importance matrix: any prose; the weights are random, the matrix only has to exist.
  cat README.md docs/*.md > $iq/imatrix.txt
  [[ -f $iq/imatrix.gguf ]] || timeout 300 /tmp/lcpp/bin/llama-imatrix -m "$src" -f $iq/imatrix.txt -o $iq/imatrix.gguf \
    -ngl 99 -c 512 --chunks 8 -t 16 > "$out/imatrix.log" 2>&1 || { echo "llama-imatrix failed"; tail -5 "$out/imatrix.log"; }
  sed -z 's/prefill_device: "cuda:0"\n      prefill_op: "KExpertsTorch"/prefill_device: "cpu"\n      prefill_op: "KExpertsCPU"/' \
    optimize_rules/DeepSeek-V2-Lite-Chat.yaml > $m/v2lite-cpu-experts.yaml
  rm -rf $m/peer; mkdir -p $m/peer
  # Type by type (quantize, gguf-py's values, both engines' speed), so a cut-off run still reports.
  for type in ${IQ_TYPES:-IQ4_XS MXFP4_MOE IQ2_XXS IQ1_S}; do
    f=$iq/$type.gguf
    imatrix=(); [[ -f $iq/imatrix.gguf ]] && imatrix=(--imatrix $iq/imatrix.gguf)
    [[ -f $f ]] || timeout 300 /tmp/lcpp/bin/llama-quantize "${imatrix[@]}" "$src" "$f" $type 16 \
      > "$out/quantize-$type.log" 2>&1 || { echo "llama-quantize $type failed"; tail -5 "$out/quantize-$type.log"; rm -f "$f"; continue; }
    echo "$type: $(ls -la "$f" | awk '{print $5}') bytes, quantized $(date +%T)"
    PYTHONPATH=/tmp/lcpp-src/gguf-py python3 scripts/gguf-peer-values.py "$f" "$m/peer/values-$type" 4 | tail -1
    timeout 200 $bin bench decode --gguf_path "$f" --optimize_config_path $m/v2lite-cpu-experts.yaml --cpu_infer 16 \
      --prompt_tokens 512 > "$out/bench-$type.log" 2>&1
    echo "ours $type exit $?"; grep -E 'STREAM|^decode|prefill|experts' "$out/bench-$type.log" | head -8
    timeout 200 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -ot exps=CPU -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/lcpp-$type.log" 2>&1
    echo "llama.cpp $type exit $?"; grep -E 'pp512|tg128' "$out/lcpp-$type.log" | tr -s ' '
    if [[ -x /tmp/ik/bin/llama-bench ]]; then  # ik_llama.cpp, where ik-build.sh ran on this machine
      timeout 200 /tmp/ik/bin/llama-bench -m "$f" -ngl 99 -ot exps=CPU -fa 1 -mla 3 -fmoe 1 -t 16 -p 512 -n 128 -r 2 \
        > "$out/ik-$type.log" 2>&1
      echo "ik_llama.cpp $type exit $?"; grep -E 'pp512|tg128' "$out/ik-$type.log" | tr -s ' '
    fi
  done
  gguf_peer_test gguf-peer-iq
fi
if want bench; then
  peer_ready
  # The hybrid V2-Lite profile with the routed experts' prefill on the CPU too, as the big models run.
  sed -z 's/prefill_device: "cuda:0"\n      prefill_op: "KExpertsTorch"/prefill_device: "cpu"\n      prefill_op: "KExpertsCPU"/' \
    optimize_rules/DeepSeek-V2-Lite-Chat.yaml > $m/v2lite-cpu-experts.yaml
  grep -c 'KExpertsCPU' $m/v2lite-cpu-experts.yaml
  for dtype in ${BENCH_DTYPES:-q4_k_m q8_0}; do
    f=$(model 14 $dtype)
    ls -la "$f" | awk '{print $5}'
    timeout 300 $bin bench decode --gguf_path "$f" --optimize_config_path $m/v2lite-cpu-experts.yaml --cpu_infer 16 \
      --prompt_tokens 512 > "$out/bench-$dtype.log" 2>&1
    echo "ours $dtype exit $?"; grep -E 'STREAM|^decode|prefill|GPU side|experts' "$out/bench-$dtype.log" | head -12
    # The whole process as a user runs it: load duration and peak RSS beside the file's size.
    timeout 120 $bin run --gguf_path "$f" --optimize_config_path $m/v2lite-cpu-experts.yaml --cpu_infer 16 \
      --prompt_ids 1,2,3,4,5,6,7,8 --max_new_tokens 16 > "$out/run-$dtype.log" 2>&1
    echo "run $dtype exit $?: $(grep -E 'load duration|peak RSS|KV cache' "$out/run-$dtype.log" | tr -s ' ' | tr '\n' ';')"
    timeout 300 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -ot exps=CPU -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/lcpp-$dtype.log" 2>&1
    echo "llama.cpp $dtype exit $?"; grep -E 'pp512|tg128' "$out/lcpp-$dtype.log" | tr -s ' '
  done
fi
if want fit; then
  peer_ready
  f=$(model 14 q4_k_m)
  budget=${FIT_BUDGET:-3GiB}  # the file is 4.9 GiB: a budget that leaves some layers' experts on the CPU
  timeout 60 $bin check --gguf_path "$f" --fit > "$out/fit-check-free.log" 2>&1
  echo "check --fit on free memory exit $?: $(grep -E '^fit:|^cuda:0' "$out/fit-check-free.log" | cut -c1-200 | tr '\n' ';')"
  timeout 60 $bin check --gguf_path "$f" --fit --gpu_memory $budget > "$out/fit-check.log" 2>&1
  echo "check --fit --gpu_memory $budget exit $?: $(grep -E '^cuda:0|^cpu ' "$out/fit-check.log" | tr -s ' ' | tr '\n' ';')"
  ot=$(grep -oE 'llama.cpp: -ot "[^"]*"' "$out/fit-check.log" | sed 's/llama.cpp: -ot "//; s/"$//')
  grep -oE '^fit: .{0,120}' "$out/fit-check.log"
  fit_flags=("--fit --gpu_memory $budget" "-ngl 99 --cpu-moe" "-ngl 99" "-ngl 10 --cpu-moe")
  [[ -n ${FIT_FLAGS:-} ]] && IFS=';' read -r -a fit_flags <<< "$FIT_FLAGS"
  for flags in "${fit_flags[@]}"; do
    tag=$(echo "$flags" | tr -c 'a-z0-9' '_')
    timeout 300 $bin bench decode --gguf_path "$f" $flags --cpu_infer 16 --prompt_tokens 512 > "$out/fit-bench-$tag.log" 2>&1
    echo "bench decode $flags exit $?"; grep -E '^fit:|^decode|^prefill|  CPU:|  GPU:|placement' "$out/fit-bench-$tag.log" | cut -c1-220 | head -8
    timeout 120 $bin run --gguf_path "$f" $flags --cpu_infer 16 --prompt_ids 1,2,3,4,5,6,7,8 --max_new_tokens 16 --verbose > "$out/fit-run-$tag.log" 2>&1
    echo "run $flags exit $?: $(grep -E 'generated ids|eval rate|load duration|peak RSS' "$out/fit-run-$tag.log" | tr -s ' ' | tr '\n' ';')"
  done
  if [[ -n $ot ]]; then
    timeout 300 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -ot "$ot" -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/fit-lcpp.log" 2>&1
    echo "llama.cpp with the fit's -ot exit $?"; grep -E 'pp512|tg128' "$out/fit-lcpp.log" | tr -s ' '
  fi
  timeout 300 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -ot exps=CPU -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/fit-lcpp-cpu-moe.log" 2>&1
  echo "llama.cpp -ot exps=CPU exit $?"; grep -E 'pp512|tg128' "$out/fit-lcpp-cpu-moe.log" | tr -s ' '
  timeout 300 /tmp/lcpp/bin/llama-bench -m "$f" -ngl 99 -fa 1 -t 16 -p 512 -n 128 -r 2 > "$out/fit-lcpp-gpu.log" 2>&1
  echo "llama.cpp -ngl 99 (experts on the GPU) exit $?"; grep -E 'pp512|tg128' "$out/fit-lcpp-gpu.log" | tr -s ' '
fi
