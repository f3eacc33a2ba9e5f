#!/usr/bin/env bash
# One call on the GPU machine (the `device` tool, ../shared/device/README.md): build for Hopper,
# run every test (the GPU ones included), then the issue #4 benchmarks. Logs go to $OUT.
#   scripts/gpu-machine.sh [tests|bench|all|ncu|ncu-step|ncu-prefill|ncu-detail|build]   (default all)
#   scripts/gpu-machine.sh ab NAME=VALUE[,...]   tests, then both decode benches with the CPU kernel
#                                   options as given and with these changed (cli/cpu_kernel_flags.h),
#                                   alternating inside one process, ROUNDS timings a side (default
#                                   6; `bench decode --ab_option`): the machines differ more than most
#                                   changes do, and so do processes on one machine
#                                   (docs/performance.md, "Noise")
#   scripts/gpu-machine.sh ab-cpu NAME=VALUE ...   one in-process A/B per assignment on the hybrid
#                                   profile alone (bench decode --ab_option times the whole step too)
#   scripts/gpu-machine.sh ab-experts NAME=VALUE ...   tests, then per CPU kernel option assignment
#                                   `bench experts --ab_option` on Q4_K and Q6_K (DeepSeek-V3 shape,
#                                   16 threads) and the hybrid decode of a 14-layer V2-Lite-shaped
#                                   Q4_K_M GGUF, both A/B in one process
#   scripts/gpu-machine.sh folded   the multi-GPU tests (folded onto one GPU), then the decode bench of
#                                   a 14-layer V2-Lite-shaped model, 1-GPU profiles against `split
#                                   --gpus 2` of them folded onto GPU 0 (--device_map all=0), hybrid
#                                   and all-GPU, alternating ROUNDS times (default 1) in one call;
#                                   then the 61-layer deep hybrid run (stacks if it hangs)
#   scripts/gpu-machine.sh ab-builds NAME=CUDA_FLAGS ...   one build per variant (e.g. old=-DX new=),
#                                   every test on each, then both decode benches of every build in
#                                   turn, ROUNDS times (default 3: one process's GPU side alone
#                                   moves by up to ~5 us, docs/performance.md)
#   scripts/gpu-machine.sh ab-trees DIR [build|bench]   another commit's source tree at DIR (sent beside
#                                   this one, e.g. `git archive OLD | tar -x -C ab-old`) as "old" and
#                                   this tree as "new": build both (build), then bench decode of
#                                   14-layer V2-Lite-shaped GGUFs with each build in turn, ROUNDS times
#                                   (default 2): Q4_K_M and Q8_0 hybrid, Q4_K_M all-GPU (bench). "new"
#                                   is build-dev, so `tests` first builds it and runs its tests; the
#                                   builds stay while the machine is warm
# Needs the Debian packages of ../shared/device/fetch-build-deps.sh in .device-deps (carried), with
# serve's HTTP library and what its pkg-config file requires, and ICU and libedit (the tokenizers'
# Unicode normalizers and chat's line editing, which tests expect):
#   ../shared/device/fetch-build-deps.sh .device-deps libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 \
#     zlib1g-dev libbrotli-dev libbrotli1 libicu-dev libicu72 libedit-dev libedit2 libbsd0 libmd0
# and .tokenizers (scripts/fetch-tokenizers.sh) carried beside it.
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/switchyard-out}
mkdir -p "$out"
for f in .device-deps/*.deb; do dpkg -x "$f" /opt/deps; done
export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps
# The packages' libraries at run time: the run paths that CMake writes reach the libraries linked,
# not what they load in turn (ICU's libicuuc loads libicudata).
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
configure=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/opt/deps/usr -DCMAKE_CUDA_ARCHITECTURES=90)
models=/tmp/switchyard-models
v2_lite() {  # the deepseek-v2-lite checkpoint that the benches read, made once per machine ($1: the binary)
  mkdir -p $models
  [[ -f $models/v2-lite/config.json ]] || "$1" make-model --preset deepseek-v2-lite --out $models/v2-lite > "$out/make-model.log" 2>&1
}
bench_line() {  # the lines of a bench decode log that an A/B compares, on one line
  grep -E 'STREAM triad|again|^decode:|-> decode|GPU side' "$1" | sed -E 's/ with [0-9]+ threads//; s/^prefill: .*again/prefill again/' |
    tr '\n' ' ' | tr -s ' ' | cut -c1-400
}
if [[ $what == ab-trees ]]; then
  old=${2:?"ab-trees needs the old tree's directory"}
  step=${3:-all}
  if [[ $step == build || $step == all ]]; then
    rm -rf /tmp/ab-old-src && cp -r "$old" /tmp/ab-old-src  # out of this tree: nothing here sees it
    { cmake -S /tmp/ab-old-src -B /tmp/ab-build-old "${configure[@]}" -DSWITCHYARD_TESTS=OFF &&
        cmake --build /tmp/ab-build-old -j16; } > "$out/build-old.log" 2>&1 || { tail -30 "$out/build-old.log"; exit 1; }
    # "new" is build-dev, the build that `tests` made (nothing to do when it ran first).
    { cmake -S . -B build-dev "${configure[@]}" && cmake --build build-dev -j16; } > "$out/build-new.log" 2>&1 ||
      { tail -30 "$out/build-new.log"; exit 1; }
    echo "built: $(date +%T)"
  fi
  [[ $step == build ]] && exit 0
  mkdir -p $models
  for dtype in q4_k_m q8_0; do
    [[ -f $models/v2lite-14-$dtype/model.gguf ]] || ./build-dev/switchyard make-model --preset deepseek-v2-lite \
      --layers 14 --format gguf --dtype $dtype --seed 7 --out $models/v2lite-14-$dtype > "$out/make-model.log" 2>&1 ||
      { tail -5 "$out/make-model.log"; exit 1; }
  done
  echo "models: $(date +%T)"
  for round in $(seq "${ROUNDS:-2}"); do
    for name in old new; do
      for case in "q4_k_m DeepSeek-V2-Lite-Chat" "q8_0 DeepSeek-V2-Lite-Chat" "q4_k_m DeepSeek-V2-Lite-Chat-gpu"; do
        read -r dtype profile <<< "$case"
        binary=/tmp/ab-build-old/switchyard
        [[ $name == new ]] && binary=./build-dev/switchyard
        timeout 100 $binary bench decode --gguf_path $models/v2lite-14-$dtype/model.gguf \
          --optimize_config_path optimize_rules/$profile.yaml --cpu_infer 16 --profile_tokens 0 > "$out/ab.log" 2>&1
        echo "round $round $name $dtype $profile: $(bench_line "$out/ab.log")"
      done
    done
  done
  rm -f "$out/ab.log"
  exit 0
fi
if [[ $what == ab-builds ]]; then
  shift
  names=()
  for variant in "$@"; do
    name=${variant%%=*}; names+=("$name")
    { cmake -S . -B "build-$name" "${configure[@]}" "-DCMAKE_CUDA_FLAGS=${variant#*=}" &&
        cmake --build "build-$name" -j16; } > "$out/build-$name.log" 2>&1 || { tail -30 "$out/build-$name.log"; exit 1; }
  done
  echo "built: $(date +%T)"
  v2_lite "./build-${names[0]}/switchyard"
  for name in "${names[@]}"; do
    timeout 400 "./build-$name/tests/switchyard_tests" > "$out/tests-$name.log" 2>&1
    echo "tests $name exit $?: $(grep -E 'test cases' "$out/tests-$name.log")"; grep -E "ERROR" "$out/tests-$name.log" | head -5
  done
  for round in $(seq "${ROUNDS:-3}"); do
    for name in "${names[@]}"; do
      for profile in DeepSeek-V2-Lite-Chat DeepSeek-V2-Lite-Chat-gpu; do
        timeout 100 "./build-$name/switchyard" bench decode --model_path $models/v2-lite \
          --optimize_config_path optimize_rules/$profile.yaml --cpu_infer 16 --profile_tokens 0 > "$out/ab.log" 2>&1
        echo "$name $profile: $(bench_line "$out/ab.log")"
      done
    done
  done
  rm -f "$out/ab.log"
  exit 0
fi
{
  cmake -S . -B build-dev "${configure[@]}" && cmake --build build-dev -j16
} > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
echo "built: $(date +%T)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
bin=./build-dev/switchyard
if [[ $what == tests || $what == all ]]; then
  timeout 400 ./build-dev/tests/switchyard_tests > "$out/tests.log" 2>&1
  echo "tests exit $? at $(date +%T)"; grep -E "test cases|assertions|ERROR|FAILED" "$out/tests.log" | head -40
  grep -E "prefill, [0-9]+ tokens|grouped prefill" "$out/tests.log" | head -4
fi
if [[ $what == bench || $what == all ]]; then
  v2_lite $bin
  [[ -f $models/v3-61/config.json ]] || $bin make-model --preset tiny-deepseek-v3 --layers 61 --out $models/v3-61 >> "$out/make-model.log" 2>&1
  echo "models: $(date +%T)"
  timeout 60 $bin bench gemv > "$out/bench-gemv.log" 2>&1; echo "bench gemv exit $?"
  timeout 150 $bin bench decode --model_path $models/v2-lite --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat.yaml \
    --cpu_infer 16 > "$out/bench-hybrid.log" 2>&1; echo "bench hybrid exit $? $(date +%T)"
  timeout 120 $bin bench decode --model_path $models/v2-lite --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat-gpu.yaml \
    --cpu_infer 16 > "$out/bench-gpu.log" 2>&1; echo "bench all-GPU exit $? $(date +%T)"
  timeout 60 $bin run --model_path $models/v3-61 --optimize_config_path optimize_rules/DeepSeek-V3-Chat.yaml \
    --nvtx_layers 3,22,50 --profile --max_new_tokens 16 --trace_out "$out/trace.json" > "$out/run-v3.log" 2>&1
  echo "run v3 exit $?"
  for profile in DeepSeek-V2-Lite-Chat DeepSeek-V2-Lite-Chat-gpu; do  # where the GPU side's time goes
    timeout 120 $bin bench decode --model_path $models/v2-lite --optimize_config_path optimize_rules/$profile.yaml \
      --cpu_infer 16 --profile_tokens 0 --timeline > "$out/timeline-$profile.log" 2>&1
    echo "timeline $profile exit $?"; sed -n '/GPU side with stamps/,$p' "$out/timeline-$profile.log" | head -60
  done
fi
if [[ $what == folded ]]; then
  timeout 200 ./build-dev/tests/switchyard_tests -tc='gpu folded*,gpu model: hybrid profiles split*,run command: a profile for more*,generate*' -d \
    > "$out/tests-folded.log" 2>&1
  echo "folded tests exit $?: $(grep -E 'test cases' "$out/tests-folded.log")"
  grep -E "ERROR|FAILED|MESSAGE: .*(eager|graphs|GPU)" "$out/tests-folded.log" | cut -c1-220 | head -40
  gpu_models=$models/v2-lite-14
  [[ -f $gpu_models/config.json ]] || $bin make-model --preset deepseek-v2-lite --layers 14 --out $gpu_models > "$out/make-model.log" 2>&1
  for profile in DeepSeek-V2-Lite-Chat DeepSeek-V2-Lite-Chat-gpu; do
    $bin split --model_path $gpu_models --optimize_config_path optimize_rules/$profile.yaml --gpus 2 \
      -o "$out/$profile-split2.yaml" > "$out/split-$profile.log" 2>&1 || { tail -5 "$out/split-$profile.log"; exit 1; }
  done
  for round in $(seq "${ROUNDS:-1}"); do
    for profile in DeepSeek-V2-Lite-Chat DeepSeek-V2-Lite-Chat-gpu; do
      for layout in one split2; do
        if [[ $layout == one ]]; then flags=(--optimize_config_path optimize_rules/$profile.yaml)
        else flags=(--optimize_config_path "$out/$profile-split2.yaml" --device_map all=0); fi
        timeout 60 $bin bench decode --model_path $gpu_models "${flags[@]}" --cpu_infer 16 --profile_tokens 0 \
          > "$out/bench-$profile-$layout-$round.log" 2>&1
        echo "round $round $profile $layout exit $?: $(bench_line "$out/bench-$profile-$layout-$round.log")"
      done
    done
  done
  # The deep hybrid run: an eager step that fills the driver's queue (its threads' stacks if it
  # does not end).
  $bin make-model --preset tiny-deepseek-v3 --layers 61 --seed 3 --out $models/deep61 > /dev/null 2>&1
  for graph in false true; do
    $bin run --model_path $models/deep61 --max_new_tokens 4 --optimize_config_path optimize_rules/DeepSeek-V3-Chat.yaml \
      --use_cuda_graph $graph --verbose > "$out/deep-run-$graph.log" 2>&1 &
    pid=$!
    for second in $(seq 30); do kill -0 $pid 2> /dev/null || break; sleep 1; done
    if kill -0 $pid 2> /dev/null; then
      echo "deep run --use_cuda_graph $graph still running after 30 s; stacks:"
      gdb=$(command -v gdb || command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)
      timeout 50 $gdb -p $pid -batch -ex "thread apply all bt 14" 2>&1 | grep -E "^#|^Thread" | cut -c1-200 | head -90
      kill -9 $pid
    else
      wait $pid; echo "deep run --use_cuda_graph $graph exit $?: $(grep -E 'generated ids' "$out/deep-run-$graph.log")"
    fi
  done
fi
if [[ $what == ab ]]; then
  variable=${2:?"ab needs CPU kernel options to change, NAME=VALUE (e.g. cpu_prefetch_bytes=0)"}
  if [[ -z ${SKIP_TESTS:-} ]]; then  # SKIP_TESTS=1: a second ab in a call that ran them already
    timeout 400 ./build-dev/tests/switchyard_tests > "$out/tests.log" 2>&1
    echo "tests exit $?"; grep -E "test cases|ERROR" "$out/tests.log" | head -20
  fi
  v2_lite $bin
  for profile in DeepSeek-V2-Lite-Chat DeepSeek-V2-Lite-Chat-gpu; do  # both sides in one process (bench decode --ab_option)
    timeout 300 $bin bench decode --model_path $models/v2-lite --optimize_config_path optimize_rules/$profile.yaml \
      --cpu_infer 16 --profile_tokens 0 --ab_option "$variable" --ab_rounds "${ROUNDS:-6}" > "$out/ab-$profile.log" 2>&1
    echo "$profile exit $?: $(grep -E '^A/B ' "$out/ab-$profile.log")"
  done
fi
if [[ $what == ab-cpu ]]; then  # ab-cpu NAME=VALUE ...: a CPU-side A/B per assignment, the hybrid profile only
  shift
  v2_lite $bin
  for variable in "$@"; do
    timeout 300 $bin bench decode --model_path $models/v2-lite --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat.yaml \
      --cpu_infer 16 --profile_tokens 0 --ab_option "$variable" --ab_rounds "${ROUNDS:-6}" > "$out/ab-cpu-$variable.log" 2>&1
    echo "$variable exit $?: $(grep -E '^A/B |STREAM' "$out/ab-cpu-$variable.log" | tr '\n' ' ')"
  done
fi
if [[ $what == ab-experts ]]; then
  shift
  if [[ -z ${SKIP_TESTS:-} ]]; then  # SKIP_TESTS=1: a call after one that ran them
    timeout 400 ./build-dev/tests/switchyard_tests > "$out/tests.log" 2>&1
    echo "tests exit $? at $(date +%T)"; grep -E "test cases|assertions|ERROR" "$out/tests.log" | head -20
  fi
  gguf=$models/v2lite-14-q4_k_m
  [[ -f $gguf/model.gguf ]] || $bin make-model --preset deepseek-v2-lite --layers 14 --format gguf --dtype q4_k_m --seed 7 \
    --out $gguf > "$out/make-model.log" 2>&1 || { tail -5 "$out/make-model.log"; exit 1; }
  for variable in "$@"; do  # NAME=VALUE[,NAME=VALUE...]
    for dtype in ${AB_DTYPES:-q4_k q6_k}; do
      timeout 200 $bin bench experts --weight_dtype $dtype --shape deepseek-v3 --decode_tokens 1 --threads 16 --repeat 40 \
        --prefill_tokens 16 --ab_option "$variable" > "$out/ab-experts-$dtype-$variable.log" 2>&1
      echo "bench experts $dtype $variable exit $?"; grep -E 'STREAM| [AB]:? ' "$out/ab-experts-$dtype-$variable.log" | tr -s ' '
    done
    timeout 300 $bin bench decode --gguf_path $gguf/model.gguf --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat.yaml \
      --cpu_infer 16 --profile_tokens 0 --ab_option "$variable" --ab_rounds "${ROUNDS:-6}" > "$out/ab-decode-$variable.log" 2>&1
    echo "bench decode q4_k_m $variable exit $?: $(grep -E '^A/B |STREAM|^decode' "$out/ab-decode-$variable.log" | tr '\n' ' ')"
  done
fi
if [[ $what == ncu ]]; then  # per-kernel GPU times of eager decode steps (all-GPU V2-Lite)
  v2_lite $bin
  timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
    $bin run --model_path $models/v2-lite --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat-gpu.yaml \
    --prompt_ids 1,2 --max_new_tokens 3 --use_cuda_graph false > "$out/ncu.log" 2>&1
  echo "ncu exit $?"
fi
if [[ $what == ncu-prefill ]]; then  # per-kernel GPU times of a 512-token all-GPU prefill, its first ~600 launches
  v2_lite $bin
  prompt=$(seq -s, 1 512)
  timeout 400 ncu --clock-control none --metrics gpu__time_duration.sum --launch-count 600 --csv --print-units base \
    $bin run --model_path $models/v2-lite --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat-gpu.yaml \
    --prompt_ids $prompt --max_new_tokens 1 > "$out/ncu-prefill.csv" 2>&1
  echo "ncu-prefill exit $?"
  python3 scripts/ncu-digest.py "$out/ncu-prefill.csv"
fi
if [[ $what == ncu-detail ]]; then  # full ncu sections of one decode instance of each hot kernel, context 500
  v2_lite $bin
  prompt=$(seq -s, 1 500)
  for kernel in attend_split mla_decode rms_norm_rows write_mla gemv_kernel route_tokens; do
    timeout 120 ncu --clock-control none --set full --nvtx --nvtx-include "decode_step/" -k regex:$kernel \
      --launch-count 2 $bin run --model_path $models/v2-lite \
      --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat-gpu.yaml --prompt_ids $prompt --max_new_tokens 2 \
      --use_cuda_graph false --nvtx_layers all > "$out/ncu-$kernel.txt" 2>&1
    echo "ncu $kernel exit $?"
  done
fi
if [[ $what == ncu-step ]]; then  # every kernel of the hybrid decode steps, in order, with grid and time (context ~500)
  v2_lite $bin
  prompt=$(seq -s, 1 500)
  timeout 300 ncu --clock-control none --nvtx --nvtx-include "decode_step/" --csv --print-units base \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,dram__bytes_read.sum \
    $bin run --model_path $models/v2-lite --optimize_config_path optimize_rules/DeepSeek-V2-Lite-Chat.yaml \
    --prompt_ids $prompt --max_new_tokens 2 --use_cuda_graph false --nvtx_layers all --cpu_infer 16 > "$out/ncu-step.csv" 2>&1
  echo "ncu-step exit $?"
fi
