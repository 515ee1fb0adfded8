"""Unit tests of the backend's pure-Python parts: arena plan, TFLite quantization arithmetic, reader."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgernn.backend import quantparams as qp
from edgernn.backend.memplan import plan_arena
from edgernn.errors import EdgeRNNError


def _overlaps(a, b):
    return a.first <= b.last and b.first <= a.last and a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes


def test_arena_reuses_bytes_of_dead_tensors_and_never_overlaps_live_ones():
    # a chain t0 -> t1 -> t2 -> t3: only two neighbours are alive at once
    lives = [([0], 64, 0, 1), ([1], 64, 1, 2), ([2], 64, 2, 3), ([3], 64, 3, 4)]
    plan = plan_arena(lives)
    assert plan.liveness_bound_bytes == 128
    assert plan.arena_bytes == 128
    for a in plan.buffers:
        for b in plan.buffers:
            assert a is b or not _overlaps(a, b)


def test_arena_is_at_least_the_liveness_bound_on_a_mixed_graph():
    rng = np.random.default_rng(0)
    lives = []
    for t in range(40):
        first = int(rng.integers(0, 30))
        lives.append(([t], int(rng.integers(1, 200)), first, first + int(rng.integers(0, 6))))
    plan = plan_arena(lives)
    assert plan.arena_bytes >= plan.liveness_bound_bytes > 0
    for a in plan.buffers:
        assert a.offset % 8 == 0
        for b in plan.buffers:
            assert a is b or not _overlaps(a, b)


def test_quantize_multiplier_matches_tflite_examples():
    assert qp.quantize_multiplier(0.5) == (1 << 30, 0)
    assert qp.quantize_multiplier(1.0) == (1 << 30, 1)
    assert qp.quantize_multiplier(0.0) == (0, 0)
    m, s = qp.quantize_multiplier(0.1)
    assert abs(m * 2.0 ** (s - 31) - 0.1) < 1e-9 and (1 << 30) <= m < (1 << 31)
    # rounding of q * 2^31 up to 2^31 renormalises
    assert qp.quantize_multiplier(1.0 - 2.0 ** -40) == (1 << 30, 1)


def test_fixed_point_helpers_round_like_gemmlowp():
    assert qp.rdbpot(5, 1) == 3 and qp.rdbpot(-5, 1) == -3      # halves away from zero
    assert qp.rdbpot(4, 1) == 2 and qp.rdbpot(-7, 2) == -2
    assert qp.srdhm(qp.INT32_MIN, qp.INT32_MIN) == qp.INT32_MAX
    assert qp.srdhm(1 << 30, 1 << 30) == 1 << 29
    assert qp.mbqm(100, 1 << 30, 0) == 50
    assert qp.mbqm(3, 1 << 30, 0) == 2
    assert qp.mbqm(-3, 1 << 30, 0) == -1           # the doubling high multiply's nudge takes -1.5 to -1


@pytest.mark.toolchain
def test_c_fixed_point_fast_forms_equal_gemmlowp(tmp_path):
    """The one-multiply forms in edgernn_fixedpoint.h against gemmlowp's literal definitions, in C."""
    from edgernn.resources import templates_dir

    src = Path(__file__).resolve().parents[1] / "c" / "fixedpoint_check.c"
    exe = tmp_path / "fixedpoint_check"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    "-I", str(templates_dir() / "kernels"), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split()[-1] == "0", out.stdout


def test_int8_tables_follow_the_float_function():
    table = qp.lookup_table_s8(qp.float_unary("LOGISTIC"), 0.05, 0, 1.0 / 256, -128)
    x = (np.arange(-128, 128) * 0.05).astype(np.float32)
    want = np.clip(np.round(1 / (1 + np.exp(-x)) * 256) - 128, -128, 127)
    got = table[np.arange(-128, 128) & 0xFF].astype(int)
    assert np.max(np.abs(got - want)) <= 1          # same function; the exact bits are checked end to end
    assert got[0] == -128 and got[-1] == 127


def test_reader_refuses_garbage_and_reads_signature_keys(tmp_path):
    from edgernn.backend.reader import read_tflite

    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer at all")
    with pytest.raises(EdgeRNNError):
        read_tflite(bad)
    with pytest.raises(EdgeRNNError, match="cannot read"):
        read_tflite(tmp_path / "missing.tflite")


def test_unsupported_op_is_refused_with_its_name_and_index():
    from edgernn.backend.ir import Graph, Operator, Tensor
    from edgernn.backend.lowering import Lowering

    t = [Tensor(0, "x", "float32", (1, 4)), Tensor(1, "y", "float32", (1, 4))]
    g = Graph(t, [Operator(0, "RELU", [0], [1]), Operator(1, "CUMSUM", [1], [0])], {"x": 0}, {"y": 1}, "0" * 64)
    with pytest.raises(EdgeRNNError, match=r"op 1 \(CUMSUM\) is not supported"):
        Lowering(g, "t").lower()


# (case, output scale, output zero point, op, refusal): an int16 SUM is lowered only with its input's quantization
# (what TF's 16x8 quantizer makes, edgernn_sum_s16)
INT16_REDUCTIONS = [
    ("SUM rescaled", 0.02, 0, "SUM", r"op 0 \(SUM\) is not supported by the C backend: int16 SUM whose output is "
                                     r"quantized unlike its input"),
    ("SUM, zero point moved", 0.01, 5, "SUM", r"op 0 \(SUM\) is not supported by the C backend: int16 SUM whose"),
]


@pytest.mark.parametrize("case, scale, zero_point, name, refusal", INT16_REDUCTIONS, ids=[c[0] for c in INT16_REDUCTIONS])
def test_quantized_reduction_without_a_verified_kernel_is_refused_with_name_index_and_reason(case, scale, zero_point,
                                                                                            name, refusal):
    from edgernn.backend.ir import Graph, Operator, Tensor
    from edgernn.backend.lowering import Lowering

    q = {"scale": np.array([0.01], np.float32), "zero_point": np.array([0])}
    out_q = {"scale": np.array([scale], np.float32), "zero_point": np.array([zero_point])}
    t = [Tensor(0, "x", "int16", (1, 4, 3), **q), Tensor(1, "axis", "int32", (1,), data=np.array([1], np.int32)),
         Tensor(2, "y", "int16", (1, 3), **out_q)]
    g = Graph(t, [Operator(0, name, [0, 1], [2], {"keepDims": False})], {"x": 0}, {"y": 2}, "0" * 64)
    with pytest.raises(EdgeRNNError, match=refusal):
        Lowering(g, "t").lower()


# (input scale, lowered): TFLite's int16 LOGISTIC/TANH Prepare casts its input multiplier (scale * 3 * 4096,
# doubled up to 30 times) to int32; past 2^31 LiteRT's result is undefined and the op is refused
INT16_ACTIVATION_SCALES = [(1e-4, True), (5e3, True), (6.8e12, False)]


@pytest.mark.parametrize("name", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("scale, lowered", INT16_ACTIVATION_SCALES)
def test_int16_activation_whose_input_multiplier_overflows_int32_is_refused(name, scale, lowered):
    from edgernn.backend.ir import Graph, Operator, Tensor
    from edgernn.backend.lowering import Lowering

    t = [Tensor(0, "x", "int16", (1, 4), scale=np.array([scale], np.float32), zero_point=np.array([0])),
         Tensor(1, "y", "int16", (1, 4), scale=np.array([1 / 32768], np.float32), zero_point=np.array([0]))]
    g = Graph(t, [Operator(0, name, [0], [1])], {"x": 0}, {"y": 1}, "0" * 64)
    if lowered:
        assert [c.fn for c in Lowering(g, "t").lower()] == [f"edgernn_{name.lower()}_s16"]
    else:
        with pytest.raises(EdgeRNNError, match=rf"op 0 \({name}\) is not supported .*must fit int32: the model "
                                               "diverges"):
            Lowering(g, "t").lower()


def test_an_int16_sum_with_its_inputs_quantization_is_lowered():
    from edgernn.backend.ir import Graph, Operator, Tensor
    from edgernn.backend.lowering import Lowering

    q = {"scale": np.array([0.01], np.float32), "zero_point": np.array([0])}
    t = [Tensor(0, "x", "int16", (1, 4, 3), **q), Tensor(1, "axis", "int32", (1,), data=np.array([1], np.int32)),
         Tensor(2, "y", "int16", (1, 3), **q)]
    g = Graph(t, [Operator(0, "SUM", [0, 1], [2], {"keepDims": False})], {"x": 0}, {"y": 2}, "0" * 64)
    assert [c.fn for c in Lowering(g, "t").lower()] == ["edgernn_sum_s16"]


def test_an_int8_sum_by_thresholds_carries_its_guess_slope_after_them():
    """edgernn_sum_thresholds_s8 reads thresholds[n] as (n - 1) / (last - first) in 16.16, the division it did at
    run time (an LTC's 16-value SUMs)."""
    from edgernn.backend.ir import Graph, Operator, Tensor
    from edgernn.backend.lowering import Lowering

    t = [Tensor(0, "x", "int8", (1, 16, 4), scale=np.array([0.02], np.float32), zero_point=np.array([3])),
         Tensor(1, "axis", "int32", (1,), data=np.array([1], np.int32)),
         Tensor(2, "y", "int8", (1, 4), scale=np.array([0.1], np.float32), zero_point=np.array([-5]))]
    g = Graph(t, [Operator(0, "SUM", [0, 1], [2], {"keepDims": False})], {"x": 0}, {"y": 2}, "0" * 64)
    [call] = Lowering(g, "t").lower()
    assert call.fn == "edgernn_sum_thresholds_s8"
    values = [int(v) for v in call.arrays[0].values]
    n = call.args[6]
    assert len(values) == n + 1 and n > 1
    low, high = values[0], values[n - 1]
    assert values[n] == ((n - 1) << 16) // ((high - low) & 0xFFFFFFFF) > 0   # the C's unsigned division
    assert qp.thresholds_slope([]) == qp.thresholds_slope([7]) == qp.thresholds_slope([5, 5]) == 0


def test_inverse_square_root_multiplier_is_tflites_fixed_point_result():
    # 1/sqrt(v) = multiplier * 2^(shift - 31) to within the Newton iteration's precision
    for v in (2, 3, 4, 17, 100, 12345, (1 << 29) + 5):
        m, s = qp.inv_sqrt_multiplier_exp(v)
        assert abs(m * 2.0 ** (s - 31) * np.sqrt(v) - 1) < 1e-5, v
    assert qp.inv_sqrt_multiplier_exp(1) == (qp.INT32_MAX, 0)
    table = qp.rsqrt_table_s8(0.02, -128, 0.05, -128)
    values = table[np.arange(-127, 128) & 0xFF].astype(int)
    assert np.all(np.diff(values) <= 0)                            # decreasing
    assert table[-128 & 0xFF] == 127                               # zero maps to the largest value
    assert abs(values[0] - (-128 + 1 / np.sqrt(0.02) / 0.05)) <= 1


def test_int16_tables_interpolate_the_function():
    lut = qp.lookup_table_s16(qp.float_unary("EXP"), 8.0 / 32768, 0, 8.0 / 32768, 0)
    assert lut.shape == (513,)
    grid = np.linspace(-8.0, 8.0 * 32767 / 32768, 513)
    want = np.clip(np.exp(grid) * 32768 / 8.0, -32768, 32767)
    assert np.max(np.abs(lut.astype(float) - want)) <= 2
    exp_lut, recip_lut = qp.softmax_s16_tables()
    assert exp_lut[-1] == 32767 and recip_lut[0] == 32767 and recip_lut[-1] == 16384




@pytest.mark.parametrize("input_bytes,output_bytes,state_bytes,frames", [
    (6, 1, 80, (8 + 3 + 6, 8 + 7 + 1 + 4 + 160)),      # a vector model: its answer, with the state twice
    (4096, 2, 16, (8 + 3 + 4096, 8 + 7 + 2 + 4 + 32)),  # a 64x64 int8 frame: its request with one input
    (65_524, 2, 0, (65_535, 21)),                        # the largest frame protocol version 1 could announce
    (65_525, 2, 0, (65_536, 21)),                        # one more: version 2's 32-bit fields say it
    (324 * 244, 2, 0, (79_067, 21)),                     # a full AI-deck camera frame, int8
])
def test_link_frames_fit_one_step_of_the_model(input_bytes, output_bytes, state_bytes, frames):
    from edgernn.backend.codegen import link_model_frames

    assert link_model_frames(input_bytes, output_bytes, state_bytes) == frames


def test_a_step_too_large_for_the_serial_protocol_is_refused_at_generation():
    from edgernn.backend.codegen import link_model_frames

    with pytest.raises(EdgeRNNError, match=r"one step needs link frames of 4294967307 bytes \(4294967296 bytes of input"):
        link_model_frames(1 << 32, 2, 0)


@pytest.mark.parametrize("board, frames, input_bytes, itemsize, growth", [
    ("ai_deck", (17, 180), 6, 1, ("l2", 0)),                                # the board's frames: in reserved
    ("ai_deck", (79_067, 21), 324 * 244, 1, ("l2", 79_067 - 4096)),        # a camera frame, read in place
    ("ai_deck", (8 + 3 + 2 * 324 * 244, 21), 2 * 324 * 244, 2,             # int16: and its aligned copy
     ("l2", 8 + 3 + 2 * 324 * 244 - 4096 + 2 * 324 * 244)),
    ("ai_deck", (40, 8_000), 6, 1, ("l2", 2 * (8_000 - 4096) + 8_000 // 254 - 4096 // 254)),  # answer + COBS copy
    ("host", (79_067, 21), 324 * 244, 1, None),                             # no memory holds link buffers
])
def test_link_buffers_past_the_board_frames_are_charged_to_their_memory(board, frames, input_bytes, itemsize, growth):
    from edgernn.backend.firmware import link_buffer_growth
    from edgernn.targets.board import load_board

    assert link_buffer_growth(load_board(board), frames, input_bytes, itemsize) == growth


def test_a_board_that_keeps_its_frames_charges_no_link_growth(tmp_path):
    from edgernn.backend.firmware import link_buffer_growth
    from edgernn.backend.placement import place
    from edgernn.targets.board import load_board

    path = tmp_path / "deck_small_frames.toml"
    path.write_text('extends = "ai_deck"\nname = "deck_small_frames"\n\n[toolchain]\n'
                    'defines = ["EDGERNN_LINK_MAX_FRAME=4096", "EDGERNN_LINK_FIXED_FRAME=1"]\n')
    assert link_buffer_growth(load_board(path), (79_067, 21), 324 * 244, 1) is None
    deck = load_board("ai_deck")
    placed = place(deck, weight_bytes=1000, state_bytes=64, arena_bytes=1000, link=("l2", 74_971))
    assert placed.items["link"] == ("l2", 74_971) and "link" in "\n".join(placed.table())
    with pytest.raises(EdgeRNNError, match="over budget in l2"):
        place(deck, weight_bytes=300_000, state_bytes=64, arena_bytes=1000, link=("l2", 74_971))


@pytest.mark.parametrize("board_name", [None, "host", "ai_deck"])
def test_the_plan_writes_nothing_and_the_writer_writes_what_generate_firmware_writes(tmp_path, board_name):
    """plan_firmware decides (here: the arena in the AI-deck's L1, calls its cluster shares) without
    writing a file; write_firmware of the plan writes the same bytes and facts as generate_firmware."""
    from edgernn.testing import mixed_models as MM
    from edgernn.backend import generate_firmware, plan_firmware, write_firmware
    from edgernn.targets.board import load_board

    step = MM.requantize_chain([("int8", 0.1, 0), ("int16", 0.001, 0), ("int8", 0.05, 3)], size=256)
    folder = MM.write_folder(tmp_path / "chain", step)
    board = load_board(board_name) if board_name else None
    plan = plan_firmware(folder, board)
    assert [p.name for p in folder.iterdir()] == ["step.tflite"]
    assert plan.ops == ["QUANTIZE"] and plan.state_bytes == 0 and plan.arena_bytes > 0
    if board_name == "ai_deck":
        assert plan.placement.items["arena"][0] == "l1" and plan.team_ops
    facts = write_firmware(plan, tmp_path / "written")
    again = generate_firmware(folder, board)
    assert {**facts.as_dict(), "firmware_dir": ""} == {**again.as_dict(), "firmware_dir": ""}
    written = sorted(p.relative_to(tmp_path / "written") for p in (tmp_path / "written").rglob("*"))
    assert written == sorted(p.relative_to(folder / "firmware") for p in (folder / "firmware").rglob("*"))
    for rel in written:
        if (tmp_path / "written" / rel).is_file():
            assert (tmp_path / "written" / rel).read_bytes() == (folder / "firmware" / rel).read_bytes(), rel
