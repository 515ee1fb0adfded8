"""``edgernn inspect``'s board fit: placement's own rule on estimates, so a model whose int8 weight matrices
(fused LSTMs, Dense, the step cells' gates) stream from the AI-deck's L3 is shown as fitting (with the bytes
streamed), and only a model beyond L3, or whose on-chip part exceeds L2, as not. Numbers in, no model, no
TensorFlow."""

from __future__ import annotations

import pytest

from edgernn.pipeline.inspection import board_fit, fit_on_board, stream_candidates
from edgernn.targets.board import load_board


def lstm_params(n_in: int, n_cell: int) -> int:
    return 4 * n_cell * (n_in + n_cell + 1)


def fused(name: str, n_in: int, n_cell: int) -> tuple:
    return (name, "edgernn_lstm_s8", n_cell, (4 * n_in, 4 * n_cell), (f"{name}.w_in", f"{name}.w_rec"))


def fc(name: str, n_in: int, n_out: int, array: str = "w") -> tuple:
    return (name, "edgernn_fully_connected_s8", n_out, (n_in,), (f"{name}.{array}",))


TWO_LSTMS = [fused("lstm", 8, 256), fused("lstm_1", 256, 128)]   # tests/targets/gap8/test_gvsoc_l3.py's model
TWO_LSTMS_PARAMS = lstm_params(8, 256) + lstm_params(256, 128) + 129 * 4

# (case, params, state elements, activation peak, streamable LSTMs, quant, fits, streamed bytes, verdict part)
CASES = [
    ("small, in l1", 20_000, 64, 100, [], "int8", True, 0, "fits (20000 B in l2, 20164 B in l1)"),
    # the build streams exactly this matrix (test_gvsoc_l3: l3:edgernn_step_op1_w_rec, 262144 B)
    ("beyond L2, streamed", TWO_LSTMS_PARAMS, 768, 392, TWO_LSTMS, "int8", True, 4 * 256 * 256,
     "fits, 262144 B streamed from l3 ("),
    ("beyond L2 at int16: nothing streams", TWO_LSTMS_PARAMS, 768, 392, TWO_LSTMS, "int16", False, 0,
     "does not fit: over budget in l2 by"),
    ("beyond L2, nothing streamable", 500_000, 64, 100, [], "int8", False, 0, "does not fit: over budget in l2 by"),
    ("beyond L2 once the LSTM is streamed", 500_000, 128, 100, [fused("lstm", 8, 64)], "int8", False, 0,
     "with all 18432 B of its streamable arrays in l3"),
    ("beyond L3", lstm_params(64, 1500), 3000, 1564, [fused("lstm", 64, 1500)], "int8", False, 0,
     "does not fit: over budget in l3 by"),
    # tests/targets/gap8/test_gvsoc_l3.py's camera CNN + GRU: the build streams the Dense and the GRU's w_rec
    ("camera CNN + GRU", 690_980, 256, 12_288,
     [fc("dense", 3072, 128), fc("gru", 128, 768, "w_in"), fc("gru", 256, 768, "w_rec"), fc("dense_1", 256, 4)],
     "int8", True, 3072 * 128 + 256 * 768, "fits, 589824 B streamed from l3 ("),
]


@pytest.mark.parametrize("case, params, state, act, lstms, quant, fits, streamed, verdict", CASES,
                         ids=[c[0] for c in CASES])
def test_the_ai_deck_fit_follows_placement(case, params, state, act, lstms, quant, fits, streamed, verdict):
    entry = fit_on_board(load_board("ai_deck"), params, state, act, lstms)
    got = entry["fit"][quant]
    assert (got["fits"], got["streamed_bytes"]) == (fits, streamed), got
    assert verdict in got["verdict"]
    # the keys there were before stay: the weights' home budget, each quantization's total
    assert entry["memory_bytes"] == 327680 and entry["stream_memory"] == "l3"
    assert entry["stream_memory_bytes"] == 8 * 1024 * 1024 and entry[quant] > 0
    if fits:
        assert got["memories"].get("l3", 0) == streamed
        assert got["memories"]["l2"] <= 327680 and got["memories"].get("l1", 0) <= 53248


def test_a_board_without_a_stream_memory_streams_nothing():
    entry = fit_on_board(load_board("host"), TWO_LSTMS_PARAMS, 768, 392, TWO_LSTMS)
    assert "stream_memory" not in entry
    assert all(f["fits"] and f["streamed_bytes"] == 0 for f in entry["fit"].values())


def test_every_shipped_board_has_a_verdict_for_every_quantization():
    entries = {e["board"]: e for e in board_fit(TWO_LSTMS_PARAMS, 768, 392, TWO_LSTMS)}
    assert {"ai_deck", "gvsoc_gap8", "host", "qemu_riscv32"} <= set(entries)
    for entry in entries.values():
        assert set(entry["fit"]) == {"float32", "int8", "int16"}
        assert {"board", "memory_bytes", "float32", "int8", "int16"} <= set(entry)
    assert entries["gvsoc_gap8"]["fit"]["int8"]["streamed_bytes"] == 4 * 256 * 256


@pytest.mark.parametrize("row, features, expected", [
    ({"name": "l", "class": "LSTM", "path": "fused", "macs_per_step": 4 * 256 * (8 + 256), "output_shape": [256],
      "states": [{"name": "l.h", "size": 256}, {"name": "l.c", "size": 256}]}, None, [fused("l", 8, 256)]),
    ({"name": "l", "class": "LSTM", "path": "fused", "macs_per_step": 0, "output_shape": [256],
      "states": [{"name": "l.h", "size": 256}, {"name": "l.c", "size": 256}]}, 8, [fused("l", 8, 256)]),
    # the step path: the gates' FULLY_CONNECTEDs of the input and of the state
    ({"name": "l", "class": "LSTM", "path": "step", "macs_per_step": 4 * 256 * (8 + 256), "output_shape": [256],
      "states": [{"name": "l.h", "size": 256}]}, None, [fc("l", 8, 1024, "w_in"), fc("l", 256, 1024, "w_rec")]),
    ({"name": "g", "class": "GRU", "path": "step", "macs_per_step": 0, "output_shape": [16], "states": [{"size": 16}]},
     24, [fc("g", 24, 48, "w_in"), fc("g", 16, 48, "w_rec")]),
    ({"name": "d", "class": "Dense", "path": "per step", "macs_per_step": 4096, "output_shape": [16], "states": []},
     None, [fc("d", 256, 16)]),
    ({"name": "c", "class": "CfC", "path": "step", "macs_per_step": 4096, "output_shape": [16], "states": []},
     None, []),
])
def test_the_streamable_matrices_follow_the_kernels_that_stream(row, features, expected):
    assert stream_candidates([row], features) == expected


def test_a_layer_takes_its_inputs_from_the_row_before():
    rows = [{"name": "flat", "class": "TimeDistributed", "path": "per step", "macs_per_step": 0,
             "output_shape": [12, 16, 16], "states": []},
            {"name": "d", "class": "Dense", "path": "per step", "macs_per_step": 1, "output_shape": [128],
             "states": []}]
    assert stream_candidates(rows) == [fc("d", 3072, 128)]
