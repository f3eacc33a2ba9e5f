#!/usr/bin/env bash
# Runs every YAML file at the top of ktransformers' optimize_rules/ through `switchyard check`
# with the --arch preset of the model family it is written for, and prints per file whether it
# loads (exit 0 or 1 without parse errors) or fails, with the errors' codes. Nothing of theirs is
# kept here: the rule files are read from a checkout (or a bare clone) given as the argument.
#
#   scripts/check-ktransformers-rules.sh KTRANSFORMERS_DIR [SWITCHYARD_BINARY]
#
# KTRANSFORMERS_DIR: a work tree, or a bare git directory (read at HEAD). The files live in
# archive/ktransformers/optimize/optimize_rules/ (older trees: ktransformers/optimize/optimize_rules/).
# "loads" means the profile parses and every rule's class, kwargs and devices are understood;
# placement findings of a file meant for other hardware (a GPU count, a layer range) are listed
# but do not make it fail. A file for a family Switchyard does not run fails with one error.
set -euo pipefail
source_dir=${1:?usage: $0 KTRANSFORMERS_DIR [SWITCHYARD_BINARY]}
binary=${2:-build-cpu/switchyard}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

list_and_copy() {
  local rel
  for rel in archive/ktransformers/optimize/optimize_rules ktransformers/optimize/optimize_rules; do
    if [ -d "$source_dir/$rel" ]; then
      find "$source_dir/$rel" -maxdepth 1 -name '*.yaml' -exec cp {} "$work/" \;
      return
    fi
    if git -C "$source_dir" rev-parse --git-dir >/dev/null 2>&1 &&
       git -C "$source_dir" cat-file -e "HEAD:$rel" 2>/dev/null; then
      git -C "$source_dir" ls-tree --name-only HEAD "$rel/" | while read -r path; do
        case "$path" in *.yaml) git -C "$source_dir" show "HEAD:$path" >"$work/$(basename "$path")" ;; esac
      done
      return
    fi
  done
  echo "no optimize_rules/ directory under $source_dir" >&2
  exit 2
}

# The preset of the family a file is written for; families without a preset get one of another
# family, so that the family error is what fails them.
preset_for() {
  case "$1" in
    DeepSeek-V2-Lite*) echo deepseek-v2-lite ;;
    DeepSeek-V2*) echo deepseek-v2 ;;
    DeepSeek-V3* | Moonlight*) echo deepseek-v3 ;;  # Moonlight-16B-A3B is a DeepseekV3 model
    Mixtral*) echo mixtral-8x7b ;;
    Qwen3Moe*) echo qwen3-30b-a3b ;;
    Glm4Moe*) if "$binary" make-model --help 2>/dev/null | grep -q 'glm-4.5-air'; then echo glm-4.5-air; else echo deepseek-v3; fi ;;
    Qwen2* | Qwen3Next*) echo qwen3-30b-a3b ;;
    *) echo deepseek-v3 ;;
  esac
}

list_and_copy
total=0
loads=0
# Codes that say the file itself is not understood; the others are about the placement on this
# preset (GPU counts, layer ranges, dead rules) and do not stop a file from loading.
parse_codes='unknown-class|unknown-match-class|unknown-kwarg|unknown-op|unknown-key|bad-device|type-mismatch|bad-kwarg-value|kwarg-out-of-range|yaml-|not-a-list|empty-profile|profile-family-unsupported|unsupported-device|rule-'
for file in "$work"/*.yaml; do
  name=$(basename "$file")
  preset=$(preset_for "$name")
  total=$((total + 1))
  set +e
  output=$("$binary" check --arch "$preset" --optimize_config_path "$file" 2>&1)
  status=$?
  set -e
  codes=$( (printf '%s\n' "$output" | grep -oE '^[^ ].*: error: .*\[[a-z0-9-]+\]$' | grep -oE '\[[a-z0-9-]+\]$' || true) |
          sort | uniq -c | awk '{printf "%s%s×%s", (NR > 1 ? " " : ""), $2, $1}' || true)
  if [ "$status" -le 1 ] && ! printf '%s\n' "$output" | grep -qE ": error: .*\[($parse_codes)[a-z-]*\]$"; then
    loads=$((loads + 1))
    printf 'loads  %-58s %-17s %s\n' "$name" "$preset" "${codes:+(placement: $codes)}"
  else
    printf 'FAILS  %-58s %-17s exit %d %s\n' "$name" "$preset" "$status" "$codes"
  fi
done
echo "$loads of $total files load"
