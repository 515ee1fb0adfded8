"""validate() end to end with the toy-model test double: report, parity, and the clear errors."""

from __future__ import annotations

import json
import os
import tty

import numpy as np
import pytest

from edgernn.errors import EdgeRNNError, LinkError
from edgernn.testing.toy_build import ToyReference, make_toy_out, toy_reference
from edgernn.validate.run import exit_code, validate

pytestmark = pytest.mark.toolchain

REPORT_KEYS = {"pass", "board", "quant", "model_sha256", "steps", "sequences", "reference", "float", "device"}


@pytest.fixture
def toy_out(tmp_path):
    return make_toy_out(tmp_path / "out")


def test_validate_on_the_host_board_passes_and_writes_reports(toy_out, monkeypatch):
    """... also when the profile asked for fails after the run: the verdict and the report stand, and a note
    says why there is no profile."""
    from edgernn.targets.native.adapter import NativeAdapter

    def no_trace(self, out_dir, step):
        raise EdgeRNNError("the emulator's trace could not be read")

    monkeypatch.setattr(NativeAdapter, "profiler", "a tracer")
    monkeypatch.setattr(NativeAdapter, "start_profiled", no_trace)
    report = validate(toy_out, steps=1200, sequences=2, reference=toy_reference, profile=True)
    assert "profile" not in report
    assert report["notes"][-1] == "--profile: no profile, the emulator's trace could not be read"
    assert REPORT_KEYS <= set(report)
    assert report["pass"] and exit_code(report) == 0
    assert report["reference"]["mismatches"] == 0 and report["reference"]["state_mismatches"] == 0
    assert (report["steps"], report["sequences"], report["board"]) == (1200, 2, "host")
    assert report["device"]["cycles_per_step"] > 0
    assert report["float"]["skipped"]
    saved = json.loads((toy_out / "report.json").read_text())
    assert saved["pass"] is True and saved["reference"] == report["reference"]
    page = (toy_out / "report.html").read_text()
    # no float model and no difference from the reference: the outputs are the one plot, and the page says
    # why the others are not there
    assert page.count("data:image/png;base64,") == 1 and '<span class="badge">PASS</span>' in page
    assert "No float model to compare with" in page and "so it is not drawn again" in page
    assert "No drift windows: the float model was not compared step by step." in page
    assert "no profile, the emulator&#39;s trace could not be read" in page


def test_profile_is_refused_before_the_run_on_a_board_that_cannot_trace(toy_out):
    with pytest.raises(EdgeRNNError, match="board host cannot profile a step: --profile needs a board whose "
                                           r"instructions edgernn can trace \(gvsoc_gap8, qemu_riscv32\)"):
        validate(toy_out, steps=10, reference=toy_reference, profile=True)
    assert not (toy_out / "report.json").exists()


def test_validate_fails_when_the_device_differs_from_the_reference(toy_out):
    report = validate(toy_out, steps=1000, reference=ToyReference(wrong_at=500))
    assert not report["pass"] and exit_code(report) == 1
    assert report["reference"]["mismatches"] == 1
    assert report["reference"]["first_mismatch"]["step"] == 500


def test_validate_with_test_data_from_a_file(toy_out, tmp_path):
    data = np.random.default_rng(1).uniform(-1.5, 1.5, (3, 50, 3)).astype(np.float32)
    np.save(tmp_path / "data.npy", data)
    report = validate(toy_out, data=tmp_path / "data.npy", reference=toy_reference,
                      json_path=tmp_path / "r.json")
    assert report["pass"] and (report["steps"], report["sequences"]) == (50, 3)
    assert (tmp_path / "r.json").is_file() and (tmp_path / "r.html").is_file()


def test_test_data_of_the_wrong_shape(toy_out, tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((2, 10, 5), np.float32))
    with pytest.raises(EdgeRNNError, match=r"test data of shape \(2, 10, 5\) does not fit the model: expected "
                                           r"\(sequences, steps, 3\)"):
        validate(toy_out, data=tmp_path / "bad.npy", reference=toy_reference)


def test_a_build_folder_that_is_not_one(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(EdgeRNNError, match="is not an edgernn build folder"):
        validate(tmp_path / "empty", reference=toy_reference)
    with pytest.raises(EdgeRNNError, match="does not exist"):
        validate(tmp_path / "nowhere", reference=toy_reference)


def test_a_device_built_from_another_model(toy_out, tmp_path):
    other = make_toy_out(tmp_path / "other", sha="0" * 64)
    from edgernn.targets import device as devices

    with devices.flash(toy_out) as device:
        with pytest.raises(LinkError, match="carries another model .*flash this folder's firmware first"):
            validate(other, port=device.url, steps=10, reference=toy_reference)


def test_a_port_that_does_not_exist_through_validate(toy_out):
    with pytest.raises(LinkError, match="cannot open port /dev/ttyEDGERNN_NONE"):
        validate(toy_out, port="/dev/ttyEDGERNN_NONE", steps=10, reference=toy_reference)


def test_a_device_that_does_not_answer_through_validate(toy_out):
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        with pytest.raises(LinkError, match="gave no valid answer to HELLO"):
            validate(toy_out, port=os.ttyname(slave), steps=10, timeout=0.2, reference=toy_reference)
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.qemu
def test_validate_on_qemu_riscv32(tmp_path):
    out = make_toy_out(tmp_path / "out", board="qemu_riscv32")
    report = validate(out, steps=1000, reference=toy_reference)
    assert report["pass"] and report["board"] == "qemu_riscv32"
    # minstret under -icount shift=0 is exact: every toy step retires the same instruction count.
    assert report["device"]["cycles_per_step_max"] == report["device"]["cycles_per_step"]
    assert report["device"]["code_bytes"] > 0
