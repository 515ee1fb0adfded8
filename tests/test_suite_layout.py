"""The suite's own layout: rules that keep a test from vanishing or colliding.

- No two test modules share a basename: the test folders have no ``__init__.py``, so pytest imports each module by
  its basename from its rootdir, and a second ``test_x.py`` elsewhere fails to import, or shadows the first.
- No test module shares a basename with a helper of ``tests/support`` (on the path as top-level modules).
- Every skip goes through the gate of ``tests/conftest.py`` (``require_tools``, ``require_module``,
  ``tool_unavailable``, the ``toolchain``/``qemu`` markers), so that ``EDGERNN_REQUIRE_TOOLCHAINS=1`` (CI) turns each
  missing tool into a failure: a test module calls ``pytest.skip`` nowhere itself.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.parts)


def test_no_two_test_modules_share_a_basename():
    counts = Counter(p.name for p in _test_modules())
    assert [name for name, n in counts.items() if n > 1] == []


def test_no_test_module_is_named_like_a_support_module():
    support = {p.name for p in (TESTS / "support").glob("*.py")}
    assert [p for p in _test_modules() if p.name in support] == []


def test_every_skip_goes_through_the_gate():
    direct = re.compile(r"\bpytest\.skip\(|@pytest\.mark\.skip\b|\bpytest\.importorskip\(")
    found = [f"{p.relative_to(TESTS)}:{n}" for p in _test_modules()
             for n, line in enumerate(p.read_text().splitlines(), 1) if direct.search(line)]
    assert found == [], "call conftest.tool_unavailable (or require_tools / require_module) instead"
