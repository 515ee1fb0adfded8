"""A PULP-Dronet-class CNN on GAP8 at PULP-Dronet's own widths: frames_zoo.dronet_class (200x200x1 frame, 5x5
stride-2 stem of 32 channels and a max-pool, three ResNet-8 residual blocks of 32, 64 and 128 channels joined by Add,
Dense(2); 0.32 M parameters, 41 M MACs), a stateless per-frame model with branches, built for gvsoc_gap8 and
validated frame by frame in GVSOC: every output byte equal to the interpreter's, no state.

It fits the AI-deck because the stem's convolution is fused with its max-pool (its 100x100x32 output, 320 KB, never
exists: bands of pooled rows through L1, edgernn/backend/conv_pool.py) and the largest filters (the last block's,
221 KB, and block 2's second, too large for the L1 tiles beside a band) stream from L3 in chunks of output channels
(edgernn/backend/streaming.py)."""

from __future__ import annotations

import json

import pytest

from conftest import require_gap_sdk, require_tools

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "gvsoc_gap8"
FRAMES = 2   # each some 20 s of host time over GVSOC's UART (40,000 bytes a frame), and the model's own


@pytest.fixture(scope="module")
def dronet_built(tmp_path_factory):
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import DRONET_FRAME, dronet_class, moving_blobs

    gap_sdk.build_gvsoc()
    folder = tmp_path_factory.mktemp("dronet")
    path = folder / "dronet_class.keras"
    model = dronet_class()
    assert 300_000 < model.count_params() < 340_000
    model.save(path)
    build_model(str(path), folder / "out", board=BOARD, quant="int8", calib=moving_blobs(2, 4, *DRONET_FRAME, seed=1))
    return folder / "out"


def test_pulp_dronet_validates_frame_by_frame_in_gvsoc(dronet_built, tmp_path):
    from edgernn.testing.frames_zoo import DRONET_FRAME, moving_blobs
    from edgernn.validate.run import validate

    manifest = json.loads((dronet_built / "manifest.json").read_text())
    assert manifest["states"] == [] and {"ADD", "CONV_2D", "MAX_POOL_2D"} <= set(manifest["ops"])
    assert manifest["inputs"][0]["shape"] == [1, *DRONET_FRAME]
    placement = manifest["placement"]
    # the stem and its pool fused, in bands through L1; the last block's filters in L3
    assert "edgernn_dma_conv_max_pool_s8" in [p["kernel"] for p in placement["dma"]]
    assert manifest["arena_bytes"] < 100 * 100 * 32
    assert placement["streamed"]["memory"] == "l3" and placement["streamed"]["bytes"] >= 3 * 3 * 64 * 128
    report = validate(dronet_built, data=moving_blobs(1, FRAMES, *DRONET_FRAME, seed=3),
                      json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"] and report["steps"] == FRAMES
    assert (report["device"]["workers"], report["device"]["offloaded"]) == (8, True)
    assert report["device"]["l3_bytes_per_step"] == placement["streamed"]["bytes"]


@pytest.mark.parametrize("form,quant", [("add", "int8"), ("concatenate", "int16"), ("timedistributed", "float32")])
def test_a_small_stateless_cnn_validates_in_gvsoc(form, quant, tmp_path):
    """frames_zoo.frame_cnn's residual, concatenating and TimeDistributed forms on 12x12x1 frames, on 8 cores."""
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import frame_cnn, moving_blobs
    from edgernn.validate.run import validate

    gap_sdk.build_gvsoc()
    path = tmp_path / "frame_cnn.keras"
    frame_cnn(12, 12, 1, form=form).save(path)
    out = tmp_path / "out"
    build_model(str(path), out, board=BOARD, quant=quant, calib=moving_blobs(4, 6, 12, 12, 1, seed=1))
    report = validate(out, data=moving_blobs(2, 4, 12, 12, 1, seed=3), json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"] and (report["steps"], report["sequences"]) == (4, 2)
