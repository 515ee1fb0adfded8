"""The streamed int8 FULLY_CONNECTED and its groups (templates/kernels/edgernn_l3_fc.c: w read in chunks of
rows from the stream memory, double-buffered) give edgernn_fully_connected_s8's and
edgernn_fully_connected_group_s8's bytes, for any chunk (a multiple of 8 rows, with a last chunk shorter, or
one chunk of every row), inputs of any length, several rows, both roundings, one core or a team of threads,
and two streamed calls in turn (each prefetching the other's first chunk). The stream memory is emulated on
the host (tests/c/l3_fc_check.c)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

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
    folder = tmp_path_factory.mktemp("l3fc")
    model = keras.Sequential([keras.Input((None, 5)), keras.layers.SimpleRNN(6), keras.layers.Dense(2)])
    model.save(folder / "m.keras")
    build_model(str(folder / "m.keras"), folder / "out", board="host", quant="int8", mode="step",
                calib=trajectories(4, 30, 5, 1))
    fw = folder / "out" / "firmware"
    kernels = templates_dir() / "kernels"
    for name in ("edgernn_l3_fc.c", "edgernn_l3_stream.c", "edgernn_l3_stream.h"):
        shutil.copyfile(kernels / name, fw / name)
    exe = folder / "l3_fc_check"
    command = ["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-DEDGERNN_THREADS=3", "-pthread",
               "-I", str(fw), str(TESTS / "c" / "l3_fc_check.c"), str(fw / "edgernn_l3_fc.c"),
               str(fw / "edgernn_l3_stream.c"), str(fw / "edgernn_team.c"),
               "-lm", "-o", str(exe)]
    subprocess.run(command, check=True)
    return exe


# (n_in, n_out, chunk rows, team, rows, group ops (0: a FULLY_CONNECTED), rounds); the checker's team has 3
# workers, so a team's chunk of 8 or 16 rows is split by inputs, one of 24 or more by rows
CASES = [
    (21, 44, 8, 0, 1, 0, 3),        # 44 rows: chunks of 8, the last of 4 (a 4-row block) after 5 whole ones
    (21, 44, 16, 1, 1, 0, 3),
    (64, 37, 24, 1, 1, 0, 2),       # a last chunk of 13: a 8-row block, a 4-row one and a single row
    (64, 37, 16, 1, 1, 0, 2),       # the same split by inputs
    (3, 17, 8, 0, 3, 0, 2),         # three rows share each chunk
    (3, 17, 8, 1, 3, 0, 2),         # by inputs: 3 inputs, so every slice but the last is empty
    (251, 29, 8, 1, 1, 0, 3),       # by inputs: 62 groups of 4 in 8 slices of 7 or 8, and 3 inputs after
    (256, 64, 8, 1, 1, 0, 2),
    (128, 192, 64, 1, 2, 0, 2),
    (50, 40, 48, 1, 1, 0, 4),       # one chunk holds every row: each call prefetches the other's only chunk
    (33, 40, 8, 1, 1, 2, 3),        # a group of 2 ops: an op boundary inside a chunk (row 20)
    (16, 64, 16, 0, 1, 4, 3),       # a group of 4: op boundaries on chunk boundaries
    (40, 30, 8, 1, 1, 3, 2),
]


@pytest.mark.parametrize("n_in,n_out,chunk,team,rows,group,rounds", CASES)
def test_streamed_fully_connected_gives_the_kernels_bytes(checker, n_in, n_out, chunk, team, rows, group, rounds):
    out = subprocess.run([str(checker), *map(str, (n_in, n_out, chunk, team, rows, group, rounds))],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["mismatches", "0"]
