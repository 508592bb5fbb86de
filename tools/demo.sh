#!/usr/bin/env bash
# Sets up and builds heterospec, fetches the default model (SmolLM2-135M-Instruct
# Q4_1, sha256-checked) and runs the main job: generation on the default model
# with HeteroSpec speculative decoding (the default whenever a draft head fits
# the model: here the committed models/heads/smollm2), printing its draft
# statistics and which calibration it used (this device's from `heterospec
# calibrate`, else the defaults committed beside the head; where that calibration
# found the head does not pay, as on lavapipe, HeteroSpec drafts from the context
# lookup and the n-gram store alone and says so; tools/build_store.sh builds the
# store from the committed answers first). Extra arguments go to `generate`.
# Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/tools/setup.sh" "$here/build"
"$here/tools/fetch_model.sh" smollm2
"$here/tools/build_store.sh" "$here/build"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
"$here/build/heterospec" devices
if [ $# -eq 0 ]; then
  set -- --chat -n 128 -p "Write a short story about a robot who learns to paint."
fi
"$here/build/heterospec" generate "$@"
