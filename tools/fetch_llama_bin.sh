#!/usr/bin/env bash
# Fetches the prebuilt llama.cpp shared libraries that the oracle and the peer
# benchmark use (DESIGN.md section 7): the npm package
# @node-llama-cpp/linux-x64-vulkan@3.22.1, built from llama.cpp release v0.5.0.
#
#   tools/fetch_llama_bin.sh
#
# Packs the package with npm into ${HS_HOME:-~/.cache/heterospec}/peer/, checks
# the tarball's sha256 and extracts its shared libraries into peer/lib/:
#   libllama.vulkan.v0.5.0.so   the llama C API (llama.h), plus a libllama.so link
#   libggml.vulkan.v0.5.0.so    ggml's backend registry, plus a libggml.so link
#   libggml-base.so             ggml core
#   libggml-vulkan.so           Vulkan backend   } loaded at run time with
#   libggml-cpu-<cpu>.so        CPU backends     } ggml_backend_load_all_from_path
#   _nlcBuildMetadata.json      which llama.cpp release the binaries come from
# The matching headers are in the source clone made by tools/fetch_llama_src.sh.
# Idempotent: returns at once when peer/lib/ holds the libraries of this tarball.
# Needs npm, tar and sha256sum. Linux x86-64 with glibc only.
set -euo pipefail
# shellcheck source=tools/npm_pack.sh
source "$(dirname "${BASH_SOURCE[0]}")/npm_pack.sh"

pkg="@node-llama-cpp/linux-x64-vulkan@3.22.1"
tarball="node-llama-cpp-linux-x64-vulkan-3.22.1.tgz"
sha256="e10577190fc4bd1649d3b655588e5c7a85fc6b6dbf7136fee596cbe9e25521e7"
release="v0.5.0"   # _nlcBuildMetadata.json: buildOptions.llamaCpp.release

home="${HS_HOME:-$HOME/.cache/heterospec}"
peer="$home/peer"
lib="$peer/lib"
stamp="$lib/.fetched"

die() { echo "fetch_llama_bin: $*" >&2; exit 1; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sha256" ] &&
   [ -f "$lib/libllama.vulkan.$release.so" ] && [ -f "$lib/libggml-vulkan.so" ]; then
  exit 0
fi

[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] ||
  die "the prebuilt libraries are for Linux x86-64; this is $(uname -s) $(uname -m)"
for tool in npm tar sha256sum; do
  command -v "$tool" >/dev/null || die "'$tool' not found (Debian: apt-get install npm)"
done

mkdir -p "$peer"
work="$(mktemp -d "$peer/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

npm_pack_verified fetch_llama_bin "$pkg" "$tarball" "$sha256" "$peer" "$work"

echo "fetch_llama_bin: extracting the shared libraries into $lib"
tar -xzf "$peer/$tarball" -C "$work" --wildcards \
  'package/bins/linux-x64-vulkan/*.so' 'package/bins/linux-x64-vulkan/_nlcBuildMetadata.json' ||
  die "could not extract the libraries from $tarball"
src="$work/package/bins/linux-x64-vulkan"
for f in "libllama.vulkan.$release.so" "libggml.vulkan.$release.so" libggml-base.so \
         libggml-vulkan.so libggml-cpu-x64.so _nlcBuildMetadata.json; do
  [ -f "$src/$f" ] || die "$tarball has no bins/linux-x64-vulkan/$f"
done
grep -q "\"release\":\"$release\"" "$src/_nlcBuildMetadata.json" ||
  die "$tarball was not built from llama.cpp $release: $(cat "$src/_nlcBuildMetadata.json")"

# Replace lib/ as a whole so no library of another version stays behind.
ln -s "libllama.vulkan.$release.so" "$src/libllama.so"
ln -s "libggml.vulkan.$release.so" "$src/libggml.so"
echo "$sha256" >"$src/.fetched"
rm -rf "$lib"
mv "$src" "$lib"
echo "fetch_llama_bin: llama.cpp $release libraries in $lib"
