#!/usr/bin/env bash
# The real OpenAI client that tests `switchyard serve` (tests/serve/openai_client.mjs): the `openai`
# npm package, pinned by version, installed once into .npm-clients/ (ignored by git); later runs
# find it there and download nothing. Nothing downloads at build or run time.
#   usage: scripts/fetch-openai-client.sh   (needs npm)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.npm-clients
version=6.49.0  # the 7.x releases need Node 22; Debian 12's machines have Node 20
if [[ -f $dir/node_modules/openai/package.json ]] && grep -q "\"version\": \"$version\"" "$dir/node_modules/openai/package.json"; then
  echo "fetch-openai-client: openai@$version is in $dir"
  exit 0
fi
command -v npm > /dev/null || { echo "fetch-openai-client: npm is missing (apt-get install npm)" >&2; exit 2; }
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
npm install --prefix "$dir.partial" --no-save --ignore-scripts --no-audit --no-fund --loglevel=error "openai@$version"
rm -rf "$dir" && mv "$dir.partial" "$dir"
echo "fetch-openai-client: installed openai@$version into $dir"
