#!/usr/bin/env bash
# Build GVSOC (GreenWaves' GAP8 simulator) from $GAP_SDK_HOME into edgernn's cache, so the GVSOC tests
# and the gvsoc_gap8 board find it built. Needs Debian's build-essential cmake scons rsync and the
# Python modules pyelftools argcomplete six. Prints the install folder; a second run is a cache hit.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m edgernn.targets.gap8.sdk "$@"
