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

from edgernn.cli.main import cli

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
    (root / "garbage.onnx").write_bytes(b"not an ONNX protobuf")
    (root / "model.pt").write_bytes(b"PK\x03\x04")
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
    ("model.onnx", (), 2, ["model.onnx is not an ONNX model", "no graph"]),
    ("garbage.onnx", (), 2, ["garbage.onnx is not an ONNX model"]),
    ("model.pt", (), 2, ["PyTorch .pt file", "torch.onnx.export", "edgernn.convert"]),
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
    assert manifest["schema"] == "edgernn-build/1"
    assert manifest["written"] == ["float_step.tflite", "manifest.json", "step.tflite"]
    assert sorted(p.name for p in out.iterdir()) == ["calib.npy", "data", "float_step.tflite", "manifest.json",
                                                     "model.keras", "notes.txt", "step.tflite"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "a staging folder was left behind"
    # Back to float32: edgernn's own float_step.tflite goes, the user's files stay.
    code, _, err = run("convert", models / "plain.keras", "-o", out, "--quant", "float32")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["calib.npy", "data", "manifest.json", "model.keras",
                                                     "notes.txt", "step.tflite"]
    after = snapshot(out)
    assert {k: after[k] for k in mine} == mine


def test_a_new_output_folder_gets_the_usual_mode(models, tmp_path):
    old = os.umask(0o022)
    try:
        out = edgernn_build(tmp_path, models)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


# ---------------------------------------------------------------- data files

def npz(path):
    with open(path, "wb") as handle:  # np.savez would add .npz to any other name
        np.savez(handle, a=np.zeros((2, 10, 3), np.float32))
    return path


def text_npy(path):
    path.write_text("1 2 3\n4 5 6\n")
    return path


def pickled(path):
    np.save(path, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    return path


def fifo(path):
    os.mkfifo(path)
    return path


def truncated(path):
    np.save(path, np.zeros((4, 100, 3), np.float32))
    path.write_bytes(path.read_bytes()[:300])
    return path


def wrong_features(path):
    np.save(path, np.zeros((2, 10, 5), np.float32))
    return path


def folder(path):
    path.mkdir()
    return path


DATA_CASES = [
    # (file maker, file name, words in the error line)
    (npz, "d.npz", [".npz archive", "numpy.save"]),
    (npz, "d.npy", [".npz archive"]),
    (text_npy, "d.npy", ["not a .npy file"]),
    (pickled, "d.npy", ["Python objects"]),
    (fifo, "d.npy", ["not a regular file"]),
    (truncated, "d.npy", ["damaged or truncated"]),
    (wrong_features, "d.npy", ["5 features per step; the model takes 3"]),
    (folder, "d.npy", ["is a directory"]),
    (None, "missing.npy", ["does not exist"]),
]


@pytest.mark.parametrize("make, name, needles", DATA_CASES, ids=[f"{c[0].__name__ if c[0] else 'none'}-{c[1]}"
                                                                 for c in DATA_CASES])
def test_bad_calibration_files(models, tmp_path, make, name, needles):
    path = make(tmp_path / name) if make else tmp_path / name
    before = snapshot(tmp_path)
    code, _, err = run("convert", models / "plain.keras", "-o", tmp_path / "out", "--calib", path)
    assert_one_error_line(code, err, 2, *needles)
    assert snapshot(tmp_path) == before


def test_all_zero_calibration_is_accepted_with_a_warning(models, tmp_path):
    np.save(tmp_path / "zeros.npy", np.zeros((2, 20, 3), np.float32))
    code, _, err = run("convert", models / "plain.keras", "-o", tmp_path / "out", "--calib", tmp_path / "zeros.npy")
    assert code == 0, err
    assert "one value only" in err


# ---------------------------------------------------------------- validate

@pytest.fixture(scope="session")
def host_build(models, tmp_path_factory):
    from conftest import require_tools

    require_tools("gcc")
    out = tmp_path_factory.mktemp("build") / "out"
    code, _, err = run("build", models / "plain.keras", "--board", "host", "-o", out, "--quant", "int8")
    assert code == 0, err
    return out


@pytest.fixture
def build_copy(host_build, tmp_path):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(host_build, out, symlinks=True)
    (out / "report.json").unlink(missing_ok=True)
    (out / "report.html").unlink(missing_ok=True)
    return out


def no_step(out):
    (out / "step.tflite").unlink()


def damaged_step(out):
    (out / "step.tflite").write_bytes(b"TFL3" + b"\0" * 40)


def bad_manifest(out):
    (out / "manifest.json").write_text("{not json")


def user_report_file(out):
    (out / "report.json").write_text("the user's notes")


def no_change(out):
    pass


VALIDATE_CASES = [
    # (folder change, extra args, exit code, words in the error line)
    (no_change, ["--steps", "0"], 2, ["--steps", "0"]),
    (no_change, ["--steps", "-5"], 2, ["--steps", "-5"]),
    (no_change, ["--json", "{tmp}/no/such/dir/r.json"], 2, ["does not exist"]),
    (no_change, ["--json", "{tmp}/user.txt"], 2, ["edgernn did not write"]),
    (no_change, ["--json", "/proc/edgernn-report.json"], 2, ["cannot write the report"]),
    (no_change, ["--save", "{tmp}/dev.npy"], 2, [".npz"]),
    (no_change, ["--save", "{tmp}/user.npz"], 2, ["edgernn did not write"]),
    (no_change, ["--data", "{tmp}/d.npz"], 2, [".npz archive"]),
    (no_change, ["--port", "/dev/ttyEDGERNN_NONE"], 3, ["cannot open port"]),
    (no_step, [], 2, ["step.tflite is missing"]),
    (damaged_step, [], 2, ["damaged"]),
    (bad_manifest, [], 2, ["not valid JSON"]),
    (user_report_file, [], 2, ["report.json", "edgernn did not write"]),
]


@pytest.mark.toolchain
@pytest.mark.parametrize("change, extra, want, needles", VALIDATE_CASES,
                         ids=[f"{c[0].__name__}{' '.join(c[1])}" for c in VALIDATE_CASES])
def test_validate_refusals(build_copy, tmp_path, change, extra, want, needles):
    change(build_copy)
    (tmp_path / "user.txt").write_text("mine")
    npz(tmp_path / "user.npz")
    npz(tmp_path / "d.npz")
    before = snapshot(tmp_path)
    code, out, err = run("validate", build_copy, *[a.format(tmp=tmp_path) for a in extra])
    assert_one_error_line(code, err, want, *needles)
    assert snapshot(tmp_path) == before


@pytest.mark.toolchain
def test_validate_passes_prints_the_table_on_stdout_and_saves(build_copy, tmp_path):
    code, out, err = run("validate", build_copy, "--steps", "2500", "--save", tmp_path / "dev.npz")
    assert code == 0, err
    assert "PASS" in out and "drift" in out and "PASS" not in err
    report = json.loads((build_copy / "report.json").read_text())
    assert [r["steps"] for r in report["drift"]] == [[0, 200], [200, 1000], [1000, 2000], [2000, 2500], [1500, 2500]]
    assert all(r["rmse"] is not None for r in report["drift"])
    assert report["float"]["rmse"] is not None and "float_step.tflite" in report["float"]["against"]
    saved = np.load(tmp_path / "dev.npz")
    assert saved["y"].shape == (1, 2500, 4) and saved["cycles"].shape == (1, 2500)
    manifest = json.loads((build_copy / "manifest.json").read_text())
    assert {"report.json", "report.html"} <= set(manifest["written"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.npz", "out"]


@pytest.mark.toolchain
def test_validate_fail_is_exit_1(build_copy, monkeypatch):
    from edgernn.validate import run as validation

    advance = validation.InterpreterReference.advance

    def off_by_one(self, xq):
        ref = advance(self, xq)
        ref.y[:, 0] += 1
        return ref

    monkeypatch.setattr(validation.InterpreterReference, "advance", off_by_one)
    code, out, err = run("validate", build_copy, "--steps", "300")
    assert code == 1, err
    assert "FAIL" in out


@pytest.mark.toolchain
def test_inputs_outside_the_calibrated_range_are_reported(build_copy, tmp_path):
    np.save(tmp_path / "far.npy", np.full((1, 300, 3), 40.0, np.float32))
    code, out, err = run("validate", build_copy, "--data", tmp_path / "far.npy")
    assert code == 0, err
    report = json.loads((build_copy / "report.json").read_text())
    assert report["inputs"]["clipped_values"] == 900
    assert any("clipped" in n for n in report["notes"]) and "clipped" in out


@pytest.mark.toolchain
def test_a_board_file_without_memory_size(models, tmp_path):
    from edgernn.resources import boards_dir

    text = (boards_dir() / "host.toml").read_text().replace("size = 1073741824\n", "")
    (tmp_path / "mine.toml").write_text(text)
    code, _, err = run("build", models / "plain.keras", "--board", tmp_path / "mine.toml", "-o", tmp_path / "out")
    assert_one_error_line(code, err, 2, "memory.size")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- dead devices and signals

@pytest.mark.toolchain
def test_a_killed_host_firmware_is_noticed_at_once(tmp_path):
    import signal
    import time

    from edgernn.errors import LinkError
    from edgernn.testing.toy_build import ToyReference, make_toy_out
    from edgernn.validate.run import validate
    from conftest import processes_mentioning

    out = make_toy_out(tmp_path / "out")

    class KillingReference(ToyReference):
        def advance(self, xq):
            if self.done >= 2000 and not hasattr(self, "killed"):
                for pid in processes_mentioning(str(out)):
                    os.kill(pid, signal.SIGKILL)
                self.killed = time.monotonic()
            return super().advance(xq)

    reference = KillingReference()
    with pytest.raises(LinkError, match=r"firmware process ended \(killed by signal 9\)"):
        validate(out, steps=10_000, chunk_steps=1000, reference=reference)
    assert time.monotonic() - reference.killed < 3.0
    assert not (out / "report.json").exists()


@pytest.mark.toolchain
@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_signal_during_validate_leaves_nothing(build_copy, tmp_path, sig, code):
    import signal
    import subprocess
    import sys
    import time

    from conftest import processes_mentioning, wait_until

    before = snapshot(tmp_path)
    cli_process = subprocess.Popen([sys.executable, "-m", "edgernn", "validate", str(build_copy), "--steps", "3000000",
                                    "--save", str(tmp_path / "dev.npz")], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_until(lambda: processes_mentioning(str(build_copy / "firmware")), 60), cli_process.stderr.read()
        time.sleep(1.0)
        cli_process.send_signal(getattr(signal, sig))
        assert cli_process.wait(30) == code
        assert wait_until(lambda: not processes_mentioning(str(build_copy))), "the firmware outlived edgernn"
        assert snapshot(tmp_path) == before
    finally:
        if cli_process.poll() is None:
            os.killpg(cli_process.pid, signal.SIGKILL)


@pytest.mark.toolchain
@pytest.mark.parametrize("verdict, code", [("PASS", 2), ("FAIL", 1)])
def test_a_report_that_cannot_be_written_keeps_the_verdict(build_copy, monkeypatch, verdict, code):
    """The disk fills up after the run: the verdict is printed first, then one error line."""
    import errno

    from edgernn.validate import report
    from edgernn.validate import run as validation

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "write_json", full)
    if verdict == "FAIL":
        advance = validation.InterpreterReference.advance

        def off_by_one(self, xq):
            ref = advance(self, xq)
            ref.y[:, 0] += 1
            return ref

        monkeypatch.setattr(validation.InterpreterReference, "advance", off_by_one)
    got, out, err = run("validate", build_copy, "--steps", "300")
    assert verdict in out
    assert_one_error_line(got, err, code, "disk is full", f"verdict above stands: {verdict}")
    assert not (build_copy / "report.json").exists()


def _raise(exc):
    def raiser(*_args, **_kwargs):
        raise exc

    return raiser


INJECTED_FAULTS = [
    # (module attribute to replace, exception it raises, exit code, words in the error line)
    ("edgernn.outdir.BuildFolder.commit", OSError(28, "No space left on device"), 2, ["disk is full"]),
    ("edgernn.outdir.BuildFolder.commit", OSError(30, "Read-only file system"), 2, ["read-only"]),
    ("edgernn.pipeline.convert.decompose", RuntimeError("a bug"), 4, []),
]


@pytest.mark.parametrize("target, exc, want, needles", INJECTED_FAULTS, ids=[f"{c[0]}-{c[2]}" for c in INJECTED_FAULTS])
def test_injected_faults_during_convert(models, tmp_path, monkeypatch, target, exc, want, needles):
    monkeypatch.setattr(target, _raise(exc))
    before = snapshot(tmp_path)
    code, _, err = run("convert", models / "plain.keras", "-o", tmp_path / "out", "--quant", "float32")
    if want == 4:
        assert code == 4 and err.startswith("error: internal error RuntimeError: a bug"), err
    else:
        assert_one_error_line(code, err, want, *needles)
    assert snapshot(tmp_path) == before


@pytest.mark.toolchain
@pytest.mark.parametrize("command, sig, code", [
    ("convert", "SIGTERM", 143), ("convert", "SIGINT", 130), ("build", "SIGHUP", 129), ("build", "SIGTERM", 143)])
def test_a_signal_during_convert_or_build_leaves_nothing(models, tmp_path, command, sig, code):
    import signal
    import subprocess
    import sys
    import time

    from conftest import processes_mentioning, wait_until

    work = tmp_path / "work"
    work.mkdir()
    args = [sys.executable, "-m", "edgernn", command, str(models / "plain.keras"), "-o", str(work / "out"),
            "--quant", "int8"] + (["--board", "host"] if command == "build" else [])
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_until(lambda: any(work.iterdir()), 60), "no staging folder appeared"
        if command == "convert":
            time.sleep(2.0)
        else:       # the signal lands while the C is generated and compiled, however fast the conversion was
            assert wait_until(lambda: any(work.glob("*/out/firmware")), 120), "no firmware folder was staged"
        child.send_signal(getattr(signal, sig))
        assert child.wait(30) == code, child.stderr.read()
        assert list(work.iterdir()) == [], "something was left behind"
        assert wait_until(lambda: not processes_mentioning(str(work))), "a compiler outlived edgernn"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)


# An exit handler that ends the process by the signal once edgernn has begun to end for it, as CPython does
# itself for a KeyboardInterrupt that reaches the top: it stands for whatever Python's shutdown runs
# (TensorFlow's teardown, a half-imported extension's leftovers), none of which may decide the exit code.
_ENDS_BY_THE_SIGNAL_AT_EXIT = """
import atexit, os, signal

def _end_by_the_signal():
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)

atexit.register(_end_by_the_signal)
"""


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_command_ends_with_its_code_before_python_shuts_down(models, tmp_path, sig, code):
    import signal
    import subprocess
    import sys
    import time

    from conftest import wait_until

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_ENDS_BY_THE_SIGNAL_AT_EXIT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hooks), os.environ.get("PYTHONPATH")]))}
    work = tmp_path / "work"
    work.mkdir()
    child = subprocess.Popen([sys.executable, "-m", "edgernn", "convert", str(models / "plain.keras"),
                              "-o", str(work / "out"), "--quant", "int8"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
    try:
        assert wait_until(lambda: any(work.iterdir()), 60), "no staging folder appeared"
        time.sleep(0.5)
        child.send_signal(getattr(signal, sig))
        assert child.wait(30) == code, child.stderr.read()
        assert child.stderr.read().strip().splitlines()[-1].startswith("interrupted")
        assert list(work.iterdir()) == [], "something was left behind"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
