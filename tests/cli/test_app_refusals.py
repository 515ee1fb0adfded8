"""`edgernn build --app camera`: what it refuses, each in one `error:` line with exit status 2, before or after the
conversion, the output folder left as it was (tests/cli/test_refusals.py's fixture and checks)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import one_error_line, require_module

pytestmark = pytest.mark.slow


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgernn", *[str(a) for a in args]], capture_output=True, text=True,
                          timeout=600)




@pytest.mark.parametrize("args, message", [
    (["--board", "host", "--app", "camera"], "board host has no 'camera' application"),
    (["--board", "qemu_stm32f405", "--app", "camera"], "has no 'camera' application"),
    (["--board", "ai_deck", "--app", "camera", "--link", "uart"], "--link uart does not apply"),
    (["--board", "ai_deck", "--pre-factor", "2"], "--pre-factor is an option of --app camera"),
    (["--board", "ai_deck", "--app-wifi"], "--app-wifi is an option of --app camera"),
    (["--board", "ai_deck", "--app", "camera", "--pre-crop", "3"], "give the corner as X,Y"),
])
def test_options_refused_before_any_work(tmp_path, args, message):
    out = tmp_path / "out"
    proc = _cli("build", tmp_path / "absent.keras", "-o", out, *args)
    assert proc.returncode == 2 and message in one_error_line(proc)
    assert not out.exists()


@pytest.mark.parametrize("make, options, message", [
    ("features", [], "feeds a gray image of (height, width, 1)"),
    ("rgb", [], "feeds a gray image"),
    ("gray", ["--pre-factor", "9"], "factors that fit: 1 to 8"),
    ("gray", ["--pre-crop", "5,0"], "x goes 0..0"),
])
def test_models_and_options_the_camera_cannot_feed(tmp_path, make, options, message):
    require_module("keras")
    import keras

    keras.utils.set_random_seed(0)
    L = keras.layers
    shapes = {"features": (None, 6), "rgb": (None, 30, 40, 3), "gray": (None, 30, 40, 1)}
    layers = [keras.Input(shapes[make])]
    if make != "features":
        layers += [L.TimeDistributed(L.Conv2D(2, 3, strides=4)), L.TimeDistributed(L.Flatten())]
    model = keras.Sequential(layers + [L.GRU(4, return_sequences=True), L.Dense(2)])
    path = tmp_path / "m.keras"
    model.save(path)
    out = tmp_path / "out"
    proc = _cli("build", path, "--board", "ai_deck", "--app", "camera", "-o", out, *options)
    assert proc.returncode == 2 and message in one_error_line(proc)
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
