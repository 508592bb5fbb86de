#!/usr/bin/env bash
# Sets up and builds heterospec, fetches the default model (SmolLM2-135M-Instruct
# Q4_1, sha256-checked) and runs the main job: generation on the default model
# with HeteroSpec speculative decoding (the default whenever a draft head fits
# the model: here the committed models/heads/smollm2), printing its draft
# statistics and which calibration it used (this device's from `heterospec
# calibrate`, made here on the first run, else the defaults committed beside the
# head; where that calibration found the head does not pay, as on lavapipe,
# HeteroSpec drafts from the context lookup and the n-gram store alone and says
# so; tools/build_store.sh builds the store from the committed answers first).
# Extra arguments go to `generate`.
# Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/tools/setup.sh" "$here/build"
"$here/tools/fetch_model.sh" smollm2
"$here/tools/build_store.sh" "$here/build"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
"$here/build/heterospec" devices
# On its first run on a device, HeteroSpec's calibration for it (the device cost model, then the strata and
# policy fitted on questions 1-5 of each benchmark set, the declared calibration split; about 3 minutes on a
# 2-core CPU), into $HS_HOME/calib, where generate finds it; kept on later runs. Without it (no ../shared
# beside the clone, say) generate uses the defaults committed beside the head.
"$here/build/heterospec" calibrate --if-missing --questions 1-5 -n 96 ||
  echo "demo: no calibration made for this device; generate uses the committed defaults" >&2
if [ $# -eq 0 ]; then
  set -- --chat -n 128 -p "Write a short story about a robot who learns to paint."
fi
"$here/build/heterospec" generate "$@"
