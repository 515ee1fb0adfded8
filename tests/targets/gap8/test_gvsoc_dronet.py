"""A PULP-Dronet-class CNN on GAP8: frames_zoo.dronet_class (200x200x1 frame, 5x5 stride-2 stem and max-pool,
three ResNet-8 residual blocks joined by Add, Dense(2)), a stateless per-frame model with branches, built for
gvsoc_gap8 and validated frame by frame in GVSOC: every output byte equal to the interpreter's, no state.

At PULP-Dronet's own widths (0.32 M parameters) the model is refused for ai_deck with the placement table: the stem's
100x100x32 int8 output (320 KB) and the conv weights do not fit L2 together, and edgernn streams only Dense and LSTM
weights from L3. The test builds it at a quarter of the widths (DRONET_WIDTHS_L2, 82 k parameters), which fits."""

from __future__ import annotations

import json

import pytest

from conftest import require_gap_sdk, require_tools

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "gvsoc_gap8"
FRAMES = 2   # some 20 s of host time each over GVSOC's UART (40,000 bytes a frame)


@pytest.fixture(scope="module")
def dronet_built(tmp_path_factory):
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import DRONET_FRAME, DRONET_WIDTHS_L2, dronet_class, moving_blobs

    gap_sdk.build_gvsoc()
    folder = tmp_path_factory.mktemp("dronet")
    path = folder / "dronet_class.keras"
    dronet_class(DRONET_WIDTHS_L2).save(path)
    build_model(str(path), folder / "out", board=BOARD, quant="int8", calib=moving_blobs(2, 4, *DRONET_FRAME, seed=1))
    return folder / "out"


def test_a_dronet_class_cnn_validates_frame_by_frame_in_gvsoc(dronet_built, tmp_path):
    from edgernn.testing.frames_zoo import DRONET_FRAME, moving_blobs
    from edgernn.validate.run import validate

    manifest = json.loads((dronet_built / "manifest.json").read_text())
    assert manifest["states"] == [] and {"ADD", "CONV_2D", "MAX_POOL_2D"} <= set(manifest["ops"])
    assert manifest["inputs"][0]["shape"] == [1, *DRONET_FRAME]
    report = validate(dronet_built, data=moving_blobs(1, FRAMES, *DRONET_FRAME, seed=3),
                      json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"] and report["steps"] == FRAMES
    assert (report["device"]["workers"], report["device"]["offloaded"]) == (8, True)


def test_pulp_dronet_widths_are_refused_for_the_ai_deck_with_the_placement(tmp_path):
    """The full widths: 0.32 M parameters; the placement table says what overflows L2, in the error."""
    from edgernn.backend import generate_firmware
    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.convert import convert
    from edgernn.targets.board import load_board
    from edgernn.testing.frames_zoo import DRONET_FRAME, dronet_class, moving_blobs

    model = dronet_class()
    assert 300_000 < model.count_params() < 340_000
    path = tmp_path / "dronet_full.keras"
    model.save(path)
    out = tmp_path / "out"
    convert(str(path), out, quant="int8", calib=moving_blobs(1, 2, *DRONET_FRAME, seed=1), board="ai_deck")
    with pytest.raises(EdgeRNNError, match=r"does not fit board ai_deck: over budget in l2"):
        generate_firmware(out, load_board("ai_deck"))


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
