#!/usr/bin/env bash
# Builds hs-oracle (llama.cpp logits oracle and speed peer) into
#   ${HS_HOME:-~/.cache/heterospec}/peer/bin/hs-oracle
# Fetches what it needs first (idempotent): the llama.cpp source clone for llama.h
# (tools/fetch_llama_src.sh) and the prebuilt libraries (tools/fetch_llama_bin.sh).
#
#   tools/oracle/build.sh [extra cmake -D options]    e.g. -DHS_SANITIZE=ON
#
# Needs cmake, a C compiler, npm and git. Re-runs are incremental.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="$(cd "$here/.." && pwd)"
home="${HS_HOME:-$HOME/.cache/heterospec}"
peer="$home/peer"

"$tools/fetch_llama_src.sh"
"$tools/fetch_llama_bin.sh"

for tool in cmake cc; do
  command -v "$tool" >/dev/null || { echo "oracle/build: '$tool' not found" >&2; exit 1; }
done
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

build="$peer/build"
# A build folder configured from another source folder cannot be reused.
if [ -f "$build/CMakeCache.txt" ] && ! grep -q "CMAKE_HOME_DIRECTORY:INTERNAL=$here\$" "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi
cmake -S "$here" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHS_LLAMA_SRC="$home/src/llama.cpp" -DHS_PEER_LIB="$peer/lib" \
  -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$peer/bin" "$@" >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"
echo "oracle/build: $peer/bin/hs-oracle"
