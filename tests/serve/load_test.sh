#!/usr/bin/env bash
# `switchyard serve` on the built-in model under tests/serve/load_test.mjs for SECONDS (default 300)
# with CLIENTS (default 8) streaming clients (the script checks the server's own counts too).
#   usage: load_test.sh SWITCHYARD_BINARY SOURCE_DIR [SECONDS] [CLIENTS]
set -euo pipefail
binary=$1 source=$2 seconds=${3:-300} clients=${4:-8}
client=$source/.npm-clients/node_modules/openai
[[ -d $client ]] || { echo "openai client missing: run scripts/fetch-openai-client.sh (install-deps.sh does)" >&2; exit 1; }
log=$(mktemp)
"$binary" serve --port 0 --served_model_name tiny --max_queue 16 > "$log" 2>&1 &
server=$!
trap 'kill $server 2> /dev/null; wait $server 2> /dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$log")
  [[ -n $port ]] && break
  kill -0 $server 2> /dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
[[ -n $port ]] || { cat "$log"; echo "serve did not start listening" >&2; exit 1; }
SWITCHYARD_URL="http://127.0.0.1:$port/v1" SWITCHYARD_OPENAI=$client SERVER_PID=$server LOAD_SECONDS=$seconds CLIENTS=$clients \
  node "$source/tests/serve/load_test.mjs"
