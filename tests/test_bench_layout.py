"""The benches stand on their own: each imports edgernn and edgernn.testing as installed, never edits sys.path, and
answers --help without running, from any folder. edgernn.testing itself imports no TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHES = sorted((ROOT / "bench").glob("*.py"))


def test_no_bench_or_script_edits_sys_path():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in [*BENCHES, *sorted((ROOT / "scripts").glob("*.py"))]
             for n, line in enumerate(p.read_text().splitlines(), 1) if "sys.path" in line]
    assert found == []


@pytest.mark.parametrize("bench", BENCHES, ids=[p.name for p in BENCHES])
def test_every_bench_answers_help(tmp_path, bench):
    # this checkout's edgernn, as pytest imports it, whichever checkout is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(bench), "--help"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:")


def test_importing_edgernn_testing_imports_no_tensorflow():
    code = ("import sys, edgernn.testing.bench, edgernn.testing.backend_harness, edgernn.testing.conv_steps, "
            "edgernn.testing.frames_zoo, edgernn.testing.mixed_models, edgernn.testing.toy_build, "
            "edgernn.testing.trained, edgernn.testing.zoo; "
            "print(sorted(m for m in ('tensorflow', 'keras', 'tf_keras', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip() == "[]"
