"""GAP8's int8 depthwise 3x3 on its planes path, in GVSOC: a whole quad of channels on each of the 8 cores, rows of a
multiple of 4 pixels (the planes filled 4 pixels a turn by a 4x4 byte transpose), two output rows a turn (even and
odd numbers of rows and columns, partial quads), the requantization from 16-bit halves with and without a ReLU's
clamp, and stride 2; before it, a 3x3 CONV_2D over the one-channel frame (the stem kernel, conv_stem_s8: its
hardware loop of pixel pairs). The model has no recurrent layer, so that every byte of the last convolution is an
output held to the interpreter's (a cell after it can saturate and hide a wrong byte). A second model's 3x3 stem
reads a 40x200 frame from L1 in the unfused convolution's DMA bands, under the cluster master's deepest call chain
(its stack: edgernn_conv.c's EDGERNN_STEM_NOINLINE). The loops' shapes are held to the chip's hardware-loop rules
by the build's check (edgernn/targets/gap8/hwloop_check.py) and tests/backend/test_conv_hwloop.py."""

from __future__ import annotations

import pytest

from conftest import require_gap_sdk

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

# (the frame's height, width and channels; the stack's channels): 8x8 takes the two-row loop over every row pair of
# every channel (dw_rows2_workers); 7 rows, an odd out_h, take it through dw_halves_channel_rows, its last row by the
# single-row loop; 7 columns, an odd out_w, take it for the first 6 and the last column in C; 30 channels split one
# by one, partial quads (3 or 4 channels a worker, the planes filled in C)
CASES = [((8, 8, 1), 32), ((7, 8, 1), 32), ((8, 7, 1), 32), ((8, 8, 1), 30)]


def _case_id(value) -> str:
    return "x".join(map(str, value)) if isinstance(value, tuple) else f"{value}ch"


@pytest.mark.parametrize("frame,channels", CASES, ids=_case_id)
def test_depthwise_planes_validate_byte_exact(tmp_path, frame, channels):
    require_gap_sdk()
    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import depthwise_stack, moving_blobs
    from edgernn.validate.run import validate

    gap_sdk.build_gvsoc()
    path = tmp_path / "depthwise_stack.keras"
    depthwise_stack(*frame[:2], channels=channels).save(path)
    result = build_model(str(path), tmp_path / "out", board="gvsoc_gap8", quant="int8",
                         calib=moving_blobs(4, 20, *frame, seed=1))
    assert "DEPTHWISE_CONV_2D" in result["manifest"]["ops"]
    report = validate(tmp_path / "out", data=moving_blobs(1, 12, *frame, seed=5))
    ref = report["reference"]
    assert ref["mismatches"] == 0, ref
    assert report["pass"] and report["steps"] >= 12
    assert (report["device"]["workers"], report["device"]["offloaded"]) == (8, True)


STEM_BANDS_FRAME = (40, 200, 1)


def test_stem_in_dma_bands_validates_byte_exact(tmp_path):
    """A 3x3 stride-2 stem of 32 channels over a 40x200 frame, then a max pool and Dense(2): the convolution's
    output (64,000 bytes) is in L2, so it runs in DMA bands whose input tile the stem reads in place. With its row
    helpers inlined the stem's frames overflowed the master's 2 KiB stack there, and the step never returned."""
    require_gap_sdk()
    import keras

    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import moving_blobs
    from edgernn.validate.run import validate

    gap_sdk.build_gvsoc()
    keras.utils.set_random_seed(0)
    L = keras.layers
    x = keras.Input(STEM_BANDS_FRAME)
    z = L.MaxPooling2D(3, strides=2, padding="same")(L.Conv2D(32, 3, strides=2, padding="same")(x))
    path = tmp_path / "stem_bands.keras"
    keras.Model(x, L.Dense(2)(L.Flatten()(z))).save(path)
    result = build_model(str(path), tmp_path / "out", board="gvsoc_gap8", quant="int8",
                         calib=moving_blobs(2, 4, *STEM_BANDS_FRAME, seed=1))
    assert "edgernn_dma_conv_s8" in [p["kernel"] for p in result["manifest"]["placement"]["dma"]]
    report = validate(tmp_path / "out", data=moving_blobs(1, 3, *STEM_BANDS_FRAME, seed=3))
    ref = report["reference"]
    assert ref["mismatches"] == 0, ref
    assert report["pass"] and report["steps"] == 3
