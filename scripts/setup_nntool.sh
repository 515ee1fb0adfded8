#!/usr/bin/env bash
# A venv of its own for GreenWaves' NNTool (../shared/nntool, or $EDGERNN_NNTOOL_HOME), which needs numpy < 1.24
# and cmd2 1.0.2 beside edgernn's numpy 2: at $EDGERNN_NNTOOL_VENV, else .venv-nntool in the repo. The NNTool
# tests (tests/targets/gap8/test_nntool.py) run NNTool with this venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${EDGERNN_NNTOOL_VENV:-$PWD/.venv-nntool}"
python="$(command -v python3.11 || command -v python3)"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q \
    "numpy==1.23.5" "scipy<1.12" "scikit-learn<1.4" "onnx<1.17" "cmd2==1.0.2" xxhash texttable prettytable \
    Pillow argcomplete bfloat16 kmeans1d iteration-utilities graphviz XlsxWriter python-dateutil flatbuffers pytest
