"""The package's layering (scripts/layers.py): no module imports one of a later stage, counting the imports made
inside functions, and the check finds such an import where there is one."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _layers():
    spec = importlib.util.spec_from_file_location("edgernn_layers", ROOT / "scripts" / "layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plant(root: Path, module: str, line: str) -> None:
    """A copy of the package under root with ``line`` in a new module (inside a function when indented)."""
    shutil.copytree(ROOT / "edgernn", root / "edgernn", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "edgernn" / module).write_text(f"def f():\n{line}" if line.startswith(" ") else line)


def test_no_module_imports_a_later_stage():
    _, _, up = _layers().layer_imports(ROOT)
    assert up == []


def test_no_stage_imports_a_family_room():
    layers = _layers()
    assert layers.family_rooms(ROOT) == ["edgernn.targets.gap8", "edgernn.targets.native", "edgernn.targets.stm32"]
    assert layers.family_reaches(ROOT) == []


@pytest.mark.parametrize("module, line, found", [
    ("cli/planted.py", "    from edgernn.targets.gap8 import sdk\n", True),
    ("validate/planted.py", "from edgernn.targets.native.adapter import NativeAdapter\n", True),
    ("pipeline/planted.py", "import edgernn.targets.gap8.gvsoc\n", True),
    ("cli/planted.py", "from edgernn.targets.device import adapter_for\n", False),
    ("targets/planted.py", "from edgernn.targets.gap8 import sdk\n", False),
])
def test_an_import_of_a_family_room_is_found(tmp_path, module, line, found):
    _plant(tmp_path, module, line)
    reaches = _layers().family_reaches(tmp_path)
    assert [r.split(":")[0] for r in reaches] == ([f"edgernn/{module}"] if found else [])


@pytest.mark.parametrize("module, line, back_up", [
    ("tflite/planted.py", "    from edgernn.validate.compare import ErrorSums\n", True),
    ("backend/planted.py", "from edgernn.pipeline import convert\n", True),
    ("keras/planted.py", "import edgernn.cli.main\n", True),
    ("backend/planted.py", "from edgernn.link import protocol\n", False),
    ("validate/planted.py", "from edgernn.metrics import ErrorSums\n", False),
    ("targets/planted.py", "from edgernn.backend import firmware\n", False),
    ("pipeline/planted.py", "    from edgernn.testing import zoo\n", True),
    ("testing/planted.py", "from edgernn.pipeline.build import build_model\n", False),
])
def test_an_import_back_up_is_found(tmp_path, module, line, back_up):
    _plant(tmp_path, module, line)
    _, _, up = _layers().layer_imports(tmp_path)
    assert [u.split(":")[0] for u in up] == ([f"edgernn/{module}"] if back_up else [])
