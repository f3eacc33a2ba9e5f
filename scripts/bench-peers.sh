#!/usr/bin/env bash
# Switchyard beside llama.cpp and ik_llama.cpp on the same GGUF files, the same threads and the same
# machine, in one run: prefill (pp) and decode (tg) tokens/s of each, and our ratio to each peer.
# Everything comes from the paths given; nothing is fetched. Any NVIDIA machine with the builds and
# the files reproduces the tables of docs/performance.md.
#
#   scripts/bench-peers.sh [--switchyard BIN] [--llama-bench PATH] [--ik-llama-bench PATH]
#                          [--threads N] [--prompt N] [--gen N] [--placement hybrid|gpu|cpu]
#                          FILE.gguf...
#
# --placement: hybrid (the default) runs every layer on the GPU and the routed experts on the CPU
# (ours: -ngl 99 --cpu-moe; the peers: -ngl 99 -ot exps=CPU); gpu runs everything on the GPU
# (-ngl 99); cpu everything on the CPU (-ngl 0). ik_llama.cpp also gets -mla 3 -fmoe 1, its
# fast paths for these models. Without a peer's path its columns say "-".
# Output: one markdown row per file, after the CPU's STREAM triad as ours measured it.
set -euo pipefail

switchyard=./build/switchyard
llama_bench=""
ik_bench=""
threads=$(nproc)
prompt=512
gen=128
placement=hybrid
files=()
usage() {
  sed -n '7,9p' "$0" | sed 's/^# *//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --switchyard) switchyard=$2; shift 2 ;;
    --llama-bench) llama_bench=$2; shift 2 ;;
    --ik-llama-bench) ik_bench=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --gen) gen=$2; shift 2 ;;
    --placement) placement=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "bench-peers: unknown flag $1" >&2; usage ;;
    *) files+=("$1"); shift ;;
  esac
done
[[ ${#files[@]} -gt 0 ]] || { echo "bench-peers: give at least one .gguf file" >&2; usage; }
for n in "$threads" "$prompt" "$gen"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench-peers: '$n' is not a positive count" >&2; exit 2; }
done
[[ -x $switchyard ]] || { echo "bench-peers: $switchyard is not an executable (build it, or give --switchyard)" >&2; exit 2; }
for peer in "$llama_bench" "$ik_bench"; do
  [[ -z $peer || -x $peer ]] || { echo "bench-peers: $peer is not an executable" >&2; exit 2; }
done
case $placement in
  hybrid) ours_flags=(-ngl 99 --cpu-moe); peer_flags=(-ngl 99 -ot exps=CPU) ;;
  gpu) ours_flags=(-ngl 99); peer_flags=(-ngl 99) ;;
  cpu) ours_flags=(-ngl 0); peer_flags=(-ngl 0) ;;
  *) echo "bench-peers: --placement is hybrid, gpu or cpu, not '$placement'" >&2; exit 2 ;;
esac
for f in "${files[@]}"; do
  [[ -r $f ]] || { echo "bench-peers: cannot read $f" >&2; exit 2; }
done

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# "pp tg" of a llama-bench JSON report (avg_ts of the n_prompt and of the n_gen test), "- -" when
# the run failed.
peer_rates() {
  local bench=$1 file=$2 out=$3
  shift 3
  if ! "$bench" -m "$file" "${peer_flags[@]}" -fa 1 -t "$threads" -p "$prompt" -n "$gen" -r 2 -o json "$@" > "$out" 2> "$out.err"; then
    echo "- -"
    return
  fi
  python3 - "$out" << 'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
pp = next((r["avg_ts"] for r in rows if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0), None)
tg = next((r["avg_ts"] for r in rows if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0), None)
print("%s %s" % ("%.1f" % pp if pp else "-", "%.1f" % tg if tg else "-"))
EOF
}

ratio() {
  if [[ $1 == - || $2 == - ]]; then echo "-"; else python3 -c "print('%.2fx' % ($1 / $2))"; fi
}

stream=""
echo "placement: $placement; threads $threads; pp$prompt, tg$gen"
echo
echo "| file | ours pp | ours tg | llama.cpp pp | llama.cpp tg | ik pp | ik tg | pp vs llama.cpp | tg vs llama.cpp | pp vs ik | tg vs ik |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for f in "${files[@]}"; do
  ours_log="$log/ours.log"
  ours_pp=- ours_tg=-
  if "$switchyard" bench decode --gguf_path "$f" "${ours_flags[@]}" --cpu_infer "$threads" --prompt_tokens "$prompt" \
      --decode_tokens "$gen" > "$ours_log" 2>&1; then
    # "prefill: N tokens in S s: R tokens/s (the first ...); again S s: R tokens/s": the second, warm.
    ours_pp=$(sed -nE 's/^prefill: .*again [0-9.]+ s: ([0-9.]+) tokens\/s.*/\1/p' "$ours_log" | head -1)
    ours_tg=$(sed -nE 's/^decode: +[0-9.]+ ms\/token, ([0-9.]+) tokens\/s.*/\1/p' "$ours_log" | head -1)
    [[ -n $stream ]] || stream=$(grep -oE 'STREAM triad [0-9.]+ GB/s' "$ours_log" | head -1 || true)
  else
    echo "bench-peers: switchyard bench decode failed on $f:" >&2
    tail -5 "$ours_log" >&2
  fi
  ours_pp=${ours_pp:--} ours_tg=${ours_tg:--}
  read -r l_pp l_tg <<< "- -"
  read -r i_pp i_tg <<< "- -"
  [[ -n $llama_bench ]] && read -r l_pp l_tg <<< "$(peer_rates "$llama_bench" "$f" "$log/llama.json")"
  [[ -n $ik_bench ]] && read -r i_pp i_tg <<< "$(peer_rates "$ik_bench" "$f" "$log/ik.json" -mla 3 -fmoe 1)"
  echo "| $(basename "$f") | $ours_pp | $ours_tg | $l_pp | $l_tg | $i_pp | $i_tg | $(ratio "$ours_pp" "$l_pp") |" \
       "$(ratio "$ours_tg" "$l_tg") | $(ratio "$ours_pp" "$i_pp") | $(ratio "$ours_tg" "$i_tg") |"
done
echo
echo "CPU: ${stream:-STREAM not measured}"
