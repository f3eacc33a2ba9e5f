#!/usr/bin/env bash
# Whole-process cost of the weight-free commands (issue #20's targets: `--help` under 15 ms, `check`
# of the DeepSeek-V3 8-GPU profile under 50 ms, median of 10, on the 2-core dev VM):
#   scripts/time-startup.sh [BINARY] [RUNS]     (defaults: ./build/switchyard, 10)
# Prints, per command, the median and the range of the wall time in ms and of the peak RSS in MiB
# (GNU time's %e has 10 ms steps, so the wall time is read from the clock around each run).
set -euo pipefail
binary=$(realpath -- "${1:-./build/switchyard}")
runs=${2:-10}
[[ -x $binary ]] || { echo "time-startup.sh: no executable at $binary (build it, or pass its path)" >&2; exit 2; }
cd "$(dirname "$0")/.."
rss_file=$(mktemp)
trap 'rm -f "$rss_file"' EXIT

measure() {  # measure NAME ARGS...: one line of medians for `binary ARGS...`
  local name=$1
  local -a walls=() rss=()
  shift
  "$binary" "$@" > /dev/null 2>&1 || true  # the first run pages the binary in; not counted
  for _ in $(seq "$runs"); do
    local start end kib
    start=$(date +%s%N)
    /usr/bin/time -o "$rss_file" -f '%M' "$binary" "$@" > /dev/null 2>&1 || true
    kib=$(tail -1 "$rss_file")
    end=$(date +%s%N)
    walls+=($(((end - start) / 1000)))
    rss+=("$kib")
  done
  python3 - "$name" "${walls[*]}" "${rss[*]}" <<'EOF'
import statistics, sys
name, walls, rss = sys.argv[1], [int(w) / 1000 for w in sys.argv[2].split()], [int(k) / 1024 for k in sys.argv[3].split()]
print(f"{name:<10} wall median {statistics.median(walls):6.1f} ms ({min(walls):.1f}-{max(walls):.1f}), "
      f"peak RSS median {statistics.median(rss):6.1f} MiB ({min(rss):.1f}-{max(rss):.1f}), {len(walls)} runs")
EOF
}

measure "--help" --help
measure "check" check --arch deepseek-v3 --optimize_config_path optimize_rules/DeepSeek-V3-Chat-multi-gpu-8.yaml
