#!/usr/bin/env bash
# The README's quick start, as a new user types it: every `switchyard` line between its
# quick-start markers, on the built-in model (`-m MODEL` left out) and with MODEL a GGUF that
# make-model wrote (a tiny DeepSeek-V3 and a tiny Qwen3-MoE, each with its real tokenizer and chat
# template inside). check and run must exit 0 and
# run must print text; chat gets one message and /exit; serve must answer /health. On a machine
# without a GPU the GPU flags fall back to the CPU, as the README says.
#   usage: quick_start_test.sh SWITCHYARD_BINARY SOURCE_DIR
set -euo pipefail
binary=$1
source=$2
work=$(mktemp -d)
server=""
cleanup() {
  [[ -n $server ]] && kill "$server" 2> /dev/null && wait "$server" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT

mapfile -t commands < <(sed -n '/<!-- quick-start:/,/<!-- \/quick-start -->/p' "$source/README.md" |
                        sed -n 's/^    switchyard //p')
(( ${#commands[@]} >= 4 )) || { echo "quick_start_test: the README's quick start has ${#commands[@]} commands" >&2; exit 1; }

fail() { echo "quick_start_test: $*" >&2; exit 1; }

for model in built-in deepseek_v3:tiny-deepseek-v3 qwen3:tiny-qwen3-moe; do
  preset=$model
  if [[ $model != built-in ]]; then
    tokenizer=${model%%:*}
    preset=${model#*:}
    out=$work/$preset
    "$binary" make-model --preset "$preset" --format gguf --quant q4_k_m --tokenizer "$source/.tokenizers/$tokenizer" \
      --out "$out" > /dev/null || fail "make-model $preset failed"
    # The GGUF alone, as it is downloaded: no tokenizer.json beside it.
    find "$out" -type f ! -name model.gguf -delete
  fi
  for command in "${commands[@]}"; do
    if [[ $model == built-in ]]; then
      line=${command//-m MODEL /}
      [[ $line == check\ * ]] && line="check --arch tiny-deepseek-v3 ${line#check }"
    else
      line=${command//MODEL/$out/model.gguf}
    fi
    echo "== $preset: switchyard $line"
    case $line in
      chat\ *)
        output=$(printf 'Hello\n/exit\n' | eval "\"$binary\" $line" 2>&1) || fail "chat exited $?: $output"
        grep -q " answer tokens at " <<< "$output" || fail "chat did not answer: $output"
        ;;
      serve\ *)
        log=$work/serve.log
        # exec: $! is then the server itself; killing a shell around it would leave the server running.
        eval "exec \"$binary\" ${line/--port 8080/--port 0}" > "$log" 2>&1 &
        server=$!
        port=""
        for _ in $(seq 1 300); do
          port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$log")
          [[ -n $port ]] && break
          kill -0 "$server" 2> /dev/null || fail "serve exited early: $(cat "$log")"
          sleep 0.1
        done
        [[ -n $port ]] || fail "serve did not listen: $(cat "$log")"
        exec 3<> "/dev/tcp/127.0.0.1/$port"
        printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
        answer=$(timeout 10 cat <&3) || true
        exec 3>&-
        grep -q "200 OK" <<< "$answer" || fail "serve's /health answered: $answer"
        kill "$server"
        wait "$server" 2> /dev/null || true
        server=""
        ;;
      *)
        output=$(eval "\"$binary\" $line" 2>&1) || fail "exited $?: $output"
        if [[ $line == run\ * ]]; then
          grep -q "eval count" <<< "$output" || fail "run printed no stats: $output"
        fi
        ;;
    esac
  done
done
echo "quick_start_test: ${#commands[@]} commands passed on 3 models"
