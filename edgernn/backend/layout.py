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


# the planes a worker's slot holds in the int8 depthwise convolution by planes (edgernn_conv.c's
# EDGERNN_DW_PLANES): one channel quad
DW_PLANES = 4


def depthwise_planes_bytes(g: dict) -> int:
    """The bytes of the team's depthwise planes (edgernn_conv.c): TEAM_SLOTS slots of DW_PLANES planes, each
    the padded frame's rows of its columns and 3 more, rounded up to 4 (DW_PLANE_ROW)."""
    rows = (g["out_h"] - 1) * g["stride_h"] + (g["k_h"] - 1) * g["dil_h"] + 1
    cols = (g["out_w"] - 1) * g["stride_w"] + (g["k_w"] - 1) * g["dil_w"] + 1
    return TEAM_SLOTS * DW_PLANES * rows * ((cols + 6) & ~3)


# a one-input-channel int8 CONV_2D's rows copied into scratch (edgernn_conv.c's conv_stem_slot): each worker's slot
# holds the input rows of STEM_CHUNK_ROWS output rows (EDGERNN_STEM_CHUNK_ROWS), the slots at most STEM_ROWS_MAX
# bytes (EDGERNN_STEM_ROWS_MAX), else the frame is read in place; the filters it takes: at most STEM_MAX_KH rows
# (DW_MAX_KH) of at most 3 taps, stride 1 or 2 and dilation 1 along x
STEM_CHUNK_ROWS = 2
STEM_ROWS_MAX = 4096
STEM_MAX_KH = 8


def stem_rows_bytes(g: dict) -> int:
    """The bytes of the one-input-channel convolution's row slots (edgernn_conv.c's conv_stem_slot, times
    TEAM_SLOTS), 0 where it reads the frame in place or does not apply. The widths alone fix them, so a band of
    the frame (the fused pool's) needs no more than the whole."""
    if not (g["in_c"] == 1 and g["k_w"] <= 3 and g["dil_w"] == 1 and g["stride_w"] in (1, 2)
            and g["k_h"] <= STEM_MAX_KH):
        return 0
    rows = (STEM_CHUNK_ROWS - 1) * g["stride_h"] + (g["k_h"] - 1) * g["dil_h"] + 1
    cols = (g["out_w"] - 1) * g["stride_w"] + g["k_w"]
    total = TEAM_SLOTS * rows * ((cols + 6) & ~3)    # DW_PLANE_ROW: the padded columns read and 3 more
    return total if total <= STEM_ROWS_MAX else 0


def padded_frame_elems(g: dict) -> int:
    """The input frame with its padding, which the integer depthwise kernels walk (edgernn_conv.c)."""
    rows = (g["out_h"] - 1) * g["stride_h"] + (g["k_h"] - 1) * g["dil_h"] + 1
    cols = (g["out_w"] - 1) * g["stride_w"] + (g["k_w"] - 1) * g["dil_w"] + 1
    return rows * cols * g["in_c"]


def depthwise_s8_scratch(g: dict) -> int:
    """The int8 depthwise kernels' scratch: the padded frame, or the team's channel planes, the larger."""
    return max(padded_frame_elems(g), depthwise_planes_bytes(g))
