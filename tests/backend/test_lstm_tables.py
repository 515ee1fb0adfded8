"""edgernn_lstm.c's lookup tables are what edgernn/backend/lstm_tables.py computes from the kernel's
arithmetic, entry for entry."""

from __future__ import annotations

import re

import pytest

from edgernn.backend import lstm_tables
from edgernn.resources import templates_dir


def _initializer(name: str) -> str:
    text = (templates_dir() / "kernels" / "edgernn_lstm.c").read_text()
    m = re.search(rf"static const \w+ {name}\[\d*\] = {{\n(.*?)\n}};", text, re.S)
    assert m, f"edgernn_lstm.c has no table {name}"
    return m.group(1)


@pytest.mark.parametrize("name", ["fx_exp_quarter_table", "fx_newton_high"])
def test_the_c_tables_are_the_generators(name):
    assert _initializer(name) == lstm_tables.render()[name]


def test_exp_table_is_decreasing_q15():
    table = lstm_tables.exp_table()
    assert len(table) == 2048 and all(0 < b <= a < 32768 for a, b in zip(table, table[1:]))
