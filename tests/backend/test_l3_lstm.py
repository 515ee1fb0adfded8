"""The streamed int8 LSTM (templates/kernels/edgernn_l3_lstm.c: gate matrices read in chunks of units from the
stream memory, double-buffered) gives edgernn_lstm_s8's bytes, for any chunk, any of the matrices streamed,
one core or a team of threads, several steps per call, and two streamed calls in turn (each prefetching the
other's first chunk). The stream memory is emulated on the host (tests/c/l3_lstm_check.c)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
N_IN, UNITS = 5, 22         # 22 units: a last chunk shorter than the others for chunks of 4, 8, 12 and 16

pytestmark = pytest.mark.toolchain


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    from conftest import require_tools

    require_tools("gcc")
    import keras

    from edgernn.pipeline.build import build_model
    from edgernn.resources import templates_dir
    from edgernn.testing.zoo import trajectories

    keras.utils.set_random_seed(0)
    folder = tmp_path_factory.mktemp("l3lstm")
    model = keras.Sequential([keras.Input((None, N_IN)), keras.layers.LSTM(UNITS), keras.layers.Dense(2)])
    model.save(folder / "m.keras")
    build_model(str(folder / "m.keras"), folder / "out", board="host", quant="int8", mode="fused",
                calib=trajectories(4, 30, N_IN, 1))
    fw = folder / "out" / "firmware"
    weights = (fw / "weights.h").read_text()
    prefix = re.search(r"extern const int8_t (edgernn_step_op\d+)_w_rec\[", weights).group(1)
    kernels = templates_dir() / "kernels"
    for name in ("edgernn_l3_lstm.c", "edgernn_l3_stream.c", "edgernn_l3_stream.h"):
        shutil.copyfile(kernels / name, fw / name)
    exe = folder / "l3_lstm_check"
    defines = {"LSTM_P": f"{prefix}_p", "LSTM_W_IN": f"{prefix}_w_in", "LSTM_W_REC": f"{prefix}_w_rec",
               "LSTM_BIAS_IN": f"{prefix}_bias_in", "LSTM_BIAS_REC": f"{prefix}_bias_rec"}
    command = ["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-DEDGERNN_THREADS=3", "-pthread",
               *[f"-D{k}={v}" for k, v in defines.items()], "-I", str(fw), str(TESTS / "c" / "l3_lstm_check.c"),
               str(fw / "edgernn_l3_lstm.c"), str(fw / "edgernn_l3_stream.c"), str(fw / "weights.c"), str(fw / "edgernn_team.c"), "-lm",
               "-o", str(exe)]
    subprocess.run(command, check=True)
    return exe


# (chunk units, streamed: 1 w_in, 2 w_rec, 3 both, team, steps per call, rounds)
CASES = [
    (4, 3, 0, 1, 3),
    (8, 3, 1, 1, 3),
    (12, 2, 1, 2, 2),
    (16, 1, 0, 3, 2),
    (24, 3, 1, 1, 4),       # one chunk holds every unit: each call prefetches the other's only chunk
    (4, 2, 1, 4, 2),
]


@pytest.mark.parametrize("chunk,streamed,team,steps,rounds", CASES)
def test_streamed_lstm_gives_the_kernels_bytes(checker, chunk, streamed, team, steps, rounds):
    out = subprocess.run([str(checker), str(chunk), str(streamed), str(team), str(steps), str(rounds)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["mismatches", "0"]
