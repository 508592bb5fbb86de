#!/usr/bin/env bash
# Creates or updates a Python venv for one of heterospec's tool sets and prints
# its python's path (the only thing written to stdout).
#
#   tools/pyenv.sh NAME     uses tools/requirements-NAME.txt and ${HS_HOME:-~/.cache/heterospec}/venv-NAME
#
# Idempotent: pip runs only when the requirements file's sha256 differs from the
# one recorded in the venv after its last successful install.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="${1:?usage: tools/pyenv.sh NAME (uses tools/requirements-NAME.txt)}"
req="$here/requirements-$name.txt"
[ -f "$req" ] || { echo "pyenv: no $req" >&2; exit 2; }
home="${HS_HOME:-$HOME/.cache/heterospec}"
venv="$home/venv-$name"
py="${PYTHON:-python3}"

want="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.requirements.sha256"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
mkdir -p "$home"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv" >&2
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$req" >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
