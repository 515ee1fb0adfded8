"""GAP8 with the arena in L2: the team's CONV_2D, DEPTHWISE_CONV_2D and MAX_POOL_2D fed in bands by the
cluster DMA through L1 tiles
(edgernn/backend/tiling.py, templates/targets/gap8/hal/dma/edgernn_conv_dma.c), validated in GVSOC: every
output and state byte equal to the interpreter's."""

from __future__ import annotations

import pytest

from conftest import require_gap_sdk
from edgernn.testing.frames_zoo import L2_FRAME, frame_cfc_l2, moving_blobs

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

FRAME = L2_FRAME
STEPS = 3


def test_l2_arena_convolutions_by_dma_validate_byte_exact(tmp_path):
    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.validate.run import validate

    require_gap_sdk()
    gap_sdk.build_gvsoc()
    path = tmp_path / "frame_cfc_l2.keras"
    frame_cfc_l2().save(path)
    out = tmp_path / "out"
    result = build_model(str(path), out, board="gvsoc_gap8", quant="int8", calib=moving_blobs(4, 12, *FRAME, seed=1))
    placement = result["manifest"]["placement"]
    assert placement["items"]["arena"]["memory"] == "l2"
    assert placement["items"]["dma_tiles"]["memory"] == "l1"
    assert placement["items"]["weights"]["memory"] == "l2"
    # both convolutions, the depthwise one and the pool banded, the first in several bands (double-buffered),
    # the filters copied in
    assert [p["kernel"] for p in placement["dma"]] == ["edgernn_dma_conv_s8", "edgernn_dma_depthwise_conv_s8",
                                                       "edgernn_dma_max_pool_s8", "edgernn_dma_conv_s8"]
    assert max(p["bands"] for p in placement["dma"]) > 1
    assert all(p["weights_in_tiles"] for p in placement["dma"] if "pool" not in p["kernel"])
    model_c = (out / "firmware" / "model.c").read_text()
    for fn in ("conv_s8", "depthwise_conv_s8", "max_pool_s8"):
        assert f"edgernn_dma_{fn}(edgernn_dma_tiles" in model_c

    report = validate(out, data=moving_blobs(1, STEPS, *FRAME, seed=5))
    ref = report["reference"]
    assert report["steps"] >= STEPS and report["board"] == "gvsoc_gap8"
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"]
    assert (report["device"]["workers"], report["device"]["offloaded"]) == (8, True)
