#!/usr/bin/env bash
# Set up (see setup.sh), then run the whole test suite. Tests that need QEMU or the RISC-V compiler fail
# rather than skip when EDGERNN_REQUIRE_TOOLCHAINS=1 (as in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q -ra tests "$@"
