#!/usr/bin/env bash
# Installs everything heterospec needs to build and test on Debian/Ubuntu, then
# configures and builds it. Idempotent: packages already present are not
# reinstalled, and the build is incremental.
#
#   tools/setup.sh [build-dir]     (default: build)
#
# Needs root (or sudo) only when a package is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libvulkan-dev mesa-vulkan-drivers vulkan-tools vulkan-validationlayers
  glslang-tools spirv-tools jq xz-utils
  libstb-dev libcmocka-dev libcjson-dev libpcre2-dev
  python3 python3-venv python3-pip
)
# npm fetches test data and (later) the llama.cpp peer; a machine that already
# has Node.js with npm keeps it.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# lavapipe and the loader want a runtime dir; harmless elsewhere.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

jobs="$(nproc 2>/dev/null || echo 2)"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHS_WERROR=ON >/dev/null
ninja -C "$build" -j "$jobs"
echo "setup: built $build/heterospec"
