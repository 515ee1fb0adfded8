"""One split by units (edgernn/backend/cells.py): a recurrent cell's gate rows and their element-wise finish in
one team split, and the state's copy back by words where it is long. On a board that splits by cost (GAP8's rule, here on the host with a POSIX thread team of 1, 2,
3 and 8 workers), the joined runs give the interpreter's bytes for every shape: units a multiple of the FC's
block of 8 rows or not, odd sizes, GRUs (both reset placements), a SimpleRNN and a stacked LSTM; and the check
that refuses a run whose units would read each other's bytes is exercised on its own.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from edgernn.testing import backend_harness as H
from edgernn.testing import zoo

pytestmark = pytest.mark.slow

WORKERS = (1, 2, 3, 8)

# the host, with GAP8's sharing rule: by cost over 8 workers (boards/ai_deck.toml's split_cycles)
COST_BOARD = """extends = "host"
name = "host_by_cost"
description = "the host with GAP8's sharing rule (tests/backend/test_cells.py)"

[parallel]
workers = 8
min_count = 8
split_cycles = 150
"""


def _lstm(units: int, features: int):
    def make():
        return zoo.lstm_dense(units, features, 3, f"cell_lstm{units}", 1)
    return make


def _gru(units: int, reset_after: bool):
    def make():
        keras = zoo._keras(2)
        L = keras.layers
        return keras.Sequential([keras.Input((None, 5)), L.GRU(units, reset_after=reset_after, return_sequences=True),
                                 L.Dense(2)], name=f"cell_gru{units}")
    return make


def _simple_rnn():
    keras = zoo._keras(3)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 4)), L.SimpleRNN(24, return_sequences=True), L.Dense(2)],
                            name="cell_rnn")


def _stacked():
    keras = zoo._keras(4)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 3)), L.LSTM(16, return_sequences=True),
                             L.LSTM(40, return_sequences=True), L.Dense(1)], name="cell_stack")


# name: (model, whether a cell split must appear in its schedule)
MODELS = {
    "lstm64": (_lstm(64, 6), True),     # 8 units a worker, each its 4 gates' rows of both FULLY_CONNECTEDs
    "lstm40": (_lstm(40, 3), True),     # 5 blocks of 8 units over 8 workers
    "lstm13": (_lstm(13, 7), None),     # units off the FC's 8-row blocks: its element-wise loops may join
    "lstm24": (_lstm(24, 1), None),
    "gru20": (_gru(20, True), None),
    "gru32": (_gru(32, False), None),
    "rnn24": (_simple_rnn, None),
    "stacked": (_stacked, None),
}


@pytest.fixture(scope="module")
def board_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cells_board") / "host_by_cost.toml"
    path.write_text(COST_BOARD)
    return str(path)


@pytest.mark.toolchain
@pytest.mark.parametrize("name", sorted(MODELS))
def test_cell_splits_give_the_interpreters_bytes(name, board_file, tmp_path):
    from edgernn.pipeline.convert import convert

    make, must_split = MODELS[name]
    out = tmp_path / "out"
    model = make()
    n_in = zoo.features_of(model)
    with contextlib.redirect_stdout(io.StringIO()):
        convert(model, out, quant="int8", mode="step", calib=zoo.trajectories(4, 40, n_in, 5))
    xq = H.quantize_x(out, zoo.trajectories(1, 50, n_in, seed=6)[0] * 1.5)
    ref, _ = H.reference_bytes(out, xq)
    results = {}
    for n in WORKERS:
        b = H.build(out, board=board_file, cflags=["-O2", f"-DEDGERNN_THREADS={n}", "-pthread"], name=f"driver_t{n}")
        model_c = (out / "firmware" / "model.c").read_text()
        if must_split:
            assert "one split by units" in model_c
        # a state of 64 bytes or more goes back to its slot by words (firmware.WORD_COPY_MIN_BYTES), a short one by bytes
        assert ("edgernn_move_words(EDGERNN_STATE" in model_c) == (name == "lstm64")
        if name.startswith("lstm"):
            # the cell state is written in place by the gates' loop (codegen.state_in_place), h is copied
            assert sum(model_c.count(f"edgernn_move_{by}(EDGERNN_STATE") for by in ("bytes", "words")) == 1
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
        results[n] = got
        assert H.compare(got, ref, "int8")["mismatches"] == 0, f"{n} workers differ from the interpreter"
    assert all(np.array_equal(results[1], results[n]) for n in WORKERS)


def test_a_run_whose_units_read_each_others_bytes_is_refused():
    """An FC that reads the whole of what an earlier op of the run wrote cannot share its split: any unit
    reads every other unit's bytes. A loop that reads only its own unit's elements can."""
    from types import SimpleNamespace

    from edgernn.backend import cells, fusion
    from edgernn.backend.lowering import Call
    from edgernn.backend.values import ARENA, STATE, ConstArg, Enum, Place, TensorArg

    tensors = {0: SimpleNamespace(size=8), 1: SimpleNamespace(size=16), 2: SimpleNamespace(size=16),
               3: SimpleNamespace(size=16)}
    places = {0: Place(STATE, "int8_t", 0), 1: Place(ARENA, "int8_t", 0), 2: Place(ARENA, "int8_t", 16),
              3: Place(ARENA, "int8_t", 32)}
    ops = {0: SimpleNamespace(outputs=[1]), 1: SimpleNamespace(outputs=[2]), 2: SimpleNamespace(outputs=[3])}
    graph = SimpleNamespace(graph=SimpleNamespace(tensors=tensors, operators=ops), places=places, prefix="t")

    def fc(op, src, dst):
        args = [TensorArg(src), ConstArg("w"), ConstArg("b"), ConstArg("m"), ConstArg("s"), Enum("EDGERNN_ROUND_ONCE"),
                0, -128, 127, 1, tensors[src].size, 16, TensorArg(dst)]
        return Call(op, "FULLY_CONNECTED", "edgernn_team_fully_connected_s8", args)

    first, second = fc(0, 0, 1), fc(1, 1, 2)
    assert cells.valid(graph, [first]) == (16, 8)
    assert cells.valid(graph, [first, second]) is None          # op 1 reads all of op 0's 16 rows
    loop = fusion.FusedCall(2, "LOGISTIC", "t_fused2", [], members=[
        Call(2, "LOGISTIC", "edgernn_lut_s8", [ConstArg("lut"), TensorArg(1), 16, TensorArg(3)])],
        n=16, stored={3}, team=True)
    assert cells.valid(graph, [first, loop]) == (16, 8)


def test_a_sum_by_steps_joins_the_loop_whose_elements_it_reduces():
    """A SUM over r of in[r * stride + i] (an LTC's synapses onto neuron i) reads only its unit's elements of a
    loop laid out gate by gate; taken as read whole it would cut the run."""
    from types import SimpleNamespace

    from edgernn.backend import cells, fusion
    from edgernn.backend.lowering import Call
    from edgernn.backend.values import ARENA, STATE, ConstArg, Place, TensorArg

    tensors = {0: SimpleNamespace(size=64), 1: SimpleNamespace(size=64), 2: SimpleNamespace(size=16)}
    places = {0: Place(STATE, "int8_t", 0), 1: Place(ARENA, "int8_t", 0), 2: Place(ARENA, "int8_t", 64)}
    ops = {0: SimpleNamespace(outputs=[1]), 1: SimpleNamespace(outputs=[2])}
    graph = SimpleNamespace(graph=SimpleNamespace(tensors=tensors, operators=ops), places=places, prefix="t")
    loop = fusion.FusedCall(0, "LOGISTIC", "t_fused0", [], members=[
        Call(0, "LOGISTIC", "edgernn_lut_s8", [ConstArg("lut"), TensorArg(0), 64, TensorArg(1)])],
        n=64, stored={1}, team=True)
    total = Call(1, "SUM", "edgernn_team_sum_thresholds_s8",
                 [TensorArg(1), 1, 4, 16, 16, ConstArg("thresholds"), 255, -128, TensorArg(2)])
    assert cells.valid(graph, [loop, total]) == (16, 1)
    # a stride that mixes units: output i would sum in[r * 8 + i], elements of units i and i + 8
    mixed = Call(1, "SUM", "edgernn_team_sum_thresholds_s8",
                 [TensorArg(1), 1, 4, 16, 8, ConstArg("thresholds"), 255, -128, TensorArg(2)])
    assert cells.valid(graph, [loop, mixed]) is None


# each case: the schedule (a function of the calls below) and whether the new state is assembled in its slot
AFTER_READS = {
    "every read before the first write": (lambda k: [k["read_old"], k["part_in_new"], k["concat"]], True),
    "a part written before a read of the old state": (lambda k: [k["part_in_new"], k["read_old"], k["concat"]], False),
    "a read of a slice of the old state after the concat": (lambda k: [k["concat"], k["read_slice"]], False),
    "the concat itself reads the old state": (lambda k: [k["concat_old"]], False),
    "not a CONCATENATION's": (lambda k: [k["read_old"], k["lut_new"]], False),
}


@pytest.mark.parametrize("case", list(AFTER_READS))
def test_a_concatenated_new_state_is_assembled_in_its_slot_only_after_every_read_of_the_old(case):
    """codegen.state_after_reads: an NCP cell's new state, a CONCATENATION of its layers' states (tensor 2), goes
    straight into the state's slot when every op that reads the old state (tensor 0, or its slice 5) comes before
    the first that writes the new one or a part of it (tensor 4, placed in it at 14)."""
    from edgernn.backend.codegen import StateSlot, state_after_reads
    from edgernn.backend.lowering import Call
    from edgernn.backend.values import ConstArg, TensorArg

    def lut(op, name, src, dst):
        return Call(op, name, "edgernn_lut_s8", [ConstArg("lut"), TensorArg(src), 2, TensorArg(dst)])

    def concat(src):
        return Call(7, "CONCATENATION", "edgernn_copy_runs", [ConstArg("runs"), 1, 1, TensorArg(src), TensorArg(2)])

    calls = {"read_old": lut(1, "LOGISTIC", 0, 3), "part_in_new": lut(3, "LOGISTIC", 3, 4), "concat": concat(3),
             "read_slice": lut(8, "LOGISTIC", 5, 6), "concat_old": concat(0), "lut_new": lut(6, "LOGISTIC", 3, 2)}
    aliases = {4: (2, 14), 5: (0, 9)}     # tensor 4 lies in the new state, 5 in the old (a slice)
    slot = StateSlot("h", 0, 2, "int8_t", 0, 16, 16, 0)
    schedule, expected = AFTER_READS[case]
    assert state_after_reads(slot, schedule(calls), aliases, 9) is expected
    if expected:
        assert not state_after_reads(slot, schedule(calls), aliases, 2)     # the step's y is no state


def test_a_new_state_is_written_in_place_only_where_each_element_is_read_first():
    """codegen.state_in_place: a fused loop that reads the old state element by element before it stores the new
    one writes it in the state's slot (no copy); not when a member reads the old state after the store, nor when
    another op reads it, nor when the new state is not a fused loop's."""
    from edgernn.backend import fusion
    from edgernn.backend.codegen import StateSlot, state_in_place
    from edgernn.backend.lowering import Call
    from edgernn.backend.values import ConstArg, TensorArg

    def lut(op, src, dst):
        return Call(op, "LOGISTIC", "edgernn_lut_s8", [ConstArg("lut"), TensorArg(src), 16, TensorArg(dst)])

    def loop(*members):
        return fusion.FusedCall(9, "LOGISTIC", "t_fused9", [], members=list(members), n=16,
                                stored={fusion.call_output(m) for m in members}, team=True)

    slot = StateSlot("c", 0, 2, "int8_t", 0, 16, 16, 0)     # old state tensor 0, new state tensor 2
    reader = Call(5, "FULLY_CONNECTED", "edgernn_fully_connected_s8", [TensorArg(0), TensorArg(7)])
    assert state_in_place(slot, [loop(lut(1, 0, 1), lut(2, 1, 2))], {}, 8)
    assert not state_in_place(slot, [loop(lut(1, 0, 1), lut(2, 1, 2), lut(3, 0, 3))], {}, 8)   # read after
    assert not state_in_place(slot, [reader, loop(lut(1, 0, 1), lut(2, 1, 2))], {}, 8)          # another reader
    assert not state_in_place(slot, [lut(2, 0, 2)], {}, 8)                                      # no fused loop
    assert not state_in_place(slot, [loop(lut(1, 0, 1), lut(2, 1, 2))], {}, 2)                 # the step's y
