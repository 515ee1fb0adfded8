"""Front ends end to end: a TimeDistributed CNN feeding a CfC on an AutoNCP wiring, and a causal dilated
Conv1D stack feeding a GRU, built for each emulated board and validated over its serial link: every output
and state byte equal to the interpreter's."""

from __future__ import annotations

import pytest

from conftest import require_gap_sdk

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

FRAME = (12, 12, 1)
TCN_FEATURES = 3
# board: steps validated (GVSOC's UART carries a frame a step at 115200 baud)
BOARDS = {"host": 400, "qemu_riscv32": 200, "gvsoc_gap8": 40}


def _model_and_data(kind: str, steps: int, seed: int):
    from edgernn.testing.frames_zoo import frame_cfc, moving_blobs, tcn_gru
    from edgernn.testing.zoo import trajectories

    if kind == "frame_cfc":
        return frame_cfc(*FRAME), moving_blobs(1, steps, *FRAME, seed=seed)
    return tcn_gru(TCN_FEATURES), trajectories(1, steps, TCN_FEATURES, seed)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(kind, board, quant)`` -> the OUT folder, built once per module."""
    from edgernn.testing.frames_zoo import moving_blobs
    from edgernn.testing.zoo import trajectories

    from edgernn.pipeline.build import build_model

    made = {}

    def get(kind: str, board: str, quant: str):
        key = (kind, board, quant)
        if key not in made:
            if board == "gvsoc_gap8":
                require_gap_sdk()
                from edgernn.targets.gap8 import sdk as gap_sdk

                gap_sdk.build_gvsoc()
            folder = tmp_path_factory.mktemp(f"{kind}_{board}_{quant}")
            model, _ = _model_and_data(kind, 1, 0)
            path = folder / f"{kind}.keras"
            model.save(path)
            calib = moving_blobs(6, 30, *FRAME, seed=1) if kind == "frame_cfc" else trajectories(8, 80, TCN_FEATURES, 1)
            result = build_model(str(path), folder / "out", board=board, quant=quant, calib=calib)
            assert result["manifest"]["board"] == board
            made[key] = folder / "out"
        return made[key]

    return get


CASES = [(kind, board, "int8") for kind in ("frame_cfc", "tcn_gru") for board in BOARDS]
CASES += [("frame_cfc", "host", "int16"), ("tcn_gru", "host", "int16"), ("frame_cfc", "host", "float32")]


@pytest.mark.parametrize("kind,board,quant", CASES, ids=["-".join(c) for c in CASES])
def test_front_end_validates_byte_exact(built, kind, board, quant):
    from edgernn.validate.run import validate

    out = built(kind, board, quant)
    _, data = _model_and_data(kind, BOARDS[board], 5)
    report = validate(out, data=data)
    ref = report["reference"]
    assert report["steps"] >= BOARDS[board] and report["board"] == board
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"]
    if board == "gvsoc_gap8":
        assert (report["device"]["workers"], report["device"]["offloaded"]) == (8, True)
