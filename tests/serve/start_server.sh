# Sourced by the serve tests: checks the openai client and node, starts `$binary serve --port 0`
# with the arguments given on the built-in model, and sets server (its pid), log (its output) and
# port (once it listens); the server is killed when the script exits.
#   usage: . start_server.sh [serve arguments...]   (with binary and source set)
client=$source/.npm-clients/node_modules/openai
[[ -d $client ]] || { echo "openai client missing: run scripts/fetch-openai-client.sh (install-deps.sh does)" >&2; exit 1; }
command -v node > /dev/null || { echo "node is missing (apt-get install npm)" >&2; exit 1; }
log=$(mktemp)
"$binary" serve --port 0 "$@" > "$log" 2>&1 &
server=$!
trap 'kill $server 2> /dev/null; wait $server 2> /dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$log")
  [[ -n $port ]] && break
  kill -0 $server 2> /dev/null || { cat "$log"; echo "serve exited early" >&2; exit 1; }
  sleep 0.1
done
[[ -n $port ]] || { cat "$log"; echo "serve did not start listening" >&2; exit 1; }
