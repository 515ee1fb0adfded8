"""Fused element-wise loops (edgernn/backend/fusion.py): which calls a loop takes in, what it stores, and
that a fused build gives the bytes of the unfused one (each is also held against the LiteRT interpreter by
test_backend_c.py's table, whose int8 GRU, CfC and LTC models are fused).

The fusion shapes each test asserts are there: chains, trees (a value read by two members), an intermediate
read outside its loop (stored), a new state written by a loop, a broadcasting loop, and a call moved up
into a loop that had closed.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil

import numpy as np
import pytest

from edgernn.backend import cost, fusion, fusion_loop
from edgernn.backend.codegen import lower_graph, state_layout
from edgernn.backend.kernels import call_args, kernel
from edgernn.backend.lowering import Call, ConstArray, ConstStruct
from edgernn.backend.reader import read_tflite
from edgernn.backend.values import ARENA, ConstArg, Place, SizeOf, StructArg, TensorArg
from edgernn.testing import backend_harness as H
from edgernn.testing import zoo


def gru_reset_before(seed: int = 0):
    """GRU(16, reset_after=False) then Dense(1), 6 inputs: the benchmark GRU of the fusion work."""
    keras = zoo._keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 6)), L.GRU(16, reset_after=False, return_sequences=True),
                             L.Dense(1)], name="gru_reset_before")


# name -> (model, quantization); gru16: int16 ADD/SUB, MUL, LOGISTIC and TANH in one loop; ltc16: int16
# broadcasting loops and the RSQRT (a 513-entry int16 table) of its divisions
MODELS = {"gru": (gru_reset_before, "int8"), "cfc": (zoo.cfc_default, "int8"), "ltc": (zoo.ltc_wired, "int8"),
          "gru16": (gru_reset_before, "int16"), "ltc16": (zoo.ltc_wired, "int16")}
# the int16 models' element functions in their loops
ELEMENTS16 = {"gru16": ("edgernn_tanh_s16_elem(", "edgernn_logistic_s16_elem(", "edgernn_mul_words_elem(",
                        "edgernn_addsub_words_elem("),
              "ltc16": ("edgernn_logistic_s16_elem(", "edgernn_lut_lookup_s16(", "edgernn_mul_words_elem(",
                        "edgernn_addsub_words_elem(")}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from edgernn.pipeline.convert import convert

    cache = {}

    def get(name: str):
        if name not in cache:
            out = tmp_path_factory.mktemp(f"fusion_{name}") / "out"
            build, quant = MODELS[name]
            with contextlib.redirect_stdout(io.StringIO()):
                convert(build(), out, quant=quant, mode="step")
            cache[name] = out
        return cache[name]

    return get


def _lowered(folder):
    from edgernn.outdir import read_manifest
    from edgernn.backend import state_keys

    graph = read_tflite(folder / "step.tflite")
    states = state_layout(graph, state_keys(graph, read_manifest(folder).states, "x"))
    return graph, states, lower_graph(graph, "edgernn_step", "x", "y", states)


def _fused(rendered) -> list[fusion.FusedCall]:
    return [c for c in rendered.calls if isinstance(c, fusion.FusedCall)]


def _register_reads(call: fusion.FusedCall) -> dict[int, int]:
    """member output -> how many members read it"""
    outs = {fusion.call_output(m) for m in call.members}
    counts: dict[int, int] = {}
    for m in call.members:
        for t in fusion.tensor_inputs(m):
            if t in outs:
                counts[t] = counts.get(t, 0) + 1
    return counts


@pytest.mark.toolchain
def test_gru_loops_keep_intermediates_in_registers_and_store_what_is_read_later(converted):
    graph, states, g = _lowered(converted("gru"))
    fused = _fused(g)
    assert len(fused) >= 2
    new_state = {s.out_tensor for s in states}
    later_reads = {t for c in g.calls if not isinstance(c, fusion.FusedCall) for t in fusion.reads(c)}
    for call in fused:
        outs = {fusion.call_output(m) for m in call.members}
        # stored: exactly the outputs read after the loop (by a plain call, another loop, as a state)
        other_loops = {t for c in fused if c is not call for m in c.members for t in fusion.tensor_inputs(m)}
        assert call.stored == {t for t in outs if t in later_reads | other_loops | new_state
                               | set(graph.outputs.values())}
        assert outs - call.stored, "a loop that stores every value saves nothing"
    # the shapes: a tree (one value read by two members), an intermediate read outside, the new state
    assert any(n >= 2 for c in fused for n in _register_reads(c).values())
    assert any(c.stored - new_state for c in fused)
    assert any(c.stored & new_state for c in fused)
    # a value kept in a register has no place in the arena
    kept = fusion.unstored(g.calls)
    assert kept and not kept & set(g.plan.offsets)


@pytest.mark.toolchain
def test_ltc_loops_broadcast_and_take_in_a_call_after_they_closed(converted):
    _, _, g = _lowered(converted("ltc"))
    fused = _fused(g)
    broadcast = [c for c in fused if c.dims is not None]
    assert broadcast and all(int(np.prod(c.dims)) == c.n for c in broadcast)
    assert any(m.fn in fusion.BROADCAST for c in broadcast for m in c.members)
    # moved up: a member that came after the call the loop runs at
    assert any(m.op_index > c.op_index for c in fused for m in c.members)
    assert any(m.fn == "edgernn_div_s8" for c in fused for m in c.members)
    # schedule order is op order: the arena plan's steps run forward
    assert [c.op_index for c in g.calls] == sorted(c.op_index for c in g.calls)


@pytest.mark.toolchain
@pytest.mark.parametrize("name", list(MODELS))
def test_fused_build_gives_the_unfused_bytes(converted, tmp_path, monkeypatch, name):
    """Fused and unfused builds, over a trajectory and over inputs wider than calibration: the same bytes,
    and the interpreter's."""
    fused_dir = tmp_path / "fused"
    plain_dir = tmp_path / "plain"
    shutil.copytree(converted(name), fused_dir)
    shutil.copytree(converted(name), plain_dir)
    fused_build = H.build(fused_dir)
    model_c = (fused_dir / "firmware" / "model.c").read_text()
    assert "_fused" in model_c
    # the LTC's synapse loops store the elements its wiring's mask zeroes without computing them
    assert bool(re.search(r"if \(in\d+\[i\] == -?\d+\) \{", model_c)) == name.startswith("ltc")
    if MODELS[name][1] == "int16":      # loads and stores of 16 bits, the int16 element functions
        assert "int16_t *const out0" in model_c
        assert all(f in model_c for f in ELEMENTS16[name])
        # every rescale of MUL and ADD/SUB in 32-bit words (their bounds hold for any int16 input), every
        # int16 table op in a loop
        assert "edgernn_mul_elem(" not in model_c and "edgernn_addsub_elem(" not in model_c
        assert "edgernn_lut_s16(" not in model_c
    monkeypatch.setattr(fusion, "ENABLED", False)
    plain_build = H.build(plain_dir)
    assert "_fused" not in (plain_dir / "firmware" / "model.c").read_text()
    runner = H.load_interpreter(fused_dir / "step.tflite").get_signature_runner("serving_default")
    n = int(runner.get_input_details()["x"]["shape"][-1])
    for xs in (zoo.trajectories(1, 100, n, seed=4)[0],
               np.random.default_rng(9).normal(0.0, 2.0, size=(80, n)).astype(np.float32)):
        xq = H.quantize_x(fused_dir, xs)
        ref, _ = H.reference_bytes(fused_dir, xq)
        got, _ = H.run_driver(fused_build.exe, xq, ref.shape[1], fused_dir)
        plain, _ = H.run_driver(plain_build.exe, xq, ref.shape[1], plain_dir)
        assert np.array_equal(got, plain)
        assert H.compare(got, ref, MODELS[name][1])["mismatches"] == 0


# board, model, whether its loops read a copy of the sigmoid table: the LTC's loops look it up 888 times a step
# (six synapse loops of 144 elements, the sensory ones), the GRU's gates 48 times (below
# fusion.SIGMOID16_COPY_ELEMENTS)
SIGMOID_COPIES = [("host", "ltc16", False), ("ai_deck", "ltc16", True), ("ai_deck", "gru16", False)]


@pytest.mark.parametrize("board, name, fast", SIGMOID_COPIES)
def test_int16_sigmoid_loops_read_a_copy_of_the_table_in_fast_memory_where_the_weights_are(converted, tmp_path,
                                                                                          board, name, fast):
    """A fused int16 LOGISTIC or TANH reads the kernels' sigmoid table from the team's fast memory where the
    board copies the weights there and the loops look it up often enough (its copy, a constant of the model,
    held once for every loop); elsewhere it reads the kernels' own table, and the model holds no copy."""
    from edgernn.backend import generate_firmware
    from edgernn.targets.board import load_board

    folder = tmp_path / "out"
    shutil.copytree(converted(name), folder)
    generate_firmware(folder, load_board(board))
    model_c = (folder / "firmware" / "model.c").read_text()
    weights_c = (folder / "firmware" / "weights.c").read_text()
    copies = re.findall(r"const uint16_t (\w+_sigmoid16)\[256\]", weights_c)
    own = f"_s16_elem({fusion.SIGMOID16_TABLE}, "
    if fast:
        assert len(copies) == 1 and f"EDGERNN_FAST_WEIGHT(uint16_t, {copies[0]})" in model_c
        assert own not in model_c
    else:
        assert copies == [] and own in model_c


def test_the_sigmoid_table_copy_is_the_kernels_table():
    table = fusion.sigmoid16_table()
    assert len(table) == 256 and table[0] == 32768 and table[-1] == 65535
    assert all(a <= b for a, b in zip(table, table[1:]))
    assert table[24] == round(65536 / (1 + np.exp(-1.0)))      # sigmoid(i / 24) in 0.16 fixed point


# int16 MUL parameters (offsets, output offset, multiplier, shift, act_min, act_max) -> the literals of
# edgernn_mul_words_elem, or None where a product may leave the form's bound |x| <= 2^30
MUL_WORDS = [
    ([0, 0, 0, 1167996160, -14, -32768, 32767], (1167996160, 14)),
    ([0, 0, 0, 1167996160, 0, -32768, 32767], (1167996160, 0)),
    ([0, 0, 0, 1167996160, -30, -32768, 32767], (1167996160, 30)),
    ([0, 0, 0, 1167996160, -31, -32768, 32767], None),     # a right shift past 30
    ([0, 0, 0, 1167996160, 1, -32768, 32767], None),       # a left shift: the product is shifted first
    ([1, 0, 0, 1167996160, -14, -32768, 32767], None),     # an offset: |(a + 1) * c| may pass 2^30
]


@pytest.mark.parametrize("fields, want", MUL_WORDS)
def test_int16_mul_takes_the_word_form_only_within_its_bounds(fields, want):
    assert fusion.mul_words(fields) == want


# int16 ADD/SUB parameters (offsets, output offset, left shift, input 1, 2 and output multiplier and shift, range),
# the bound of a constant operand rescaled at generation -> the literals of edgernn_addsub_words_elem
HALF, M = 1 << 30, 1219713420
ADDSUB_WORDS = [
    ([0, 0, 0, 15, HALF, 0, -1569847025, -1, M, -16, -32768, 32767], None,
     (15, HALF, 0, -1569847025, 1, M, 16)),                       # a SUB of a negated multiplier
    ([0, 0, 0, 15, M, -1, M, -1, M, -16, -32768, 32767], None, (15, M, 1, M, 1, M, 16)),
    ([0, 0, 0, 15, HALF, 0, M, -1, M, -16, -32768, 32767], 1 << 29, (15, HALF, 0, M, 1, M, 16)),
    ([0, 0, 0, 15, HALF, 0, M, -1, M, -16, -32768, 32767], (1 << 29) + 1, None),   # the sum past 2^30
    ([0, 0, 0, 16, M, -1, M, -1, M, -16, -32768, 32767], None, None),   # an input * 2^16 past 2^30
    ([5, 0, 0, 15, M, -1, M, -1, M, -16, -32768, 32767], None, None),   # an offset: |a + 5| * 2^15 past 2^30
    ([0, 0, 0, 15, M, -1, M, -1, M, -31, -32768, 32767], None, None),   # the output's right shift past 30
]


@pytest.mark.parametrize("fields, bound2, want", ADDSUB_WORDS)
def test_int16_addsub_takes_the_word_form_only_within_its_bounds(fields, bound2, want):
    assert fusion.addsub_words(fields, bound2) == want


# int8 ADD/SUB parameters (left shift 20, as TFLite's) -> the literals of edgernn_addsub_words_elem for int8 inputs
ADDSUB8 = [3, -5, 2, 20, 1302949280, -2, HALF, 0, 2088003577, -19, -128, 127]
ADDSUB8_WORDS = [
    (ADDSUB8, (20, 1302949280, 2, HALF, 0, 2088003577, 19)),
    ([128, 0, 0, 22, M, -1, M, -1, M, -16, -128, 127], (22, M, 1, M, 1, M, 16)),   # |v + 128| * 2^22 = 2^30
    ([128, 0, 0, 23, M, -1, M, -1, M, -16, -128, 127], None),                      # ... * 2^23 past 2^30
]


@pytest.mark.parametrize("fields, want", ADDSUB8_WORDS)
def test_int8_addsub_takes_the_word_form_within_int8_bounds(fields, want):
    assert fusion.addsub_words(fields, in_bound=fusion.INT8_BOUND) == want
    assert fusion.addsub_words(fields) is None          # int16 inputs at left shift 20 and more would leave them


def _addsub8(i: int, a: int, b: int, out: int, n: int) -> Call:
    q = ConstStruct(f"q{i}", "edgernn_addsub_params_t", list(ADDSUB8))
    return Call(i, "ADD", "edgernn_addsub_n_s8",
                kernel("edgernn_addsub_n_s8").order({"p": StructArg(q.name), "subtract": 0, "in1": TensorArg(a),
                                                     "in2": TensorArg(b), "n": int(n), "out": TensorArg(out)}),
                structs=[q])


@pytest.mark.parametrize("n", [16, fusion.INPUT_TABLE_ELEMENTS - 1, fusion.INPUT_TABLE_ELEMENTS, 512])
def test_an_int8_add_looks_its_input_up_only_in_a_long_loop(n):
    """Input 1's table (input 2 is a product, ADDSUB8's half) is 1 KiB: made for INPUT_TABLE_ELEMENTS
    elements or more; a shorter loop rescales in words."""
    calls = [_lut(0, 1, 10, n=n), _addsub8(1, 10, 2, 11, n)]
    out = fusion.fuse_calls(_Graph({0: [10], 1: [11]}), calls, "m", keep={11})
    structs = {s.name: s for m in out[0].members for s in m.structs}
    made = fusion_loop.made_arrays(out[0], structs)
    long = n >= fusion.INPUT_TABLE_ELEMENTS
    assert [(a.ctype, len(a.values)) for a in made] == ([("int32_t", 256)] if long else [])
    assert made == [] or made[0].values == fusion.input_table(ADDSUB8, 0)
    loop = fusion_loop.build_loop(out[0], lambda t: Place(ARENA, "int8_t", 8 * t), structs)
    fns = {n.fn for s in loop.steps for n in fusion_loop._walk(s.value) if isinstance(n, fusion_loop.Call)}
    assert ("edgernn_addsub_words_elem" in fns) != long


# ---- the grouping rules, on calls made by hand ----

class _Graph:
    """The one part of a Graph fuse_calls reads: each operator's outputs."""

    def __init__(self, outputs: dict[int, list[int]]):
        n = max(outputs) + 1
        self.operators = [type("Op", (), {"outputs": outputs.get(i, [])})() for i in range(n)]


def _lut(i: int, src: int, out: int, n: int = 8) -> Call:
    table = ConstArray(f"t{i}", "int8_t", list(range(-128, 128)))
    return Call(i, "TANH", "edgernn_lut_s8",
                kernel("edgernn_lut_s8").order({"table": ConstArg(table.name), "in": TensorArg(src),
                                                "n": int(n), "out": TensorArg(out)}), arrays=[table])


def _mul(i: int, a: int, b: int, out: int, n: int = 8) -> Call:
    q = ConstStruct(f"q{i}", "edgernn_mul_params_t", [0, 0, 0, 1 << 30, 0, -128, 127])
    return Call(i, "MUL", "edgernn_mul_n_s8",
                kernel("edgernn_mul_n_s8").order({"p": StructArg(q.name), "in1": TensorArg(a), "in2": TensorArg(b),
                                                  "n": int(n), "out": TensorArg(out)}), structs=[q])


def _other(i: int, src: int, out: int) -> Call:
    return Call(i, "FULLY_CONNECTED", "edgernn_copy_runs",
                kernel("edgernn_copy_runs").order({"runs": ConstArg("r"), "n_runs": 1, "elem_size": 1,
                                                   "src": TensorArg(src), "dst": TensorArg(out)}))


def test_a_chain_becomes_one_loop_storing_only_what_leaves_it():
    calls = [_lut(0, 1, 10), _lut(1, 10, 11), _mul(2, 11, 10, 12)]
    out = fusion.fuse_calls(_Graph({0: [10], 1: [11], 2: [12]}), calls, "m", keep={12})
    assert len(out) == 1 and [m.op_index for m in out[0].members] == [0, 1, 2]
    assert out[0].stored == {12}


def test_a_read_between_members_closes_the_loop():
    # op 1 reads op 0's output: op 0 must have run, so op 2 cannot join op 0's loop (it reads op 1's output)
    calls = [_lut(0, 1, 10), _other(1, 10, 11), _mul(2, 11, 10, 12), _lut(3, 12, 13)]
    out = fusion.fuse_calls(_Graph({0: [10], 1: [11], 2: [12], 3: [13]}), calls, "m", keep={13})
    assert [type(c).__name__ for c in out] == ["Call", "Call", "FusedCall"]
    assert [m.op_index for m in out[2].members] == [2, 3] and out[2].stored == {13}


def test_a_call_moves_up_into_a_closed_loop_when_its_inputs_are_ready_there():
    # op 2 reads op 0's output and runs after op 1, which closed op 0's loop; it moves up into the loop
    calls = [_lut(0, 1, 10), _lut(1, 10, 11), _other(2, 11, 12), _lut(3, 10, 13)]
    out = fusion.fuse_calls(_Graph({0: [10], 1: [11], 2: [12], 3: [13]}), calls, "m", keep={12, 13})
    assert isinstance(out[0], fusion.FusedCall) and [m.op_index for m in out[0].members] == [0, 1, 3]
    assert out[0].stored == {11, 13} and out[1].op_index == 2
    assert fusion.positions(out)[3] == out[0].op_index


def test_different_counts_do_not_mix():
    calls = [_lut(0, 1, 10, n=8), _lut(1, 10, 11, n=4)]
    out = fusion.fuse_calls(_Graph({0: [10], 1: [11]}), calls, "m", keep={11})
    assert all(not isinstance(c, fusion.FusedCall) for c in out)


def test_tables_hold_the_reference_arithmetic():
    from edgernn.backend import quantparams as qp

    # ADD params: offsets 3 and -5, left shift 20, input 2 a product (m = 2^30, shift 0), input 1 not
    q = [3, -5, 2, 20, 1302949280, -2, 1 << 30, 0, 2088003577, -19, -128, 127]
    assert not fusion._is_half(q, 0) and fusion._is_half(q, 1)
    table = fusion.input_table(q, 0)
    for v in (-128, -1, 0, 1, 77, 127):
        assert table[v & 0xFF] == qp.rdbpot(qp.srdhm((v + 3) * (1 << 20), 1302949280), 2)
    # the product form of the half input is the same rescale
    half = fusion.input_table(q, 1)
    assert all(half[v & 0xFF] == (v - 5) * (1 << 19) for v in range(-128, 128))
    lut = fusion.const_table(q, True, 12345)
    assert all(-128 <= v <= 127 for v in lut)
    assert lut[0] == max(-128, min(127, qp.rdbpot(qp.srdhm(-table[0] + 12345, 2088003577), 19) + 2))


def test_a_table_of_a_table_is_one_composed_table():
    first, second = _lut(0, 1, 10), _lut(1, 10, 11)
    first.arrays[0].values = [(v * 3) % 256 - 128 for v in range(256)]
    second.arrays[0].values = [127 - v for v in range(256)]
    out = fusion.fuse_calls(_Graph({0: [10], 1: [11]}), [first, second], "m", keep={11})
    composed = fusion.composed_tables(out[0], {})
    arr, src = composed[1]
    assert src == 1
    assert arr.values == [second.arrays[0].values[first.arrays[0].values[u] & 0xFF] for u in range(256)]
    loop = fusion_loop.build_loop(out[0], lambda t: Place(ARENA, "int8_t", 8 * t), {})
    # the first table's value is dropped on the tree: one lookup of the composed table, one load, one store
    assert [s.op for s in loop.steps] == [1] and loop.steps[0].store == "out0"
    assert loop.steps[0].value == fusion_loop.Call("edgernn_lut_elem", (fusion_loop.Name(arr.name),
                                                                        fusion_loop.Load("in0")))
    assert [(p.name, p.place) for p in loop.loads] == [("in0", Place(ARENA, "int8_t", 8))]
    assert arr in fusion_loop.used_arrays(out[0])


@pytest.mark.toolchain
@pytest.mark.parametrize("name", ["gru", "ltc"])
def test_fused_loops_split_across_workers_give_the_same_bytes(converted, tmp_path, name):
    """A fused loop with enough elements is split by element range (edgernn_team_split): a broadcasting
    loop's counters then start mid-shape. 1, 3 and 8 POSIX threads against each other and the interpreter."""
    folder = tmp_path / "out"
    shutil.copytree(converted(name), folder)
    n = int(H.load_interpreter(folder / "step.tflite").get_signature_runner("serving_default")
            .get_input_details()["x"]["shape"][-1])
    xq = H.quantize_x(folder, zoo.trajectories(1, 50, n, seed=6)[0] * 1.5)
    ref, _ = H.reference_bytes(folder, xq)
    results = []
    for workers in (1, 3, 8):
        b = H.build(folder, cflags=["-O2", f"-DEDGERNN_THREADS={workers}", "-pthread"], name=f"driver_t{workers}")
        model_c = (folder / "firmware" / "model.c").read_text()
        assert "edgernn_team_split(edgernn_step_fused" in model_c
        if name == "ltc":
            assert "int d2 = " in model_c or "int d1 = " in model_c, "no broadcasting loop walks a shape"
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
        assert H.compare(got, ref, "int8")["mismatches"] == 0, f"{workers} workers differ from the interpreter"
        results.append(got)
    assert all(np.array_equal(results[0], r) for r in results[1:])


# ---- dead elements (fusion_loop.Dead): a MUL by a constant that is zero there, and what it feeds ----

def _mul_q(i: int, a: int, b: int, out: int, fields: list[int], n: int = 8) -> Call:
    q = ConstStruct(f"q{i}", "edgernn_mul_params_t", fields)
    return Call(i, "MUL", "edgernn_mul_n_s16",
                kernel("edgernn_mul_n_s16").order({"p": StructArg(q.name), "in1": TensorArg(a), "in2": TensorArg(b),
                                                   "n": int(n), "out": TensorArg(out)}), structs=[q])


M, E = 1 << 30, -3     # a multiplier and shift the rescale maps 0 to 0 with
# case: (the first MUL's input 1 (tensor 4, None: a computed one) and its params, the mask (tensor 2), the second
# MUL's params (its input 2 is tensor 3, no zeros), the test (the operand read, the value it is tested against) or
# None, the values the dead elements store)
DEAD = {
    "int16 mask": (None, [0, 0, 0, M, E, -32768, 32767], [0, 0, 0, 0, 0, 0, 9, -4], [0, 0, 0, M, E, -32768, 32767],
                   ("in1", 0), [0, 0]),
    # int8 zero points: the mask's zero is -128 (offset 128), the first output's zero point -5 is the second's
    # offset 5, so its product is zero too
    "offsets": (None, [0, 128, -5, M, E, -128, 127], [-128] * 5 + [1, 2, 127], [5, 0, 7, M, E, -128, 127],
                ("in1", -128), [-5, 7]),
    # the first output's zero point clamped to -3, the second's offset 3
    "clamped": (None, [0, 128, -5, M, E, -3, 127], [-128] * 5 + [1, 2, 127], [3, 0, 7, M, E, -128, 127],
                ("in1", -128), [-3, 7]),
    # the first output's value there is not zero for the second MUL: it computes
    "not zero for the next": (None, [0, 128, -5, M, E, -128, 127], [-128] * 5 + [1, 2, 127],
                              [4, 0, 7, M, E, -128, 127], None, None),
    "too few": (None, [0, 0, 0, M, E, -32768, 32767], [0, 3, 3, 3, 3, 3, 9, -4], [0, 0, 0, M, E, -32768, 32767],
                None, None),
    # the other operand is a constant with zeros of its own: the test reads the mask, the larger set (its
    # other zeros are computed, to the same values)
    "two sources": ([0, 0, 1, 1, 1, 1, 1, 1], [0, 0, 0, M, E, -32768, 32767], [1, 1, 0, 0, 0, 0, 0, 1],
                    [0, 0, 0, M, E, -32768, 32767], ("in1", 0), [0, 0]),
}


@pytest.mark.parametrize("case", list(DEAD))
def test_a_loop_stores_its_dead_elements_without_computing_them(case):
    first_in, q1, mask, q2, test, values = DEAD[case]
    consts = {2: np.array(mask), 3: np.array([5, -6, 7, -8, 9, 10, 11, 12])}
    if first_in is not None:
        consts[4] = np.array(first_in)
    calls = [_mul_q(0, 4, 2, 10, q1), _mul_q(1, 10, 3, 11, q2)]
    out = fusion.fuse_calls(_Graph({0: [10], 1: [11]}), calls, "m", keep={10, 11})
    structs = {s.name: s for m in out[0].members for s in m.structs}
    loop = fusion_loop.build_loop(out[0], lambda t: Place(ARENA, "int16_t", 16 * t), structs,
                                  const_values=consts.get)
    if test is None:
        assert loop.dead is None
        return
    assert loop.dead.test == fusion_loop.Binary("==", fusion_loop.Load(test[0]), fusion_loop.Int(test[1]))
    assert loop.dead.stores == [("out0", "int16_t", values[0]), ("out1", "int16_t", values[1])]
    assert [p.name for p in loop.loads if p.place == Place(ARENA, "int16_t", 32)] == [test[0]]
    assert loop.bounds[0] == 0 and loop.bounds[-1] == 8 and loop.bounds == sorted(loop.bounds)
    # --quant auto's estimate prices the skipped elements at their own cost
    dead = cost.dead_elements(out[0], consts.get)
    assert dead == mask.count(test[1]) and cost.call_cycles(out[0], dead) < cost.call_cycles(out[0])


# case: (the elements the dead test skips, the loop's steps, the parts) -> the parts' element bounds. A skipped
# element costs DEAD_ELEMENT_CYCLES (12), another 12 + LIVE_STEP_CYCLES (24) a step
BOUNDS = {
    "none skipped: equal counts": (([False] * 8, 1, 4), [0, 2, 4, 6, 8]),
    # 36 + 7 * 12 = 120: the first part ends where the cost before reaches 60, after the live one and two dead
    "one live first": (([False] + [True] * 7, 1, 2), [0, 3, 8]),
    "two steps: a live one costs 60": (([True] * 5 + [False], 2, 2), [0, 5, 6]),
    "fewer elements than parts": (([True] * 3, 1, 48), [0, 1, 2, 3]),
}


@pytest.mark.parametrize("case", list(BOUNDS))
def test_a_loop_with_dead_elements_splits_in_parts_of_equal_cost(case):
    (skipped, steps, parts), bounds = BOUNDS[case]
    assert fusion_loop.balanced_bounds(np.array(skipped), steps, parts) == bounds


# ---- CONCATENATION inputs written in place (fusion.concat_aliases), on calls made by hand ----

class _Tensor:
    def __init__(self, size: int, const: bool = False, dtype: str = "int8"):
        self.size, self.is_const, self.is_variable, self.dtype = size, const, False, dtype


class _ConcatGraph(_Graph):
    """Operators' outputs and tensors (tensor index -> element count; 99 is a constant)."""

    def __init__(self, outputs: dict[int, list[int]], sizes: dict[int, int]):
        super().__init__(outputs)
        self.tensors = {t: _Tensor(n, const=(t == 99)) for t, n in sizes.items()}


def _concat(i: int, parts: list[int], sizes: dict[int, int], out: int) -> Call:
    """A CONCATENATION as its lowering makes it: one copy per input, each one run of the output."""
    calls, arrays, off = [], [], 0
    for k, src in enumerate(parts):
        arrays.append(ConstArray(f"runs{i}_{k}", "edgernn_run_t", [[off, 0, sizes[src]]]))
        calls.append(Call(i, "CONCATENATION", "edgernn_copy_runs", kernel("edgernn_copy_runs").order(
            {"runs": ConstArg(f"runs{i}_{k}"), "n_runs": 1, "elem_size": 1, "src": TensorArg(src),
             "dst": TensorArg(out)})))
        off += sizes[src]
    calls[0].arrays, calls[0].more = arrays, calls[1:]
    return calls[0]


def _copied(calls: list[Call]) -> list[int]:
    return [call_args(c)["src"].index for call in calls for c in [call, *call.more] if c.fn == "edgernn_copy_runs"]


SIZES = {1: 6, 5: 16, 10: 16, 11: 16, 12: 16, 20: 32, 21: 22, 99: 16}


@pytest.mark.parametrize("case", [
    # two producers (an FC-like call and a loop's member): both written in place, the copy is gone
    dict(calls=lambda: [_other(0, 1, 10), _lut(1, 10, 11, n=16), _concat(2, [10, 11], SIZES, 20)],
         outputs={0: [10], 1: [11], 2: [20]}, keep={20}, fixed={1},
         placed={10: (20, 0), 11: (20, 16)}, copied=[1]),
    # one producer is a fused loop (two members, the second's output concatenated)
    dict(calls=lambda: fusion.fuse_calls(_Graph({0: [10], 1: [11], 2: [12], 3: [20]}),
                                         [_lut(0, 1, 10, n=16), _lut(1, 10, 11, n=16), _other(2, 1, 12),
                                          _concat(3, [12, 11], SIZES, 20)], "m", keep={20}),
         outputs={0: [10], 1: [11], 2: [12], 3: [20]}, keep={20}, fixed={1},
         placed={12: (20, 0), 11: (20, 16)}, copied=[1]),
    # the graph's input keeps its copy, the producer's output is placed after it
    dict(calls=lambda: [_lut(0, 1, 5, n=16), _concat(1, [1, 5], SIZES, 21)],
         outputs={0: [5], 1: [21]}, keep={21}, fixed={1}, placed={5: (21, 6)}, copied=[1]),
    # the output is a new state (kept, copied out after the step): its inputs still go in place; a
    # constant input and an input that is itself a step output keep their copies
    dict(calls=lambda: [_lut(0, 1, 10, n=16), _lut(1, 1, 11, n=16), _concat(2, [10, 99], SIZES, 20),
                        _concat(3, [11, 10], SIZES, 21)],
         outputs={0: [10], 1: [11], 2: [20], 3: [21]}, keep={20, 11}, fixed={1},
         placed={10: (20, 0)}, copied=[99, 11, 10]),
])
def test_concat_inputs_are_written_in_place(case):
    graph = _ConcatGraph(case["outputs"], SIZES)
    calls = case["calls"]()
    out, aliases = fusion.concat_aliases(graph, calls, case["keep"], case["fixed"], {})
    assert aliases == case["placed"]
    assert _copied(out) == case["copied"]


def test_a_slice_of_a_placed_input_lies_in_the_concat():
    # tensor 12 is a slice of 10 (at 4); 10 is placed in 20 at 16: 12 lies in 20 at 20
    graph = _ConcatGraph({0: [10], 1: [11], 2: [20]}, SIZES)
    calls = [_other(0, 1, 10), _other(1, 1, 11), _concat(2, [11, 10], SIZES, 20)]
    out, aliases = fusion.concat_aliases(graph, calls, {20}, {1}, {12: (10, 4)})
    assert aliases == {12: (20, 20), 10: (20, 16), 11: (20, 0)}
