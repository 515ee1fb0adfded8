"""The C files copied into firmware as they are hold the layout facts of edgernn/backend/layout.py."""

from __future__ import annotations

import re

import pytest

from edgernn.backend import layout
from edgernn.resources import templates_dir


def _define(path: str, name: str) -> str:
    text = (templates_dir() / path).read_text()
    m = re.search(rf"^#define {name}(?=\s)(.*)$", text, re.M)
    assert m, f"{path} has no #define {name}"
    return m.group(1).strip()


@pytest.mark.parametrize("path, name, value", [
    ("kernels/edgernn_conv.c", "EDGERNN_CONV_TEAM_SLOTS", str(layout.TEAM_SLOTS)),
    ("targets/gap8/hal/dma/edgernn_conv_dma.c", "DMA_TEAM_SLOTS", str(layout.TEAM_SLOTS)),
    ("kernels/edgernn_conv.c", "EDGERNN_CONV_SLOT_PATCHES", str(layout.SLOT_PATCHES)),
    ("kernels/edgernn_l3_fc.c", "L3_FC_SLICES", str(layout.TEAM_SLOTS)),
    ("kernels/edgernn_conv.c", "EDGERNN_DW_PLANES", str(layout.DW_PLANES)),
    ("kernels/edgernn_conv.c", "DW_PLANE_ROW(pw)", "(((pw) + 3 + 3) & ~3)"),
    ("kernels/edgernn_conv.c", "EDGERNN_STEM_CHUNK_ROWS", str(layout.STEM_CHUNK_ROWS)),
    ("kernels/edgernn_conv.c", "EDGERNN_STEM_ROWS_MAX", str(layout.STEM_ROWS_MAX)),
    ("kernels/edgernn_conv.c", "DW_MAX_KH", str(layout.STEM_MAX_KH)),
])
def test_copied_c_holds_the_layout_facts(path, name, value):
    assert _define(path, re.escape(name)) == value


@pytest.mark.parametrize("n, want", [(0, 0), (1, layout.ALIGN), (layout.ALIGN, layout.ALIGN),
                                     (layout.ALIGN + 1, 2 * layout.ALIGN)])
def test_align_rounds_up(n, want):
    assert layout.align(n) == want
