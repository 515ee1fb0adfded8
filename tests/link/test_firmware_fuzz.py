"""A short libFuzzer run of the device-side frame parser under ASan and UBSan (the long run is
tests/fuzz/run_fuzz.sh, one million executions)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import require_tools, tool_unavailable

HERE = Path(__file__).resolve().parents[1]


def test_frame_parser_survives_a_short_fuzz_run(tmp_path):
    require_tools("clang")
    env = {**os.environ, "FUZZ_WORK": str(tmp_path)}
    proc = subprocess.run(["sh", str(HERE / "fuzz" / "run_fuzz.sh"), "30000"], capture_output=True, text=True,
                          env=env)
    if "libclang_rt.fuzzer" in proc.stderr and "cannot find" in proc.stderr:
        tool_unavailable("clang has no libFuzzer runtime (scripts/setup.sh installs libclang-rt-dev)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Done 30000 runs" in proc.stdout
