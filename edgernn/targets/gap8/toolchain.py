"""Which compiler builds GAP8 code here: GreenWaves' own (gcc 7.1 with Xpulp), where the SDK's
configuration would find it or on PATH; otherwise edgernn uses Debian's riscv64-unknown-elf-gcc
(through the wrapper of ``gap_sdk.debian_toolchain`` for SDK projects). A leaf: the board adapters, the
GVSOC self-test and the SDK build all ask it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from edgernn.resources import templates_dir


def gap_compiler() -> Path | None:
    """GreenWaves' own compiler where the SDK's configuration would find it, or on PATH."""
    base = os.environ.get("GAP_RISCV_GCC_TOOLCHAIN")
    if not base and os.environ.get("GAP_RISCV_GCC_TOOLCHAIN_BASE"):
        base = os.environ["GAP_RISCV_GCC_TOOLCHAIN_BASE"] + "/1.8"
    candidates = [Path(base or "/usr/lib/gap_riscv_toolchain") / "bin" / "riscv32-unknown-elf-gcc"]
    on_path = shutil.which("riscv32-unknown-elf-gcc")
    if on_path and Path(on_path).resolve().parent != (templates_dir() / "targets" / "gap8" / "sdk" / "toolchain" / "bin").resolve():
        candidates.append(Path(on_path))
    return next((c for c in candidates if os.access(c, os.X_OK)), None)
