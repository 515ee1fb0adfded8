"""Models with no recurrent layer, end to end: small per-frame CNNs (Keras Sequential, functional, under
TimeDistributed, with an Add residual block or a Concatenate of two branches, and a torch export to ONNX with both)
become stateless step models (no state inputs or outputs, 0 state bytes), built for host and qemu_riscv32 at each
quantization and validated frame by frame over the serial link: every output byte equal to the interpreter's. And a
recurrent model whose per-frame front end branches (frames_zoo.frame_res_gru): every output and state byte."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import require_module

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

FRAME = (12, 12, 1)
FORMS = ("sequential", "functional", "timedistributed", "add", "concatenate", "onnx")
QUANTS = ("int8", "int16", "float32")
BOARDS = ("host", "qemu_riscv32")
SEQUENCES, STEPS = 2, 3


def frames(sequences: int, steps: int, seed: int):
    from edgernn.testing.frames_zoo import moving_blobs

    return moving_blobs(sequences, steps, *FRAME, seed=seed)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(form, quant, board)`` -> OUT: each model converted once per quantization, its firmware generated
    and compiled per board."""
    from edgernn.backend import generate_firmware
    from edgernn.outdir import read_manifest
    from edgernn.pipeline.convert import convert
    from edgernn.targets.board import load_board
    from edgernn.testing.frames_zoo import frame_cnn, frame_cnn_onnx, frame_res_gru

    models, converted, made = {}, {}, {}

    def model_path(form: str):
        if form not in models:
            folder = tmp_path_factory.mktemp(form)
            if form == "res_gru":
                models[form] = folder / "frame_res_gru.keras"
                frame_res_gru(*FRAME).save(models[form])
            elif form == "onnx":
                require_module("torch")
                models[form] = frame_cnn_onnx(folder / "frame_cnn.onnx", *FRAME[:2])
            else:
                models[form] = folder / "frame_cnn.keras"
                frame_cnn(*FRAME, form=form).save(models[form])
        return models[form]

    def get(form: str, quant: str, board: str):
        if (form, quant) not in converted:
            out = tmp_path_factory.mktemp(f"{form}_{quant}") / "out"
            convert(str(model_path(form)), out, quant=quant, calib=frames(4, 6, seed=1))
            converted[form, quant] = out
        if (form, quant, board) not in made:
            out = tmp_path_factory.mktemp(f"{form}_{quant}_{board}") / "out"
            shutil.copytree(converted[form, quant], out)
            manifest = read_manifest(out)   # the conversion is the board's own (convert(..., board=) writes it)
            manifest.board = board
            manifest.write(out)
            generate_firmware(out, load_board(board))
            made[form, quant, board] = out
        return made[form, quant, board]

    return get


CASES = [(form, quant, board) for form in FORMS for quant in QUANTS for board in BOARDS]


@pytest.mark.parametrize("form,quant,board", [
    pytest.param(*case, id="-".join(case), marks=[pytest.mark.qemu] if case[2] == "qemu_riscv32" else [])
    for case in CASES])
def test_a_stateless_frame_model_validates_byte_exact(built, form, quant, board, tmp_path):
    from edgernn.validate.run import validate

    out = built(form, quant, board)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["states"] == [] and manifest["state_feedback"] == {}
    assert manifest["inputs"][0]["shape"] == [1, *FRAME]
    if form in ("add", "concatenate", "onnx"):
        assert {"ADD", "CONCATENATION"} & set(manifest["ops"])
    report = validate(out, data=frames(SEQUENCES, STEPS, seed=3), json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert (report["steps"], report["sequences"], report["board"]) == (STEPS, SEQUENCES, board)
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"]


FRONT_CASES = [("int8", "host"), ("int16", "host"), ("float32", "host"), ("int8", "qemu_riscv32")]


@pytest.mark.parametrize("quant,board", [
    pytest.param(*case, id="-".join(case), marks=[pytest.mark.qemu] if case[1] == "qemu_riscv32" else [])
    for case in FRONT_CASES])
def test_a_recurrent_model_whose_front_end_branches_validates_byte_exact(built, quant, board, tmp_path):
    from edgernn.validate.run import validate

    out = built("res_gru", quant, board)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["size"] for s in manifest["states"]] == [6]
    assert {"ADD", "CONCATENATION"} <= set(manifest["ops"])
    report = validate(out, data=frames(SEQUENCES, 2 * STEPS, seed=3), json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"] and report["steps"] == 2 * STEPS
