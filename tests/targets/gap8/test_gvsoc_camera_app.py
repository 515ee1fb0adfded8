"""The deck's camera application end to end in GVSOC (`edgernn build --app camera`, `edgernn validate --data
frames.npy`): camera frames played as image files through GVSOC's camera model, the application as built
capturing, preprocessing and stepping its model, and every output it sends (CPX APP packets through the
simulated ESP32) equal to the interpreter's on the host twin's bytes, over whole sequences: a CNN + GRU whose head
runs after every frame, and a stateless CNN at int16 with every preprocessing option set. Also: the report's
frame timing, a validation that fails when the twin does not match, the refusals, and no process left behind."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import (gap_sdk_params, one_error_line, processes_mentioning, require_gap_sdk, require_gap_sdk_at,
                      require_tools)
from edgernn.testing.frames_zoo import camera_cnn_gru_head, camera_residual_cnn

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "gvsoc_gap8"
FRAMES = 8


@pytest.fixture(scope="module")
def gvsoc():
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc", "g++")
    from edgernn.targets.gap8 import sdk as gap_sdk

    return gap_sdk.build_gvsoc()


CASES = {
    # name: (model, quant, app options)
    "cnn_gru_head_int8": (camera_cnn_gru_head, "int8", {}),
    "cnn_int16_options": (camera_residual_cnn, "int16", {"factor": 2, "crop": (30, 20), "scale": 2 / 255, "offset": -1.0}),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def app_build(request, gvsoc, tmp_path_factory):
    """(name, OUT, frames) of an application built for gvsoc_gap8, calibrated on the twin's float inputs."""
    from edgernn.pipeline.build import build_model
    from edgernn.targets import camera
    from edgernn.testing.frames_zoo import camera_frames

    name = request.param
    make, quant, options = CASES[name]
    folder = tmp_path_factory.mktemp(name)
    model = make(seed=len(name))
    path = folder / f"{name}.keras"
    model.save(path)
    shape = model.input_shape[2:] if len(model.input_shape) == 5 else model.input_shape[1:]
    pre = camera.plan_preprocess(shape, **options)
    calib = camera.float_inputs(camera_frames(4, 12, seed=1), pre)
    result = build_model(str(path), folder / "out", board=BOARD, quant=quant, calib=calib,
                         app=camera.AppOptions(**options))
    app = result["manifest"]["app"]
    assert app["kind"] == "camera" and app["preprocess"] == pre.as_dict(), app
    assert "wifi" in app["destinations"] and app["waits_for_host"], app
    assert (folder / "out" / "crazyflie_app" / "src" / "edgernn_receiver.h").is_file()
    frames = camera_frames(2, FRAMES, seed=7)
    np.save(folder / "frames.npy", frames)
    return name, folder / "out", folder / "frames.npy"


def test_every_output_of_every_frame_equals_the_interpreter(app_build, tmp_path):
    from edgernn.validate.run import validate

    name, out, frames = app_build
    report = validate(out, data=str(frames), json_path=tmp_path / "report.json")
    ref, app = report["reference"], report["app"]
    n_out = 3 if name.startswith("cnn_gru") else 2
    assert report["pass"] and ref["mismatches"] == 0, ref
    assert ref["compared_values"] == 2 * FRAMES * n_out
    assert (report["steps"], report["sequences"], app["frames"]) == (FRAMES, 2, 2 * FRAMES)
    assert [(f["sequence"], f["frame"]) for f in app["per_frame"]] == [(s, t) for s in range(2) for t in range(FRAMES)]
    cycles = app["cycles_per_frame"]
    assert min(cycles["capture"], cycles["preprocess"], cycles["model"]) > 0
    assert cycles["period"] == pytest.approx(cycles["capture"] + cycles["preprocess"] + cycles["model"])
    assert app["frames_per_second"] == pytest.approx(175e6 / cycles["period"])
    assert app["capture_overlapped_compute"] and "GVSOC's timing model" in app["timing"]
    assert report["float"]["cos"] > 0.95, report["float"]     # int8 and int16 of a random model: near, not equal
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["pass"] and (tmp_path / "report.html").read_text().count("<tr>") > 2 * FRAMES
    assert processes_mentioning(str(out)) == []


def test_a_twin_that_differs_from_the_device_fails(app_build, tmp_path):
    """The comparison can fail: the same firmware against a host twin whose offset moved by 0.05."""
    from edgernn.validate.run import exit_code, validate

    name, out, frames = app_build
    moved = tmp_path / "out"
    shutil.copytree(out, moved, symlinks=True)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["app"]["preprocess"]["offset"] += 0.05
    (moved / "manifest.json").write_text(json.dumps(manifest))
    report = validate(moved, data=str(frames), steps=3, json_path=tmp_path / "report.json")
    assert not report["pass"] and report["reference"]["mismatches"] > 0 and exit_code(report) == 1


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgernn", *args], capture_output=True, text=True, timeout=600)




@pytest.mark.parametrize("app_build", ["cnn_gru_head_int8"], indirect=True)
@pytest.mark.parametrize("extra, data, message", [
    (["--port", "cpx://127.0.0.1:5000"], "frames", "not over --port"),
    ([], "features", "camera frames"),
    ([], None, "needs camera frames"),
])
def test_validate_refuses_what_an_application_cannot_take(app_build, tmp_path, extra, data, message):
    name, out, frames = app_build
    args = ["validate", str(out), "--json", str(tmp_path / "r.json"), *extra]
    if data == "frames":
        args += ["--data", str(frames)]
    elif data == "features":
        np.save(tmp_path / "x.npy", np.zeros((1, 4, 48, 64, 1), np.float32))
        args += ["--data", str(tmp_path / "x.npy")]
    proc = _cli(*args)
    assert proc.returncode == 2 and message in one_error_line(proc)
    assert processes_mentioning(str(out)) == []


@pytest.mark.parametrize("sdk", gap_sdk_params())
def test_the_application_runs_on_each_sdk(sdk, gvsoc, tmp_path, monkeypatch):
    """The same application built against each SDK the tests have ($GAP_SDK_HOME; CI: ../shared/gap_sdk, and 4.8.0,
    Bitcraze's docker SDK, through $EDGERNN_TEST_GAP_SDKS), its GVSOC built from that SDK: 4 frames exact."""
    from edgernn.pipeline.build import build_model
    from edgernn.targets import camera
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import camera_frames
    from edgernn.validate.run import validate

    monkeypatch.setenv("GAP_SDK_HOME", str(require_gap_sdk_at(sdk)))
    gap_sdk.build_gvsoc()
    model = camera_cnn_gru_head(seed=5)
    model.save(tmp_path / "m.keras")
    pre = camera.plan_preprocess((48, 64, 1))
    build_model(str(tmp_path / "m.keras"), tmp_path / "out", board=BOARD, quant="int8",
                calib=camera.float_inputs(camera_frames(2, 8, seed=2), pre), app=camera.AppOptions())
    report = validate(tmp_path / "out", data=camera_frames(1, 4, seed=9), json_path=tmp_path / "r.json")
    assert report["pass"] and report["reference"]["compared_values"] == 4 * 3, report["reference"]
    assert processes_mentioning(str(tmp_path)) == []
