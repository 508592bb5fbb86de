#!/usr/bin/env bash
# Sets up and builds heterospec, then runs the main job. Until model loading
# lands (issue 3) the main job is the device report and the per-op benchmark
# that HeteroSpec's cost model is built from. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/tools/setup.sh" "$here/build"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
"$here/build/heterospec" devices
"$here/build/heterospec" bench-ops "$@"
