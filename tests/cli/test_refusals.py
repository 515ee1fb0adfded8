"""Bad input gets one clear line and a non-zero exit, and leaves the output folder as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from edgernn.cli.main import cli


pytestmark = pytest.mark.slow


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture
def out(tmp_path):
    """An output folder from an earlier conversion, which a failed one must not touch."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps(EARLIER) + "\n")
    (folder / "step.tflite").write_bytes(b"earlier")
    return folder


EARLIER = {"schema": "edgernn-build/1", "written": ["manifest.json", "step.tflite"], "earlier": True}


def assert_untouched(folder):
    assert json.loads((folder / "manifest.json").read_text()) == EARLIER
    assert (folder / "step.tflite").read_bytes() == b"earlier"
    assert sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(".")) == []


def keras3():
    import keras

    keras.utils.set_random_seed(0)
    return keras


def save(model, tmp_path, name="m.keras"):
    path = tmp_path / name
    model.save(path)
    return path


def _bidirectional(keras):
    return keras.Sequential([keras.Input((None, 3)), keras.layers.Bidirectional(keras.layers.LSTM(4), name="bi")])


def _masking(keras):
    return keras.Sequential([keras.Input((None, 3)), keras.layers.Masking(name="mask"), keras.layers.GRU(4)])


def _conv1d(keras):
    return keras.Sequential([keras.Input((None, 3)), keras.layers.Conv1D(4, 3, name="conv"), keras.layers.LSTM(4)])


def _attention(keras):
    x = keras.Input((None, 3))
    z = keras.layers.LSTM(4, return_sequences=True)(x)
    z = keras.layers.MultiHeadAttention(2, 4, name="mha")(z, z)
    return keras.Model(x, z)


def _go_backwards(keras):
    return keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(4, go_backwards=True, name="back")])


def _lambda(keras):
    return keras.Sequential([keras.Input((None, 3)), keras.layers.Lambda(lambda t: t * 2.0), keras.layers.LSTM(4)])


def _named_lambda(keras):
    return keras.Sequential([keras.Input((None, 3)), keras.layers.Lambda(lambda t: t * 2.0, name="lam"),
                             keras.layers.LSTM(4)])


def _layer_norm_over_time(keras):
    return keras.Sequential([keras.Input((10, 3)), keras.layers.LayerNormalization(axis=1, name="ln"),
                             keras.layers.LSTM(4)])


def _nan_weights(keras):
    """A training that diverged: NaN in the LSTM's kernel."""
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(4, name="diverged")])
    kernel, recurrent, bias = model.layers[0].get_weights()
    kernel[1, 2] = np.nan
    model.layers[0].set_weights([kernel, recurrent, bias])
    return model


def _inf_weights(keras):
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.Dense(4, name="dense_inf"), keras.layers.GRU(4)])
    kernel, bias = model.layers[0].get_weights()
    model.layers[0].set_weights([kernel, np.full_like(bias, np.inf)])
    return model


# (id, model builder, extra convert arguments, every needle the line holds, one of these (or none),
#  whether the output is exactly one line: --quant int16 without --calib also warns about calibration)
REFUSALS = [
    ("bidirectional", _bidirectional, ("--quant", "float32"), ("'bi'", "Bidirectional", "future of the sequence"),
     (), True),
    ("masking", _masking, ("--quant", "float32"), ("'mask'", "Masking", "skips time steps"), (), True),
    ("conv1d valid starts late", _conv1d, ("--quant", "float32"),
     ("'conv'", "Conv1D", "padding='valid'", "starts 2 steps after the input", "padding='causal'"), (), True),
    ("attention", _attention, ("--quant", "float32"), ("mha",),
     ("attends over the whole sequence", "single chain"), True),
    ("go_backwards", _go_backwards, ("--quant", "float32"), ("'back'", "go_backwards"), (), True),
    ("lambda names --unsafe", _lambda, ("--quant", "float32"), ("Lambda", "--unsafe"), (), True),
    ("lambda with --unsafe is unstreamable", _named_lambda, ("--quant", "float32", "--unsafe"),
     ("'lam'", "arbitrary Python"), (), True),
    ("layer norm over the time axis", _layer_norm_over_time, ("--quant", "float32"),
     ("'ln'", "LayerNormalization", "normalises over axes [1]", "time axis"), (), True),
    ("NaN weights", _nan_weights, ("--quant", "float32"),
     ("diverged/lstm_cell/kernel", "1 NaN or infinite value(s) of 48", "training diverge"), (), True),
    ("infinite weights", _inf_weights, ("--quant", "float32"), ("dense_inf/bias", "4 NaN or infinite value(s) of 4"),
     (), True),
]


@pytest.mark.parametrize("builder, extra, needles, one_of, one_line",
                         [pytest.param(*case[1:], id=case[0]) for case in REFUSALS])
def test_refused_with_the_reason(tmp_path, out, builder, extra, needles, one_of, one_line):
    model = builder(keras3())
    code, text = run("convert", save(model, tmp_path), "-o", out, *extra)
    assert code == 2, text
    if one_line:
        line = text.strip().splitlines()
        assert len(line) == 1 and line[0].startswith("error: "), text
    for needle in needles:
        assert needle in text, text
    if one_of:
        assert any(needle in text for needle in one_of), text
    assert "Traceback" not in text
    assert_untouched(out)


def test_corrupt_model_file(tmp_path, out):
    bad = tmp_path / "broken.keras"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    code, text = run("convert", bad, "-o", out)
    assert code == 2 and "broken.keras" in text and "corrupt" in text, text
    assert_untouched(out)


def test_missing_model_file(tmp_path, out):
    code, text = run("convert", tmp_path / "nope.keras", "-o", out)
    assert code == 2 and "does not exist" in text, text
    assert_untouched(out)


@pytest.fixture
def small_model(tmp_path):
    keras = keras3()
    return save(keras.Sequential([keras.Input((None, 3)), keras.layers.GRU(4, return_sequences=True)]), tmp_path)


@pytest.mark.parametrize("data, needle", [
    (np.zeros((4, 10, 5), np.float32), "5 features per step; the model takes 3"),
    (np.zeros((40, 3), np.float32), "expected (sequences, steps, 3)"),
    (np.full((2, 10, 3), np.nan, np.float32), "NaN"),
])
def test_bad_calibration_data(tmp_path, out, small_model, data, needle):
    path = tmp_path / "calib.npy"
    np.save(path, data)
    code, text = run("convert", small_model, "-o", out, "--calib", path)
    assert code == 2 and needle in text, text
    assert_untouched(out)


def test_output_folder_that_is_not_an_edgernn_one_is_refused(tmp_path, small_model):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "thesis.tex").write_text("precious")
    code, text = run("convert", small_model, "-o", other, "--quant", "float32")
    assert code == 2 and "not empty" in text, text
    assert (other / "thesis.tex").read_text() == "precious"


def test_missing_calibration_warns_loudly(tmp_path, small_model):
    code, text = run("convert", small_model, "-o", tmp_path / "o", "--quant", "int8")
    assert code == 0, text
    assert "no --calib data" in text and "synthetic" in text


def test_console_script_prints_one_line_and_no_traceback(tmp_path):
    bad = tmp_path / "broken.h5"
    bad.write_bytes(b"\x89HDF garbage")
    proc = subprocess.run([sys.executable, "-m", "edgernn", "inspect", str(bad)], capture_output=True, text=True,
                          env={**os.environ, "EDGERNN_DEBUG": "0"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and proc.stderr.startswith("error: ")
    assert "Traceback" not in proc.stderr + proc.stdout


def _state_diverges(keras):
    """A linear SimpleRNN whose state triples each step: beyond 1e30 within 70 steps."""
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.SimpleRNN(4, activation=None,
                                                                             return_sequences=True)])
    kernel, _, bias = model.layers[0].get_weights()
    model.layers[0].set_weights([np.ones_like(kernel), 3 * np.eye(4, dtype=np.float32), bias])
    return model


def _inside_overflows(keras):
    """Bounded outputs (tanh), an overflow before them: the Dense's sums reach ~1e36."""
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.Dense(4, activation="tanh", name="huge"),
                              keras.layers.GRU(4, return_sequences=True)])
    kernel, bias = model.layers[0].get_weights()
    model.layers[0].set_weights([np.full_like(kernel, 1e36), bias])
    return model


# TF's quantizer aborts the whole process on a range near float32's largest: each case runs in its own process
@pytest.mark.parametrize("builder, quant, needles", [
    (_state_diverges, "int8", ("diverges", "at step 6", "calibration sequence 0")),
    (_state_diverges, "auto", ("diverges", "calibration sequence 0")),
    (_inside_overflows, "int16", ("huge", "beyond 1e+30", "overflows")),
], ids=["state int8", "state auto", "inside int16"])
def test_a_model_that_diverges_on_the_calibration_data_is_refused(tmp_path, out, builder, quant, needles):
    path = save(builder(keras3()), tmp_path)
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).uniform(0.5, 1.5, (2, 80, 3)).astype(np.float32))
    proc = subprocess.run([sys.executable, "-m", "edgernn", "convert", str(path), "-o", str(out), "--quant", quant,
                           "--calib", str(calib)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert_untouched(out)


def _tf_keras_layer_norm(path):
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    L = tf_keras.layers
    model = tf_keras.Sequential([L.InputLayer((None, 3)), L.Dense(6), L.LayerNormalization(name="norm"),
                                 L.GRU(4, return_sequences=True)])
    model.save(path)
    return path


@pytest.mark.parametrize("quant", ["int16", "auto"])
def test_tf_keras_layer_norm_at_int16_is_refused_with_the_op(tmp_path, out, quant):
    """tf_keras' LayerNormalization has a SQUARED_DIFFERENCE, which LiteRT cannot run in int16 (TF's 16x8 quantizer
    aborted the process on it): refused before quantizing, naming the op and the layer. (Its own process: an abort
    would take pytest with it.)"""
    path = _tf_keras_layer_norm(tmp_path / "m.h5")
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).normal(size=(4, 30, 3)).astype(np.float32))
    proc = subprocess.run([sys.executable, "-m", "edgernn", "convert", str(path), "-o", str(out), "--quant", quant,
                           "--calib", str(calib)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "no int16 SQUARED_DIFFERENCE" in line and "LayerNormalization layer 'norm'" in line, line
    assert_untouched(out)
