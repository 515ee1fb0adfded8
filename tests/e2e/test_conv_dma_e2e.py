"""GAP8 with the arena in L2: the team's CONV_2D, DEPTHWISE_CONV_2D and MAX_POOL_2D fed in bands by the
cluster DMA through L1 tiles
(edgernn/backend/tiling.py, templates/hal/ai_deck/dma/edgernn_conv_dma.c), validated in GVSOC: every
output and state byte equal to the interpreter's."""

from __future__ import annotations

import pytest

from conftest import require_gap_sdk

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

# 60x60x1 frames (under the link's 4 KiB frames); a first conv of 10 channels at stride 1 makes the arena
# (two 36,000-byte activations alive at once) larger than L1's budget
FRAME = (60, 60, 1)
STEPS = 3


def frame_cfc_l2(dense: int = 40, seed: int = 0):
    """frames_zoo.frame_cfc's layers at a frame whose activations do not fit L1, with a second, strided
    CONV_2D that reads the arena (bands with a halo, padding at the frame's edges). Dense(40) over the
    1,800 features makes the weights (72 KB) too large for L1 too, so each convolution's filter is copied
    into its tiles by DMA; with Dense(8) they are all copied to L1 at init instead."""
    import keras
    import ncps.keras
    from ncps.wirings import AutoNCP

    keras.utils.set_random_seed(seed)
    L = keras.layers
    TD = L.TimeDistributed
    return keras.Sequential([
        keras.Input((None, *FRAME)),
        TD(L.Conv2D(10, 3, strides=1, padding="same", activation="relu")),
        TD(L.DepthwiseConv2D(3, padding="same")),
        TD(L.ReLU(max_value=6.0)),
        TD(L.MaxPooling2D(2)),
        TD(L.Conv2D(8, 3, strides=2, padding="same", activation="relu")),
        TD(L.Flatten()),
        L.Dense(dense, activation="tanh"),
        ncps.keras.CfC(AutoNCP(12, 2, seed=seed), return_sequences=True),
    ], name="frame_cfc_l2")


def test_l2_arena_convolutions_by_dma_validate_byte_exact(tmp_path):
    from edgernn.testing.frames_zoo import moving_blobs

    from edgernn.pipeline.build import build_model
    from edgernn.targets import gap_sdk
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
