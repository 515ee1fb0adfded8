#!/usr/bin/env bash
# Set up (see setup.sh), then run the whole test suite. Tests that need QEMU or the RISC-V compiler fail
# rather than skip when EDGERNN_REQUIRE_TOOLCHAINS=1 (as in CI).
# The tests run on one worker per core (pytest-xdist; EDGERNN_TEST_WORKERS=N for N workers, 0 for none), each test
# taken by whichever worker is free; the 25 slowest are listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The other GAP SDKs the tests build against (EDGERNN_TEST_GAP_SDKS, colon-separated; CI: 4.8.0): their GVSOC
# is built here, ahead of the tests, like $GAP_SDK_HOME's in setup.sh.
IFS=: read -r -a other_sdks <<< "${EDGERNN_TEST_GAP_SDKS:-}"
for sdk in "${other_sdks[@]}"; do
    if [ -n "$sdk" ]; then
        GAP_SDK_HOME="$sdk" python3 -m edgernn.targets.gap8.sdk
    fi
done
python3 -m pytest -q -ra -n "${EDGERNN_TEST_WORKERS:-auto}" --dist worksteal --durations=25 tests "$@"
