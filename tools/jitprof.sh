#!/usr/bin/env bash
# Where a CPU Vulkan driver's (lavapipe's) compiled shaders spend their cycles: the instruction mix of
# the hottest JIT code while `heterospec bench` runs. perf cannot name llvmpipe's JIT code (its samples
# are "[unknown]"), so this samples instruction addresses with perf, reads the hottest pages of code out
# of the running process with gdb, and counts the samples per instruction kind.
#
#   tools/jitprof.sh [-b HETEROSPEC] [-m MODEL] [-s SECONDS] [-w WARMUP] [--pages N] [BENCH ARGS...]
#
# BENCH ARGS default to `-p 4 -n 0` (a batch of 4 tokens, a small tree's verification); the batch is
# repeated so that bench runs through the whole sample. The environment passes on (for example
# HS_VK_DISABLE_SPLIT=1 for one logical device, HS_TUNING=... for another tile shape). Prints the share of
# samples per kind (multiplies, adds, loads gathered lane by lane, stack spills and reloads, other), the
# most sampled mnemonics and the hottest window of 60 instructions. A page is disassembled from its
# first byte, so its first instructions may be decoded out of step; the counts are a guide, not a cycle
# account. Needs perf and gdb (Debian: apt-get install linux-perf gdb) and the right to attach to the
# process (root, or kernel.perf_event_paranoid <= 1 and ptrace allowed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
bin="$repo/build/heterospec"
model="${HS_HOME:-$HOME/.cache/heterospec}/models/SmolLM2-135M-Instruct.Q4_1.gguf"
secs=5
warm=6
pages=40
while [ $# -gt 0 ]; do
  case "$1" in
  -b) bin="$2"; shift 2 ;;
  -m) model="$2"; shift 2 ;;
  -s) secs="$2"; shift 2 ;;
  -w) warm="$2"; shift 2 ;;
  --pages) pages="$2"; shift 2 ;;
  -h | --help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) break ;;
  esac
done
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-p 4 -n 0)
for tool in perf gdb python3; do
  command -v "$tool" >/dev/null || { echo "jitprof: $tool not found (Debian: apt-get install linux-perf gdb)" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "jitprof: no heterospec binary at $bin (build it, or -b)" >&2; exit 2; }
[ -f "$model" ] || { echo "jitprof: no model at $model (tools/fetch_model.sh, or -m)" >&2; exit 2; }
# Repeat every -p/-n list value so that bench outlasts warm-up + sample.
rep=()
for ((i = 0; i < ${#args[@]}; i++)); do
  a="${args[$i]}"
  rep+=("$a")
  if [ "$a" = -p ] || [ "$a" = -n ] || [ "$a" = -v ]; then
    i=$((i + 1))
    v="${args[$i]}"
    rep+=("$(printf "$v,%.0s" $(seq 12) | sed 's/,$//')")
  fi
done
tmp="$(mktemp -d)"
bp=""
trap '[ -n "$bp" ] && kill "$bp" 2>/dev/null; rm -rf "$tmp"' EXIT
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR"
"$bin" bench -m "$model" "${rep[@]}" -r 32 >"$tmp/bench.log" 2>&1 &
bp=$!
sleep "$warm"
kill -0 "$bp" 2>/dev/null || { echo "jitprof: bench ended during the warm-up:" >&2; tail -5 "$tmp/bench.log" >&2; exit 1; }
perf record -q -o "$tmp/perf.data" -p "$bp" -- sleep "$secs" >/dev/null 2>&1 ||
  { echo "jitprof: perf record failed (permissions? kernel.perf_event_paranoid)" >&2; exit 1; }
perf script -i "$tmp/perf.data" -F ip 2>/dev/null | awk '{print $1}' >"$tmp/ips.txt"
# The hottest pages of code outside the kernel, read out of the process.
awk 'length($1) < 16 { p = substr($1, 1, length($1) - 3); c[p]++ } END { for (k in c) print c[k], k }' \
  "$tmp/ips.txt" | sort -rn | head -"$pages" | awk '{print $2}' >"$tmp/pages.txt"
gdbcmd=()
while read -r p; do gdbcmd+=(-ex "x/1400i 0x${p}000"); done <"$tmp/pages.txt"
gdb -p "$bp" -batch "${gdbcmd[@]}" 2>/dev/null | grep "0x" >"$tmp/dis.txt" || true
kill "$bp" 2>/dev/null || true
wait "$bp" 2>/dev/null || true
python3 - "$tmp/ips.txt" "$tmp/dis.txt" <<'EOF'
import collections, re, sys

samples = collections.Counter(int(l, 16) for l in open(sys.argv[1]) if l.strip())
ins = {}
for l in open(sys.argv[2]):
    m = re.match(r"\s*(?:=>)?\s*0x([0-9a-f]+)(?: <[^>]*>)?:\s*(\S+)\s*(.*)", l)
    if m:
        ins[int(m.group(1), 16)] = (m.group(2), m.group(3))
MUL = {"vpmulld", "vpmullw", "vpmaddwd", "vpmaddubsw", "vpdpbusd", "vpdpwssd", "vmulps", "vfmadd231ps",
       "vfmadd213ps", "vfmadd132ps", "vpmuludq", "vpmuldq"}
ADD = {"vpaddd", "vpaddw", "vaddps", "vpsubd", "vsubps"}
GATHER = {"vpextrd", "vpinsrd", "vmovd", "vinserti32x4", "vinserti128", "vextracti128", "vextracti32x4",
          "vpgatherdd", "vgatherdps", "movslq", "vpunpckldq", "vpunpckhdq", "vpunpcklqdq", "vpunpckhqdq"}
kinds, mn = collections.Counter(), collections.Counter()
for a, (m, ops) in ins.items():
    n = samples.get(a, 0)
    if "(%rsp)" in ops and (m.startswith("vmov") or m == "mov"):
        k = "stack spill/reload"
    elif m in MUL:
        k = "multiply"
    elif m in ADD:
        k = "add"
    elif m in GATHER:
        k = "lane-by-lane load/insert"
    else:
        k = "other"
    kinds[k] += n
    mn[m] += n
total = sum(samples.values())
seen = sum(kinds.values())
print(f"samples: {total}, {seen} ({100 * seen / max(total, 1):.0f} %) in the disassembled pages")
for k, n in kinds.most_common():
    print(f"  {k:26s} {100 * n / max(seen, 1):5.1f} %")
print("most sampled: " + ", ".join(f"{m} {100 * n / max(seen, 1):.1f} %" for m, n in mn.most_common(12)))
lines = sorted(ins.items())
best, at = -1, 0
for i in range(max(0, len(lines) - 60)):
    s = sum(samples.get(lines[j][0], 0) for j in range(i, i + 60))
    if s > best:
        best, at = s, i
print(f"hottest window ({best} samples):")
for a, (m, ops) in lines[at:at + 60]:
    print(f"  {samples.get(a, 0):5d}  {a:x}  {m} {ops}")
EOF
