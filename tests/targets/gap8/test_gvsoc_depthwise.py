"""GAP8's int8 depthwise 3x3 on its planes path, in GVSOC: a whole quad of channels on each of the 8 cores, rows of
a multiple of 4 pixels (the planes filled 4 pixels a turn by a 4x4 byte transpose), the requantization from
16-bit halves with and without a ReLU's clamp, and stride 2; before it, a 3x3 CONV_2D over the one-channel frame
(the stem kernel, conv_stem_s8: its hardware loop of pixel pairs). The model has no recurrent layer, so that every
byte of the last convolution is an output held to the interpreter's (a cell after it can saturate and hide a
wrong byte). The loops' shapes are held to the chip's hardware-loop rules by the build's check
(edgernn/targets/gap8/hwloop_check.py) and tests/backend/test_conv_hwloop.py."""

from __future__ import annotations

import pytest

from conftest import require_gap_sdk

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

FRAME = (8, 8, 1)


def test_depthwise_planes_validate_byte_exact(tmp_path):
    require_gap_sdk()
    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import depthwise_stack, moving_blobs
    from edgernn.validate.run import validate

    gap_sdk.build_gvsoc()
    path = tmp_path / "depthwise_stack.keras"
    depthwise_stack(*FRAME[:2]).save(path)
    result = build_model(str(path), tmp_path / "out", board="gvsoc_gap8", quant="int8",
                         calib=moving_blobs(4, 20, *FRAME, seed=1))
    assert "DEPTHWISE_CONV_2D" in result["manifest"]["ops"]
    report = validate(tmp_path / "out", data=moving_blobs(1, 12, *FRAME, seed=5))
    ref = report["reference"]
    assert ref["mismatches"] == 0, ref
    assert report["pass"] and report["steps"] >= 12
    assert (report["device"]["workers"], report["device"]["offloaded"]) == (8, True)
