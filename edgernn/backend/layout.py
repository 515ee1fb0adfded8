"""Layout facts that the memory plan, the placement, the tiling and the generated C share, each defined
once here: the templates take them from the render context, and tests/backend/test_layout.py holds the
C files that are copied as they are (edgernn_conv.c, the DMA source) to the same values."""

from __future__ import annotations

# every buffer the plan places (arena tensors, state slots, fast-memory copies, DMA tiles) starts on it
ALIGN = 8

# the team's workers that each get a patch slot in a convolution's scratch (edgernn_conv.c's
# EDGERNN_CONV_TEAM_SLOTS): GAP8's cluster has 8 cores
TEAM_SLOTS = 8

# the patches a worker's slot holds (edgernn_conv.c's EDGERNN_CONV_SLOT_PATCHES): the int8 team gathers a
# pair of output pixels' patches for its 4x2 blocking
SLOT_PATCHES = 2


def patch_slots_elems(n_in: int) -> int:
    """The elements of the team's patch slots of a convolution of n_in inputs a pixel: TEAM_SLOTS slots of
    SLOT_PATCHES patches, each rounded up to 4 elements."""
    return TEAM_SLOTS * SLOT_PATCHES * ((n_in + 3) // 4 * 4)


def align(n: int) -> int:
    """n rounded up to ALIGN."""
    return (n + ALIGN - 1) // ALIGN * ALIGN
