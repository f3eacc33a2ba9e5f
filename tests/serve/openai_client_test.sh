#!/usr/bin/env bash
# ctest: `switchyard serve` on the built-in model (a real DeepSeek-V3 tokenizer and chat template)
# on a free loopback port, driven by the openai npm client (tests/serve/openai_client.mjs).
#   usage: openai_client_test.sh SWITCHYARD_BINARY SOURCE_DIR
set -euo pipefail
binary=$1 source=$2
. "$(dirname "$0")/start_server.sh" --api_key test-key --served_model_name tiny
SWITCHYARD_URL="http://127.0.0.1:$port/v1" SWITCHYARD_API_KEY=test-key SWITCHYARD_OPENAI=$client \
  node "$source/tests/serve/openai_client.mjs"
# The server stops on SIGTERM, cleanly.
kill -TERM $server
status=0
wait $server || status=$?
[[ $status == 0 ]] || { cat "$log"; echo "serve exited with $status after SIGTERM" >&2; }
trap 'rm -f "$log"' EXIT
grep -q "cancelled (the client went away)" "$log" || { cat "$log"; echo "serve did not notice the client that aborted" >&2; exit 1; }
grep -q "serve: stopped" "$log" || { cat "$log"; echo "serve did not stop cleanly" >&2; exit 1; }
exit $status
