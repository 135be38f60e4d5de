# Shared by scripts/demo and scripts/test: run from the repo without installing it, and install the
# dependencies only when they are missing (a GPU machine with no registry already has them).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"
NEEDED="torch, cuda.core, cuda.bindings, cuda.pathfinder, pytest, hypothesis"
# The test extra installs Triton where it installs; its tests must not skip there for want of it.
[[ "$(uname -s)-$(uname -m)" == Linux-x86_64 ]] && NEEDED="$NEEDED, triton"
if ! "$PY" -c "import $NEEDED" 2>/dev/null; then
  echo "scripts: installing dependencies (torch CPU build ${OPSMITH_TORCH_VERSION:-2.13.0} where torch is missing)" >&2
  if ! "$PY" -c "import torch" 2>/dev/null; then
    # Plain `pip install torch` would pull the multi-GB CUDA build; this pins the CPU wheel of this machine.
    "$PY" -m pip install -q "torch==${OPSMITH_TORCH_VERSION:-2.13.0}"
  fi
  "$PY" -m pip install -q -e "$ROOT[test]"
fi
