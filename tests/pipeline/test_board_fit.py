"""``edgernn inspect``'s board fit: placement's own rule on estimates, so a model whose int8 fused LSTM
matrices stream from the AI-deck's L3 is shown as fitting (with the bytes streamed), and only a model beyond
L3, or whose on-chip part exceeds L2, as not. Numbers in, no model, no TensorFlow."""

from __future__ import annotations

import pytest

from edgernn.pipeline.inspection import board_fit, fit_on_board, stream_candidates
from edgernn.targets.board import load_board


def lstm_params(n_in: int, n_cell: int) -> int:
    return 4 * n_cell * (n_in + n_cell + 1)


TWO_LSTMS = [("lstm", 8, 256), ("lstm_1", 256, 128)]            # tests/targets/test_gvsoc_l3.py's model
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
    ("beyond L2 once the LSTM is streamed", 500_000, 128, 100, [("lstm", 8, 64)], "int8", False, 0,
     "with all 18432 B of its streamable arrays in l3"),
    ("beyond L3", lstm_params(64, 1500), 3000, 1564, [("lstm", 64, 1500)], "int8", False, 0,
     "does not fit: over budget in l3 by"),
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


@pytest.mark.parametrize("row, expected", [
    ({"name": "l", "class": "LSTM", "path": "fused", "macs_per_step": 4 * 256 * (8 + 256),
      "states": [{"name": "l.h", "size": 256}, {"name": "l.c", "size": 256}]}, [("l", 8, 256)]),
    ({"name": "l", "class": "LSTM", "path": "step", "macs_per_step": 4 * 256 * (8 + 256),
      "states": [{"name": "l.h", "size": 256}]}, []),                    # the step path: FULLY_CONNECTEDs
    ({"name": "g", "class": "GRU", "path": "step", "macs_per_step": 3 * 16 * 24, "states": [{"size": 16}]}, []),
    ({"name": "d", "class": "Dense", "path": "per step", "macs_per_step": 4096, "states": []}, []),
])
def test_the_streamable_layers_are_the_fused_lstms(row, expected):
    assert stream_candidates([row]) == expected
