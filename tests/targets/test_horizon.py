"""Quantization judged where the model runs: over a horizon of calibration windows chained into streams.

Users calibrate on short windows and run long streams. A sigmoid LSTM read once at the end (tests/support/
trained.py ``lstm_final_head``), calibrated on 64 windows of 40 steps and run over 200: judged on the windows alone
(``--horizon 40``, edgernn before), --quant auto chose an all-int8 plan that met the budget there (0.018) and
missed it on the stream (0.073): its cell state and output drift past the windows' ranges (c 4.8 -> 5.5), and the
int8 head's output is one part in 256 of its range. With the default horizon (five windows) the ranges are the
streams', the plan is checked on them, and the head is 16-bit: the stream meets the budget.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from edgernn.errors import EdgeRNNError
from edgernn.testing import trained
from edgernn.tflite.quantize import Calibration, check_horizon


def test_streams_chain_the_windows_in_order_carrying_the_state():
    windows = np.arange(64 * 40, dtype=np.float32).reshape(64, 40, 1)
    cal = Calibration(windows, "array")
    streams = cal.streams()
    assert cal.horizon_steps == 200 and streams.shape == (12, 200, 1)
    assert np.array_equal(streams[1, :, 0], np.arange(5 * 40, 10 * 40))     # windows 5..9 back to back
    assert cal.describe()["horizon_streams"] == 12


@pytest.mark.parametrize("shape, horizon, expected", [
    ((2, 40, 3), None, (1, 200, 3)),       # too few windows: taken again from the first
    ((8, 200, 3), 150, None),              # windows as long as the horizon: no streams
    ((8, 200, 3), 200, None),
    ((10, 30, 2), 100, (2, 100, 2)),       # a horizon not a whole number of windows: cut
])
def test_stream_shapes(shape, horizon, expected):
    streams = Calibration(np.zeros(shape, np.float32), "array", horizon).streams()
    assert (None if streams is None else streams.shape) == expected


@pytest.mark.parametrize("value, error", [(0, "at least 1 step"), (-5, "at least 1 step"), ("x", "whole number"),
                                          (2.5, "whole number")])
def test_a_bad_horizon_is_refused_in_one_line(value, error):
    with pytest.raises(EdgeRNNError, match=error):
        check_horizon(value)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The sigmoid LSTM with its last-step head, built for host at --quant auto with the default horizon and with a
    horizon of one window."""
    from edgernn.pipeline.build import build_model

    made = {}
    calib = trained.leaky_integral(64, 40, 2)[0]
    for label, horizon in (("default", None), ("one_window", 40)):
        out = tmp_path_factory.mktemp(label) / "out"
        with contextlib.redirect_stdout(io.StringIO()):
            build_model(str(trained.lstm_final_head()), out, board="host", quant="auto", calib=calib, mode="step",
                        horizon=horizon)
        made[label] = out
    return made


@pytest.mark.slow
@pytest.mark.toolchain
def test_a_sigmoid_lstm_read_at_the_end_meets_its_budget_over_a_stream_five_windows_long(builds, tmp_path):
    import json

    from edgernn.pipeline.inspection import inspect_build
    from edgernn.validate.run import validate

    out = builds["default"]
    manifest = json.loads((out / "manifest.json").read_text())
    cal = manifest["calibration"]
    assert (cal["horizon"], cal["horizon_streams"]) == (200, 12)
    # the cell state's range is the streams', past the windows'
    c = cal["horizon_widened"]["lstm.c"]
    assert c["horizon"][1] > c["windows"][1]
    held = manifest["precision"]["held_out"]
    assert held["horizon"] and held["steps"] == 200 and held["l2r"] <= 0.02
    assert manifest["quantization_error"]["horizon"]["l2r"] <= 0.02
    assert manifest["precision"]["head"]["dtype"] == "int16" and manifest["head"]["input"]["dtype"] == "int8"
    assert inspect_build(out)["horizon"]["widened"]["lstm.c"] == c
    report = validate(out, data=trained.leaky_integral(8, 200, 3)[0], json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert report["pass"] and ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["float"]["l2r"] <= 0.02, report["float"]
    assert report["error_budget"]["met"] and not report["error_budget"]["beyond_horizon"]


@pytest.mark.slow
@pytest.mark.toolchain
def test_a_plan_judged_on_one_window_misses_the_stream_and_validate_says_so(builds, tmp_path):
    from edgernn.validate.run import validate

    report = validate(builds["one_window"], data=trained.leaky_integral(8, 200, 3)[0],
                      json_path=tmp_path / "report.json")
    assert report["pass"] and report["reference"]["mismatches"] == 0     # parity holds
    budget = report["error_budget"]
    assert not budget["met"] and budget["beyond_horizon"] and budget["horizon"] == 40, budget
