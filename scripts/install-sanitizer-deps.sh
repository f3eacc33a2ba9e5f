#!/usr/bin/env bash
# Installs what the sanitizer and fuzz builds need on top of scripts/install-deps.sh: clang and its
# compiler-rt (the ASan, UBSan and libFuzzer runtimes), from Debian packages (Debian 12: clang 14,
# Ubuntu 24.04: clang 18). Used by scripts/ci-sanitizers.sh and scripts/ci-fuzz.sh.
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
install() {
  echo "install-sanitizer-deps: installing $*"
  [ -n "${updated:-}" ] || { $sudo apt-get update -qq; updated=1; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}
installed clang || install clang
# compiler-rt comes per clang version: libclang-rt-14-dev for clang 14.
major=$(clang -dumpversion | cut -d. -f1)
installed "libclang-rt-$major-dev" || install "libclang-rt-$major-dev"
echo "install-sanitizer-deps: clang $major with compiler-rt is installed"
