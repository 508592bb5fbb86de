#!/usr/bin/env bash
# The cross-device report: HeteroSpec against plain decoding and EAGLE-2 on this device, measured the way the
# README's lavapipe figures were, into one folder that tools/plot_bench.py merges with other devices' folders.
#
#   bash tools/report.sh [options] [-- calibrate/bench-spec options]
#
# Steps (each skipped when its output is already in the folder, so a stopped run resumes; delete a file to
# measure it again):
#   1. setup: Debian packages and the test build (tools/setup.sh), SmolLM2-135M-Instruct (tools/fetch_model.sh),
#      the n-gram store (tools/build_store.sh), a Release build in build-rel/ and the plotting venv
#   2. devices.txt         `heterospec devices`: what the run measured on
#   3. calib-greedy.json   `heterospec calibrate` on the calibration split (greedy)
#      calib-sample.json   the same at temperature 1
#   4. bench-spec-t0.json  `heterospec bench-spec` on the report split, greedy: ar, heterospec, eagle2-tuned (the
#                          calibration's EAGLE-2 setting) and eagle2 (EAGLE's defaults 10/5/60)
#      bench-spec-t1.json  the same at temperature 1: ar, heterospec, eagle2-tuned
#   5. plots/              tools/plot_bench.py: speedup.png, tau_vs_verified.png, strata.png, cost_curve.png and
#                          devices.md (the tables)
#   6. REPORT.md           the device, the settings, the commands (in order) and the tables; the builds are in the JSON
#
# The calibration split and the report split must not share a question: the figures are measured on questions
# the tuning never saw. Nothing else should run on the machine meanwhile (the timings are the report).
# To compare devices, run this on each and draw the folders together:
#   PY=$(bash tools/pyenv.sh plot | tail -1); $PY tools/plot_bench.py A/*.json B/*.json --out merged/
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prog="report"

usage() {
  cat <<'EOF'
usage: bash tools/report.sh [options] [-- calibrate/bench-spec options]

  --out DIR              the report's folder (default: results/DATE-DEVICE in the source tree)
  --questions F-T        report split: questions F..T of each set (default 11-20)
  --calib-questions F-T  calibration split (default 1-5); must not overlap the report split
  -n N                   most new tokens per question (default 128)
  --calib-n N            new tokens per calibration question (default 96)
  -r N                   runs of each method per question, the median kept (default 3)
  --methods LIST         greedy methods (default ar,heterospec,eagle2-tuned,eagle2)
  --methods-t1 LIST      temperature-1 methods (default ar,heterospec,eagle2-tuned; none: no such run)
  --quick                a first look: questions 11-12, -n 64, -r 1
  --no-setup             no packages, downloads or builds: use --hs and --python as they are
  --hs BIN               heterospec binary (default build-rel/heterospec, built Release by the setup)
  --python PY            Python with matplotlib (default: tools/pyenv.sh plot's venv)
  -- ARGS                given to calibrate and bench-spec alike, e.g. -m MODEL --head HEAD --data DIR
                         --sets A,B --no-chat (HS_DEVICE=<index|name> picks the device)
EOF
}

die() { echo "$prog: $*" >&2; exit 2; }

out="" questions="11-20" calib_q="1-5" n=128 calib_n=96 runs=3
methods="ar,heterospec,eagle2-tuned,eagle2" methods_t1="ar,heterospec,eagle2-tuned"
setup=1 hs="" py=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --questions) questions="${2:?--questions needs F-T}"; shift 2 ;;
    --calib-questions) calib_q="${2:?--calib-questions needs F-T}"; shift 2 ;;
    -n) n="${2:?-n needs a number}"; shift 2 ;;
    --calib-n) calib_n="${2:?--calib-n needs a number}"; shift 2 ;;
    -r) runs="${2:?-r needs a number}"; shift 2 ;;
    --methods) methods="${2:?--methods needs a list}"; shift 2 ;;
    --methods-t1) methods_t1="${2:?--methods-t1 needs a list}"; shift 2 ;;
    --quick) questions="11-12" n=64 runs=1; shift ;;
    --no-setup) setup=0; shift ;;
    --hs) hs="${2:?--hs needs a binary}"; shift 2 ;;
    --python) py="${2:?--python needs a Python}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
done
extra=("$@")

# range OPTION F-T: sets rf and rt, or exits naming the option.
range() {
  [[ "$2" =~ ^([0-9]+)-([0-9]+)$ ]] || die "$1 $2: expected F-T, 1 <= F <= T"
  rf=$((10#${BASH_REMATCH[1]})) rt=$((10#${BASH_REMATCH[2]}))
  [ "$rf" -ge 1 ] && [ "$rf" -le "$rt" ] || die "$1 $2: expected F-T, 1 <= F <= T"
}
range --questions "$questions"
qf=$rf qt=$rt
range --calib-questions "$calib_q"
if [ "$qf" -le "$rt" ] && [ "$rf" -le "$qt" ]; then
  die "the report split ($questions) overlaps the calibration split ($calib_q): report on questions the calibration did not see"
fi
for o in "-n $n" "--calib-n $calib_n" "-r $runs"; do
  [[ "${o#* }" =~ ^[1-9][0-9]*$ ]] || die "$o: expected a positive integer"
done

export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR"
if [ "$setup" -eq 1 ]; then
  "$here/tools/setup.sh" "$here/build"
  "$here/tools/fetch_model.sh" smollm2
  "$here/tools/build_store.sh" "$here/build"
  cmake -S "$here" -B "$here/build-rel" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$here/build-rel" heterospec
fi
hs="${hs:-$here/build-rel/heterospec}"
[ -x "$hs" ] || die "$hs is not built (run without --no-setup, or give --hs)"
if [ -z "$py" ]; then
  if [ "$setup" -eq 1 ]; then py="$(bash "$here/tools/pyenv.sh" plot | tail -n 1)"; else die "--no-setup needs --python"; fi
fi

# have FILE: FILE is in the folder already (kept: delete it to measure again).
have() {
  if [ -s "$out/$1" ]; then
    echo "$prog: $1: kept (delete it to measure again)" >&2
    return 0
  fi
  return 1
}
# quoted COMMAND...: the command as one line a shell reads back (words quoted only where they need it).
quoted() {
  local a words=()
  for a in "$@"; do
    if [[ "$a" =~ ^[][A-Za-z0-9_./,=:@%+-]+$ ]]; then words+=("$a"); else words+=("$(printf '%q' "$a")"); fi
  done
  echo "${words[*]}"
}
# step FILE LOG OUT COMMAND...: unless FILE is kept, runs COMMAND, which writes FILE.tmp itself (OUT -: its
# output and errors to LOG) or on its output (OUT >: its errors to LOG); then FILE.tmp becomes FILE and the
# command joins commands.txt (what REPORT.md lists), with "> FILE" for the second kind.
step() {
  local f="$1" log="$2" to="$3" line
  shift 3
  have "$f" && return 0
  line="$(quoted "$@")"
  echo "$prog: $f: $line" >&2
  if [ "$to" = ">" ]; then
    "$@" >"$out/$f.tmp" 2>"$out/$log" || { tail -n 20 "$out/$log" >&2; die "$f: the command failed: $out/$log"; }
    line+=" > $out/$f"
  else
    "$@" >"$out/$log" 2>&1 || { tail -n 20 "$out/$log" >&2; die "$f: the command failed: $out/$log"; }
  fi
  mv "$out/$f.tmp" "$out/$f"
  echo "$line" >>"$out/commands.txt"
}

# The device the commands pick (`heterospec devices` says which: HS_DEVICE, else the best by type), for the
# folder's name.
devices="$("$hs" devices 2>&1)" || { echo "$devices" >&2; die "heterospec devices failed"; }
used="$(sed -n 's/^heterospec: used: \([0-9]*\)$/\1/p' <<<"$devices")"
line="$(grep -m1 "^heterospec: $used = " <<<"$devices" || true)"
name="$(sed -E 's/^heterospec: [0-9]+ = ([^|]*) \([^)]*\) \|.*/\1/' <<<"$line")"
host="$(sed -nE 's/.*\| host: (.*)$/\1/p' <<<"$line")"
slug="$(tr 'A-Z' 'a-z' <<<"${name:-device}${host:+ $host}" | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//' | cut -c1-60)"
out="${out:-$here/results/$(date -u +%Y%m%d)-${slug%-}}"
mkdir -p "$out"
echo "$prog: device: ${name:-?}${host:+ on $host}; folder: $out" >&2

# A folder holds one report: the settings it was started with must be the run's, or kept files would mix.
config="device: ${name:-?}${host:+ on $host}
report split: $questions
calibration split: $calib_q
new tokens: $n
calibration new tokens: $calib_n
runs: $runs
greedy methods: $methods
temperature-1 methods: $methods_t1
calibrate/bench-spec options: $(quoted "${extra[@]}")"
if [ -f "$out/config.txt" ] && [ "$(cat "$out/config.txt")" != "$config" ]; then
  echo "$prog: $out holds a report made with other settings (was < > now):" >&2
  diff "$out/config.txt" <(echo "$config") | grep '^[<>]' >&2 || true
  die "give another --out, or empty that folder"
fi
echo "$config" >"$out/config.txt"
echo "$devices" >"$out/devices.txt"

# 3. The calibrations (their log beside them: the choices and the modelled speedups).
calibrate() { # MODE TEMP
  step "calib-$1.json" "calib-$1.log" - "$hs" calibrate --questions "$calib_q" -n "$calib_n" --temp "$2" "${extra[@]}" \
    -o "$out/calib-$1.json.tmp"
}
calibrate greedy 0
[ "$methods_t1" = none ] || calibrate sample 1
# 4. The report runs, each with its mode's calibration.
bench() { # TEMP METHODS MODE
  step "bench-spec-t$1.json" "bench-spec-t$1.log" ">" "$hs" bench-spec --questions "$questions" -n "$n" -r "$runs" \
    --temp "$1" --methods "$2" --calibration "$out/calib-$3.json" "${extra[@]}" -o json
  inputs+=("$out/bench-spec-t$1.json")
}
inputs=()
bench 0 "$methods" greedy
[ "$methods_t1" = none ] || bench 1 "$methods_t1" sample

# 5. Plots and tables (always drawn again: they cost seconds).
rm -rf "$out/plots"
"$py" "$here/tools/plot_bench.py" "${inputs[@]}" "$out/calib-greedy.json" --out "$out/plots" >/dev/null

# 6. REPORT.md: what ran where, and the tables.
{
  echo "# heterospec on ${name:-this device}${host:+ ($host)}"
  echo
  echo "Made by \`bash tools/report.sh\` (tables drawn $(date -u '+%Y-%m-%d %H:%M UTC')): report split questions $questions of each"
  echo "set (up to $n new tokens; $runs run(s) of each method per question, the median kept), calibration split questions $calib_q."
  echo
  echo "Device (\`heterospec devices\`):"
  echo
  echo '```'
  sed 's/^heterospec: //' "$out/devices.txt"
  echo '```'
  echo
  echo "Commands, in order:"
  echo
  echo '```'
  sed -E "s|$out/||g; s|$here/||g; s/\\.json\\.tmp/.json/g" "$out/commands.txt" 2>/dev/null || true
  echo '```'
  echo
  cat "$out/plots/devices.md"
  echo
  echo "Plots: $(cd "$out/plots" && ls *.png | sed 's/.*/`plots\/&`/' | paste -sd, - | sed 's/,/, /g')."
} >"$out/REPORT.md"
sed -n '/^## bench-spec, all sets/,/^## bench-spec, per set/p' "$out/plots/devices.md" | sed '$d'
echo "$prog: wrote $out/REPORT.md" >&2
