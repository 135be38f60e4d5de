# Shared by scripts/demo and scripts/test (which set FOR=demo|test first): run from the repository without
# installing it, and install only what is missing, never into a system or global interpreter.
#
# The interpreter: $PYTHON when set; else python3 when it is a virtual environment (venv, conda) or already
# has everything; else this clone's .venv, created on first use and reused after. Installs show pip's progress.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
LINUX_X86=$([[ "$(uname -s)-$(uname -m)" == Linux-x86_64 ]] && echo 1 || echo 0)
NEEDED="torch, cuda.core, cuda.bindings, cuda.pathfinder"
EXTRA=""
if [[ "$LINUX_X86" == 1 ]]; then NEEDED="$NEEDED, triton"; EXTRA="triton"; fi  # the demo shows the Triton flavor
if [[ "$FOR" == test ]]; then NEEDED="$NEEDED, pytest, hypothesis"; EXTRA="test"; fi

has_all() { "$1" -c "import $NEEDED" 2>/dev/null; }
is_venv() { "$1" -c "import sys; sys.exit(sys.prefix == sys.base_prefix)" 2>/dev/null; }

if [[ -n "${PYTHON:-}" ]]; then
  PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
  PY="$ROOT/.venv/bin/python"
else
  PY="$(command -v python3 || true)"
  if [[ -z "$PY" ]]; then
    echo "scripts: no python3 on PATH. Fix: install Python 3.11 or newer, or set PYTHON=/path/to/python." >&2
    exit 2
  fi
  if ! has_all "$PY" && ! is_venv "$PY"; then
    # A system or global interpreter: installing into it would fail on Debian (externally managed) and
    # change it elsewhere. The clone gets its own environment instead.
    echo "scripts: $PY is not a virtual environment; creating $ROOT/.venv (once; later runs reuse it)" >&2
    if ! "$PY" -m venv "$ROOT/.venv"; then
      rm -rf "$ROOT/.venv"
      echo "scripts: could not create a virtual environment. Fix: apt install python3-venv (Debian, Ubuntu), or set" \
           "PYTHON to an interpreter in a virtual environment." >&2
      exit 2
    fi
    PY="$ROOT/.venv/bin/python"
  fi
fi

if ! has_all "$PY"; then
  echo "scripts: installing what the $FOR needs into $("$PY" -c 'import sys; print(sys.prefix)') (first run only;" \
       "~2-5 min with a warm package cache, longer on a slow link)" >&2
  start=$SECONDS
  "$PY" -m pip install --progress-bar on --upgrade pip >/dev/null 2>&1 || true
  if ! "$PY" -c "import torch" 2>/dev/null; then
    # The torch version the CPU suite is run against (OPSMITH_TORCH_VERSION overrides it), from the package
    # index pip is configured with: on Linux x86-64 PyPI's wheel is the CUDA build, ~2.5 GB with its nvidia-*
    # libraries. A GPU machine brings its own torch, which this skips.
    "$PY" -m pip install --progress-bar on "torch==${OPSMITH_TORCH_VERSION:-2.13.0}"
  fi
  "$PY" -m pip install --progress-bar on -e "$ROOT${EXTRA:+[$EXTRA]}"
  echo "scripts: installed in $((SECONDS - start)) s" >&2
fi
