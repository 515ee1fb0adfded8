"""A mixed int8/int16 model validated on host, qemu_riscv32 and gvsoc_gap8 like any other build folder.

The folder is an int8 model built for the board, its step model then replaced by a mixed one
(edgernn/testing/mixed_models.py): a SimpleRNN with its state held in int16 at a scale that is no power of two
of the int8 one and the cell's TANH in int16 between two QUANTIZE seams, x and y int8 (every board); a
Dense-LSTM-Dense with both states in int16, every TANH and two FULLY_CONNECTEDs in 16x8 and x and y in int16
(host and qemu_riscv32). The firmware is
generated and built again, and ``validate`` runs it over the link: every output byte and every state
byte equal to LiteRT's, the int16 state packed in the link's STATE frames at its own width. On gvsoc_gap8
one cluster core with scalar dot products and the fabric controller alone give the 8-core SIMD build's bytes.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from edgernn.outdir import Manifest, read_manifest
from edgernn.testing import mixed_models as MM
from edgernn.testing import zoo
from conftest import require_gap_sdk, require_tools

STEPS = 200


def simplernn(seed: int = 0):
    keras = zoo._keras(seed)
    return keras.Sequential([keras.Input((None, 3)), keras.layers.SimpleRNN(9, return_sequences=True)],
                            name="mixed_simplernn")


def _simplernn_state_and_tanh(step: bytes, manifest: Manifest) -> bytes:
    state = manifest.states[0]
    return MM.tanh16(MM.state16(step, state["name"], state["scale"] / 130))


def _lstm_everything(step: bytes, manifest: Manifest) -> bytes:
    """Both states in int16, every TANH and the first two FULLY_CONNECTEDs in 16x8, x and y in int16."""
    for state in manifest.states:
        step = MM.state16(step, state["name"], state["scale"] / 130)
    step = MM.fc16(MM.tanh16(step), count=2)
    return MM.io16(step, manifest.inputs[0]["scale"] / 64, manifest.outputs[0]["scale"] / 64)


# kind: (Keras model, splice)
KINDS = {"simplernn": (simplernn, _simplernn_state_and_tanh), "lstm": (zoo.functional_lstm, _lstm_everything)}


def build_mixed(tmp_path, board: str, kind: str = "simplernn"):
    """OUT for ``board``: the int8 build, its step model made mixed, the firmware generated and built again."""
    from edgernn.pipeline.build import build_model
    from edgernn.targets.device import adapter_for

    make, splice = KINDS[kind]
    path = tmp_path / "m.keras"
    make().save(path)
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        build_model(str(path), out, board=board, quant="int8", mode="step", calib=zoo.trajectories(4, 60, 3, 1))
    manifest = read_manifest(out)
    MM.write_folder(out, splice((out / "step.tflite").read_bytes(), manifest), manifest)
    adapter = adapter_for(board)
    facts = adapter.generate(out)
    adapter.build(out, scratch=tmp_path / "scratch", final_out=out, log=lambda _: None, verbose=False)
    return out, facts


def _validates(out, facts, board: str, io_dtype: str = "int8") -> dict:
    from edgernn.validate.run import validate

    manifest = json.loads((out / "manifest.json").read_text())
    assert {s["dtype"] for s in manifest["states"]} == {"int16"}
    assert (manifest["inputs"][0]["dtype"], manifest["outputs"][0]["dtype"]) == (io_dtype, io_dtype)
    assert facts.state_bytes == sum(2 * s["size"] for s in manifest["states"])
    report = validate(out, data=zoo.trajectories(1, STEPS, 3, 5))
    ref = report["reference"]
    assert report["board"] == board and report["steps"] >= STEPS
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"]
    return report


IO = {"simplernn": "int8", "lstm": "int16"}


@pytest.mark.toolchain
@pytest.mark.parametrize("kind", list(KINDS))
def test_mixed_model_validates_on_host(tmp_path, kind):
    out, facts = build_mixed(tmp_path, "host", kind)
    _validates(out, facts, "host", IO[kind])


@pytest.mark.qemu
@pytest.mark.parametrize("kind", list(KINDS))
def test_mixed_model_validates_on_qemu_riscv32(tmp_path, kind):
    out, facts = build_mixed(tmp_path, "qemu_riscv32", kind)
    _validates(out, facts, "qemu_riscv32", IO[kind])


@pytest.mark.slow
@pytest.mark.toolchain
def test_mixed_model_validates_on_gvsoc_gap8(tmp_path):
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    from edgernn.targets.gap8 import sdk as gap_sdk

    gap_sdk.build_gvsoc()
    out, facts = build_mixed(tmp_path, "gvsoc_gap8")
    report = _validates(out, facts, "gvsoc_gap8")
    assert report["device"]["cycles_per_step"] > 0
    assert (report["device"]["workers"], report["device"]["simd_dot"]) == (8, True)
    # one cluster core without the SIMD dot products, and the fabric controller alone: the same bytes
    from edgernn.tflite.oracle import quantize

    manifest = json.loads((out / "manifest.json").read_text())
    xs = quantize(zoo.trajectories(1, 60, 3, 7)[0], manifest["inputs"][0])
    runs = {cores: _run_variant(out, {"EDGERNN_CLUSTER_CORES": cores, "EDGERNN_XPULP": simd}, xs,
                                tmp_path / f"c{cores}s{simd}")
            for cores, simd in ((8, 1), (1, 0), (0, 1))}
    for cores, result in runs.items():
        assert np.array_equal(result.outputs, runs[8].outputs), cores
        assert np.array_equal(result.states, runs[8].states), cores


def _run_variant(out, make_vars: dict, xs, build_dir):
    """The gvsoc_gap8 project built with other make variables and run in GVSOC over the link."""
    from edgernn.link import LinkClient
    from edgernn.targets import device as devices

    board = devices.load_board("gvsoc_gap8")
    built = devices.build_elf(out / "firmware", board, build_dir, make_vars=make_vars)
    with devices.start(built.elf, board) as device:
        with LinkClient.open(device.url, baud=board["serial"]["baud"], timeout=board["serial"]["timeout_s"]) as link:
            link.wait_ready(board["emulator"]["start_timeout_s"])
            link.hello()
            return link.run(xs, states="every")
