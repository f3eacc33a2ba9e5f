#!/usr/bin/env bash
# `switchyard serve` on the built-in model under tests/serve/load_test.mjs for SECONDS (default 300)
# with CLIENTS (default 8) streaming clients (the script checks the server's own counts too).
#   usage: load_test.sh SWITCHYARD_BINARY SOURCE_DIR [SECONDS] [CLIENTS]
set -euo pipefail
binary=$1 source=$2 seconds=${3:-300} clients=${4:-8}
. "$(dirname "$0")/start_server.sh" --served_model_name tiny --max_queue 16
SWITCHYARD_URL="http://127.0.0.1:$port/v1" SWITCHYARD_OPENAI=$client SERVER_PID=$server LOAD_SECONDS=$seconds CLIENTS=$clients \
  node "$source/tests/serve/load_test.mjs"
