#!/usr/bin/env bash
# Set up (see setup.sh), then run the whole test suite. Tests that need QEMU or the RISC-V compiler fail
# rather than skip when EDGERNN_REQUIRE_TOOLCHAINS=1 (as in CI).
# The tests run on one worker per core (pytest-xdist; EDGERNN_TEST_WORKERS=N for N workers, 0 for none), each test
# taken by whichever worker is free; the 25 slowest are listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q -ra -n "${EDGERNN_TEST_WORKERS:-auto}" --dist worksteal --durations=25 tests "$@"
