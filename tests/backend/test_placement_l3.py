"""Placement's L3 tier: which weight arrays go to the stream memory, and when a model is refused."""

from __future__ import annotations

import copy

import pytest

from edgernn.backend.placement import MemoryBudgetError, place
from edgernn.targets.board import Board, load_board

KIB = 1024
L2_BUDGET = 320 * KIB                     # ai_deck: 512 KiB less 192 KiB reserved


def _deck(l3_bytes: int | None = None, stream: bool = True) -> Board:
    deck = load_board("ai_deck")
    data = copy.deepcopy(deck.data)
    for mem in data["memory"]:
        if mem["name"] == "l3" and l3_bytes is not None:
            mem["size"] = l3_bytes
    if not stream:
        data["placement"].pop("weights_stream_memory")
    return Board(deck.name, deck.description, deck.path, data)


# (case, weights outside the arrays, streamable arrays, L3 size, expected L3 arrays or the memory refused)
CASES = [
    ("fits L2: nothing moves", 100 * KIB, {"a": 100 * KIB, "b": 50 * KIB}, None, []),
    ("one array is enough: the largest", 100 * KIB, {"a": 150 * KIB, "b": 200 * KIB}, None, ["b"]),
    ("two arrays, the largest first", 250 * KIB, {"a": 40 * KIB, "b": 60 * KIB, "c": 50 * KIB}, None, ["b", "c"]),
    ("ties broken by name", 250 * KIB, {"y": 64 * KIB, "x": 64 * KIB}, None, ["x"]),
    ("the rest alone is over L2", 330 * KIB, {"a": 100 * KIB}, None, "l2"),
    ("streamed arrays beyond L3", 100 * KIB, {"a": 300 * KIB}, 256 * KIB, "l3"),
]


@pytest.mark.parametrize("case,rest,arrays,l3,expected", CASES, ids=[c[0] for c in CASES])
def test_the_largest_streamable_arrays_go_to_l3(case, rest, arrays, l3, expected):
    board = _deck(l3)
    total = rest + sum(arrays.values())
    if isinstance(expected, str):
        with pytest.raises(MemoryBudgetError, match=rf"over budget in {expected} by \d+ B") as err:
            place(board, weight_bytes=total, state_bytes=64, arena_bytes=2048, streamable=arrays)
        table = "\n".join(err.value.details)
        assert "overflow" in table
        return
    p = place(board, weight_bytes=total, state_bytes=64, arena_bytes=2048, streamable=arrays)
    assert sorted(p.streamed) == sorted(expected)
    assert p.items["weights"] == ("l2", total - sum(arrays[n] for n in expected))
    for name in expected:
        assert p.items[f"l3:{name}"] == ("l3", arrays[name])
    assert p.used("l2") <= L2_BUDGET and p.items["arena"][0] == "l1" and p.items["state"][0] == "l1"
    table = "\n".join(p.table())
    for name in expected:
        assert f"l3:{name}" in table
    described = p.as_dict()
    if expected:
        assert described["streamed"] == {"memory": "l3", "arrays": {n: arrays[n] for n in p.streamed},
                                         "bytes": sum(arrays[n] for n in expected)}
    else:
        assert "streamed" not in described and not p.stream_memory


# (case, weights outside the arrays, streamable arrays, those streamed always, expected L3 arrays): an array that
# its op reads faster in chunks (a conv filter beyond the DMA tiles) streams whether L2 has room or not, first
ALWAYS = [
    ("L2 has room: only it moves", 50 * KIB, {"a": 40 * KIB, "w": 36 * KIB}, {"w": 36 * KIB}, ["w"]),
    ("over L2: it first, then the largest", 250 * KIB, {"a": 60 * KIB, "b": 50 * KIB, "w": 30 * KIB},
     {"w": 30 * KIB}, ["a", "w"]),
    ("not streamable: ignored", 50 * KIB, {"a": 40 * KIB}, {"x": 36 * KIB}, []),
]


@pytest.mark.parametrize("case,rest,arrays,always,expected", ALWAYS, ids=[c[0] for c in ALWAYS])
def test_arrays_streamed_always_move_first(case, rest, arrays, always, expected):
    total = rest + sum(arrays.values())
    p = place(_deck(), weight_bytes=total, state_bytes=64, arena_bytes=2048, streamable=arrays,
              stream_always=always)
    assert sorted(p.streamed) == sorted(expected)
    assert p.items["weights"] == ("l2", total - sum(arrays[n] for n in expected))
    assert p.used("l2") <= L2_BUDGET


def test_without_a_stream_memory_a_model_over_l2_is_refused():
    with pytest.raises(MemoryBudgetError, match=r"over budget in l2"):
        place(_deck(stream=False), weight_bytes=400 * KIB, state_bytes=64, arena_bytes=2048,
              streamable={"a": 300 * KIB})


def test_boards_without_a_stream_memory_place_as_before():
    host = load_board("host")
    p = place(host, weight_bytes=1000, state_bytes=64, arena_bytes=256, streamable={"a": 600})
    assert not p.streamed and "l3:a" not in p.items


# (kernel, units, bytes of a unit per matrix, matrices streamed, units per chunk): the most multiples of the
# grain (LSTM 4 units, FULLY_CONNECTED 8 rows) within 16 KiB of streamed rows, one grain at least, no more
# than the call's units rounded up to the grain
CHUNKS = [
    ("edgernn_lstm_s8", 256, (4 * 8, 4 * 256), (False, True), 16),
    ("edgernn_lstm_s8", 256, (4 * 8, 4 * 256), (True, True), 12),
    ("edgernn_lstm_s8", 6, (4 * 5, 4 * 6), (True, True), 8),
    ("edgernn_fully_connected_s8", 128, (3072,), (True,), 8),      # one 8-row block is 24 KiB: a grain anyway
    ("edgernn_fully_connected_s8", 768, (256,), (True,), 64),
    ("edgernn_fully_connected_s8", 192, (128,), (True,), 128),
    ("edgernn_fully_connected_s8", 20, (64,), (True,), 24),
    ("edgernn_team_fully_connected_group_s8", 40, (33,), (True,), 40),
]


@pytest.mark.parametrize("kernel,units,unit_bytes,streamed,expected", CHUNKS)
def test_chunks_are_whole_grains_within_the_chunk_bytes(kernel, units, unit_bytes, streamed, expected):
    from edgernn.backend import streaming

    how = streaming.STREAMED[kernel]
    assert streaming.chunk_units(how, units, unit_bytes, streamed) == expected
    assert expected % how.grain == 0
