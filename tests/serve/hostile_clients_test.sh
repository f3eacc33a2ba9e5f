#!/usr/bin/env bash
# ctest: `switchyard serve` on the built-in model against hostile clients (tests/serve/hostile_clients.mjs):
# large bodies, memory running out, slow clients, SIGTERM with a stream running and a request waiting.
#   usage: hostile_clients_test.sh SWITCHYARD_BINARY SOURCE_DIR [BIG_REQUESTS]
set -euo pipefail
binary=$1 source=$2 big_requests=${3:-20}
. "$(dirname "$0")/start_server.sh" --served_model_name tiny --max_queue 4 --read_deadline_s 3
SWITCHYARD_URL="http://127.0.0.1:$port" SERVER_PID=$server READ_DEADLINE_S=3 BIG_REQUESTS=$big_requests \
  timeout 240 node "$source/tests/serve/hostile_clients.mjs" || { cat "$log"; exit 1; }
# The script ended with SIGTERM: the server stops cleanly.
status=0
timeout 30 tail --pid=$server -f /dev/null || status=$?
wait $server || status=$?
trap 'rm -f "$log"' EXIT
[[ $status == 0 ]] || { cat "$log"; echo "serve exited with $status after SIGTERM" >&2; exit 1; }
grep -q "serve: stopped" "$log" || { cat "$log"; echo "serve did not stop cleanly" >&2; exit 1; }
