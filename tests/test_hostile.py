"""An adversarial user's cases, as tables: each row is one bad model, bad file or hostile folder, with
the exit code and the words of the one line edgernn must answer with, and what must stay untouched.

Adding a case is adding a row. Exit codes: 0 pass, 1 parity FAIL, 2 bad input, 3 device or link
fault, 4 internal error (a bug).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgernn.cli import cli

pytestmark = pytest.mark.slow


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def assert_one_error_line(code, stderr, want_code, *needles):
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert code == want_code, stderr
    assert lines and lines[-1].startswith("error: "), stderr
    assert sum(line.startswith("error: ") for line in lines) == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    for needle in needles:
        assert needle in lines[-1], stderr


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under folder (hidden ones too) with its SHA-256, and every folder, with its mode."""
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_file() and not path.is_symlink():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[rel] = oct(path.lstat().st_mode)
    return found


# ---------------------------------------------------------------- models (made once per session)

@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Model files of every format, some with a Lambda that creates a marker file when its code runs."""
    import keras
    import tf_keras

    root = tmp_path_factory.mktemp("models")
    marker = root / "lambda_ran.marker"
    code = f"lambda t: (open({str(marker)!r}, 'a').write('ran'), t)[1]"
    keras.utils.set_random_seed(0)
    plain = keras.Sequential([keras.Input((None, 3)), keras.layers.GRU(4, return_sequences=True)])
    plain.save(root / "plain.keras")
    lam3 = keras.Sequential([keras.Input((None, 3)), keras.layers.Lambda(eval(code), name="lam"),
                             keras.layers.LSTM(4)])
    lam3.save(root / "lambda_k3.keras")
    lam3.save(root / "lambda_k3.h5")
    tf_keras.utils.set_random_seed(0)
    lam2 = tf_keras.Sequential([tf_keras.layers.InputLayer((None, 3)), tf_keras.layers.Lambda(eval(code), name="lam"),
                                tf_keras.layers.LSTM(4)])
    lam2.save(root / "lambda_tfk.h5")
    lam2.save(root / "lambda_tfk_savedmodel", save_format="tf")
    keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(4)]).export(root / "k3_export")
    marker.unlink(missing_ok=True)
    (root / "garbage.keras").write_bytes(b"PK\x03\x04 not really a zip")
    (root / "text.h5").write_text("not hdf5")
    (root / "model.onnx").write_bytes(b"\x08\x07")
    (root / "empty_folder").mkdir()
    os.mkfifo(root / "fifo.keras")
    return root


MODEL_CASES = [
    # (model file in the fixture folder, extra args, exit code, words in the error line)
    ("lambda_k3.keras", (), 2, ["Lambda", "--unsafe"]),
    ("lambda_k3.h5", (), 2, ["Lambda", "--unsafe"]),
    ("lambda_tfk.h5", (), 2, ["Lambda", "--unsafe"]),
    ("lambda_tfk_savedmodel", (), 2, ["Lambda", "--unsafe"]),
    ("k3_export", (), 2, ["model.export()", "model.save('model.keras')"]),
    ("garbage.keras", (), 2, ["corrupt"]),
    ("text.h5", (), 2, ["not a valid HDF5"]),
    ("model.onnx", (), 2, ["unknown model format .onnx"]),
    ("empty_folder", (), 2, ["not a SavedModel"]),
    ("fifo.keras", (), 2, ["not a regular file"]),
    ("nothing_here.keras", (), 2, ["does not exist"]),
]


@pytest.mark.parametrize("command", ["inspect", "convert", "build"])
@pytest.mark.parametrize("name, extra, want, needles", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_bad_models(models, tmp_path, command, name, extra, want, needles):
    args = {"inspect": (), "convert": ("-o", tmp_path / "out", "--quant", "float32"),
            "build": ("--board", "host", "-o", tmp_path / "out", "--quant", "float32")}[command]
    code, _, err = run(command, models / name, *args, *extra)
    assert_one_error_line(code, err, want, *needles)
    assert not (models / "lambda_ran.marker").exists(), "code stored in the model ran"
    assert list(tmp_path.iterdir()) == [], "something was left behind"


def test_lambda_code_does_run_with_unsafe(models):
    """The marker test can fail: with --unsafe the stored code does run (and is then refused)."""
    try:
        code, _, err = run("inspect", models / "lambda_tfk.h5", "--unsafe")
        assert code == 2 and "cannot stream" in err, err
        assert (models / "lambda_ran.marker").exists()
    finally:
        (models / "lambda_ran.marker").unlink(missing_ok=True)


# ---------------------------------------------------------------- output folders

def edgernn_build(tmp_path, models, *user_files):
    out = tmp_path / "out"
    code, _, err = run("convert", models / "plain.keras", "-o", out, "--quant", "float32")
    assert code == 0, err
    for name in user_files:
        (out / name).write_text(f"the user's {name}")
    return out


def web_project(tmp_path, models):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text('{"manifest_version": 3, "name": "my extension"}')
    (out / "background.js").write_text("chrome.runtime")
    return out


def empty_manifest(tmp_path, models):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    (out / "index.html").write_text("<html>")
    return out


def old_edgernn(tmp_path, models):
    out = edgernn_build(tmp_path, models)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["schema"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def user_report(tmp_path, models):
    out = edgernn_build(tmp_path, models)
    (out / "report.json").write_text("the user's own report")
    return out


def not_empty(tmp_path, models):
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    return out


def a_file(tmp_path, models):
    out = tmp_path / "out"
    out.write_text("a file")
    return out


def under_a_file(tmp_path, models):
    (tmp_path / "file").write_text("a file")
    return tmp_path / "file" / "out"


def under_proc(tmp_path, models):
    return Path("/proc/edgernn-test/out")


FOLDER_REFUSALS = [
    # (folder set-up, words in the error line)
    (web_project, ["did not write", "schema"]),
    (empty_manifest, ["did not write"]),
    (old_edgernn, ["did not write"]),
    (user_report, ["report.json", "did not write"]),
    (not_empty, ["not empty"]),
    (a_file, ["not a folder"]),
    (under_a_file, ["is a file"]),
    (under_proc, ["cannot create the output folder"]),
]


@pytest.mark.parametrize("setup, needles", FOLDER_REFUSALS, ids=[c[0].__name__ for c in FOLDER_REFUSALS])
def test_output_folders_that_are_not_edgernns_are_refused_and_untouched(models, tmp_path, setup, needles):
    out = setup(tmp_path, models)
    before = snapshot(tmp_path)
    code, _, err = run("convert", models / "plain.keras", "-o", out, "--quant", "float32")
    assert_one_error_line(code, err, 2, *needles)
    assert snapshot(tmp_path) == before


def test_rebuilding_keeps_the_users_files_in_an_edgernn_folder(models, tmp_path):
    out = edgernn_build(tmp_path, models, "model.keras", "calib.npy", "notes.txt")
    (out / "data").mkdir()
    (out / "data" / "x.npy").write_text("mine")
    mine = {k: v for k, v in snapshot(out).items() if k.split("/")[0] in ("model.keras", "calib.npy", "notes.txt", "data")}
    old_step = (out / "step.tflite").read_bytes()
    code, _, err = run("convert", models / "plain.keras", "-o", out, "--quant", "int8")
    assert code == 0, err
    after = snapshot(out)
    assert {k: after[k] for k in mine} == mine
    assert (out / "step.tflite").read_bytes() != old_step
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema"] == "edgernn-build/1" and manifest["written"] == ["manifest.json", "step.tflite"]
    assert sorted(p.name for p in out.iterdir()) == ["calib.npy", "data", "manifest.json", "model.keras",
                                                     "notes.txt", "step.tflite"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "a staging folder was left behind"


def test_a_new_output_folder_gets_the_usual_mode(models, tmp_path):
    old = os.umask(0o022)
    try:
        out = edgernn_build(tmp_path, models)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
