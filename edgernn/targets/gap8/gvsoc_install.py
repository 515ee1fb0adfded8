"""A GVSOC build in edgernn's cache, as the code that runs it sees one: its records and its environment.

``gap_sdk`` writes these (it builds GVSOC), ``gvsoc`` reads them (it runs ELFs in it), ``gvsoc_check`` tests
them: this leaf holds what all three must agree on, so that none of them imports another to know it.

An entry ``<cache>/gap_sdk/<key>/`` holds the SDK copy (``sdk/``, GVSOC installed in
``sdk/install/workstation``) and, beside it, ``BUILT`` once the build finished, then ``MARKER`` once the
UART self-test passed (both JSON, with the environment ``configs/ai_deck.sh`` sets).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

# Part of the cache key: a change to how edgernn copies, builds, checks or prunes the SDK rebuilds it.
LAYOUT_VERSION = "gvsoc-build-2"
GVSOC_TARGET = "ai_deck"                # gapy's target: the AI-deck board around GAP8 rev. 1

MARKER = "gvsoc.json"                   # beside sdk/: written last, once the UART self-test passed
BUILT = "gvsoc-built.json"              # beside sdk/: the build finished; its self-test has not passed (yet)

# Variables of the caller's environment that would change what make does.
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "BUILD_DIR", "INSTALL_DIR",
                  "TARGET_INSTALL_DIR")
PATH_VARIABLES = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "PULP_CONFIGS_PATH")

Log = Callable[[str], None] | None


def say(log: Log, message: str) -> None:
    if log is not None:
        log(message)


def read_json(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_marker(key_dir: Path, built: bool = False) -> dict | None:
    """The marker of a finished, self-tested build (``built``: the record of a finished build whose
    self-test has not passed), or None."""
    marker = read_json(Path(key_dir) / (BUILT if built else MARKER))
    return marker if marker.get("layout") == LAYOUT_VERSION else None


def environment(sourced: dict) -> dict[str, str]:
    """The caller's environment with what ``configs/ai_deck.sh`` sets (recorded as ``sourced``: plain
    variables, and entries put before or after the path-like ones), make's own variables dropped."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    env.update(sourced["set"])
    for name in PATH_VARIABLES:
        head, tail = sourced["prepend"].get(name, []), sourced["append"].get(name, [])
        rest = [p for p in env.get(name, "").split(":") if p and p not in head and p not in tail]
        env[name] = ":".join(head + rest + tail)
    return env
