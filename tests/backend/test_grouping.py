"""Grouped FULLY_CONNECTED (edgernn/backend/grouping.py, edgernn_fully_connected_group_s8): which calls a
group takes, and that the grouped kernel gives, row for row, the bytes of each op's own call of
edgernn_fully_connected_s8 (which test_backend_c.py holds against the interpreter; its int8 CfC models are
grouped), for both roundings, whole or split into the team's sub-ranges, on the portable, scalar, Xpulp
(emulated) and -Os dot products.

The table: 2 and 4 ops sharing an input, rows that are and are not multiples of 8, an op boundary on a block
boundary, different output zero points, a clamp narrower than int8, inputs read elsewhere too.

The 16x8 group (edgernn_fully_connected_group_s16) likewise, against each op's own edgernn_fully_connected_s16
(which test_fully_connected_s16.py holds against the interpreter), for both of its roundings and both word
forms of its requantization."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from edgernn.backend import grouping
from edgernn.backend import quantparams as qp
from edgernn.backend.kernel_sources import write_sources
from edgernn.backend.kernels import call_args, kernel
from edgernn.backend.lowering import Call, ConstArray
from edgernn.backend.lowering.blocking import blocked_rows
from edgernn.backend.cprint import c_expr
from edgernn.backend.values import NULL, ConstArg, Enum, TensorArg
from edgernn.resources import templates_dir
from edgernn.testing.backend_harness import kernel_set_of


class _Graph:
    """The parts of a Graph grouping reads: each operator's weights tensor (input 1)."""

    def __init__(self, weights: dict[int, np.ndarray]):
        n = max(weights) + 1
        self.tensors = {1000 + i: type("T", (), {"data": w})() for i, w in weights.items()}
        self.operators = [type("Op", (), {"inputs": [0, 1000 + i, -1]})() for i in range(n)]


def _fc(i: int, src: int, out: int, w: np.ndarray, bias, mult, shift, zp: int, lo: int = -128, hi: int = 127,
        rounding: str = "EDGERNN_ROUND_ONCE", rows: int = 1) -> Call:
    """An int8 FULLY_CONNECTED call as the lowering makes it."""
    n_out, n_in = w.shape
    arrays = [ConstArray(f"op{i}_bias", "int32_t", [int(v) for v in bias]),
              ConstArray(f"op{i}_mult", "int32_t", [int(v) for v in mult]),
              ConstArray(f"op{i}_shift", "int32_t", [int(v) for v in shift]),
              ConstArray(f"op{i}_w", "int8_t", blocked_rows(w).tolist())]
    args = {"in": TensorArg(src), "w": ConstArg(arrays[3].name), "bias": ConstArg(arrays[0].name),
            "multiplier": ConstArg(arrays[1].name), "shift": ConstArg(arrays[2].name), "rounding": Enum(rounding),
            "output_offset": int(zp), "act_min": int(lo), "act_max": int(hi), "rows": int(rows),
            "n_in": int(n_in), "n_out": int(n_out), "out": TensorArg(out)}
    return Call(i, "FULLY_CONNECTED", "edgernn_fully_connected_s8",
                kernel("edgernn_fully_connected_s8").order(args), arrays=arrays)


def _random_fc(rng, n_in: int, n_out: int, shift_range=(-12, -2)):
    w = rng.integers(-127, 128, size=(n_out, n_in)).astype(np.int8)
    bias = rng.integers(-20000, 20000, size=n_out)
    mult = rng.integers(1 << 30, (1 << 31) - 1, size=n_out)
    shift = rng.integers(shift_range[0], shift_range[1] + 1, size=n_out)
    return w, bias, mult, shift


def _other(i: int, src: int, out: int) -> Call:
    return Call(i, "TANH", "edgernn_lut_s8",
                kernel("edgernn_lut_s8").order({"table": ConstArg("t"), "in": TensorArg(src), "n": 8,
                                                "out": TensorArg(out)}))


def _schedule_of(specs, seed: int, make):
    """A schedule and its graph: ``make(i, rng, spec)`` -> (call, weights) per FC spec, or ("other", src, out);
    op index = position."""
    rng = np.random.default_rng(seed)
    calls, weights = [], {}
    for i, spec in enumerate(specs):
        if spec[0] == "other":
            calls.append(_other(i, spec[1], spec[2]))
            weights[i] = np.zeros((1, 1), np.int8)
            continue
        call, weights[i] = make(i, rng, spec)
        calls.append(call)
    return _Graph(weights), calls


def _schedule(specs, seed: int = 0):
    """specs: (src, out, n_in, n_out, zp, extra kwargs) per int8 FC, or ("other", src, out)."""
    def make(i, rng, spec):
        src, out, n_in, n_out, zp, kw = spec
        w, bias, mult, shift = _random_fc(rng, n_in, n_out, kw.pop("shift_range", (-12, -2)))
        return _fc(i, src, out, w, bias, mult, shift, zp, **kw), w
    return _schedule_of(specs, seed, make)


def _shape(calls):
    return [[m.op_index for m in c.members] if isinstance(c, grouping.GroupedCall) else c.op_index for c in calls]


@pytest.mark.parametrize("specs,shape", [
    # 4 ops of one input, then 2 of another input (read by another call too)
    ([(1, 10, 15, 9, -6, {}), (1, 11, 15, 9, -4, {}), (1, 12, 15, 9, 12, {}), (1, 13, 15, 9, -6, {}),
      (2, 14, 7, 2, 3, {}), ("other", 2, 15), (2, 16, 7, 2, -3, {})],
     [[0, 1, 2, 3], 4, 5, 6]),
    ([(1, 10, 7, 2, 3, {}), (1, 11, 7, 2, -3, {}), ("other", 1, 15)], [[0, 1], 2]),
    # five of one input: 4, then the one left
    ([(1, 10 + k, 5, 3, k, {}) for k in range(5)], [[0, 1, 2, 3], 4]),
    # the key: another input, another n_in, another clamp, another rounding, more than one row
    ([(1, 10, 5, 3, 0, {}), (2, 11, 5, 3, 0, {}), (2, 12, 6, 3, 0, {}), (2, 13, 6, 3, 0, {"lo": 0}),
      (2, 14, 6, 3, 0, {"rounding": "EDGERNN_ROUND_TWICE_UP"}), (2, 15, 6, 3, 0, {"rows": 2})],
     [0, 1, 2, 3, 4, 5]),
    # a right shift below 2 keeps its op out of the group
    ([(1, 10, 5, 3, 0, {}), (1, 11, 5, 3, 0, {"shift_range": (-1, -1)}), (1, 12, 5, 3, 0, {}),
      (1, 13, 5, 3, 0, {})], [0, 1, [2, 3]]),
])
def test_adjacent_fcs_of_one_input_are_grouped(specs, shape):
    graph, calls = _schedule(specs)
    out = grouping.group_calls(graph, calls, "m")
    assert _shape(out) == shape
    for c in out:
        if isinstance(c, grouping.GroupedCall):
            a = call_args(c)
            outs = [a[f"out{k}"] for k in range(4)]
            assert outs == [call_args(m)["out"] for m in c.members] + [NULL] * (4 - len(c.members))
            assert a["n_out"] == sum(call_args(m)["n_out"] for m in c.members)


def test_a_rescale_that_could_leave_int32_is_not_grouped():
    w = np.full((3, 64), 127, np.int8)
    # |acc| up to 2^20 + 128 * 127 * 64; m near 2^31 puts hi near 2^19: the zero point 100 at e - 1 = 12
    # fits; with a right shift of 30 it is 100 * 2^29, over int32 with hi
    ok = _fc(0, 1, 10, w, [1 << 20] * 3, [(1 << 31) - 1] * 3, [-13] * 3, 100)
    wide = _fc(1, 1, 11, w, [1 << 20] * 3, [(1 << 31) - 1] * 3, [-30] * 3, 100)
    graph = _Graph({0: w, 1: w})
    assert grouping.high_word_rescale(graph, ok) is not None
    assert grouping.high_word_rescale(graph, wide) is None


# ---- the kernel against each op's own call, in C ----

KERNEL_VARIANTS = {"portable": [], "scalar": ["-DEDGERNN_FC_SCALAR"], "xpulp_emulated": ["-DEDGERNN_XPULP_EMULATE"],
                   "size": ["-Os", "-DEDGERNN_FC_SCALAR"]}

# each case: n_in, the ops' rows, their zero points, clamp
CASES = {
    "4x15to9": (15, [9, 9, 9, 9], [-6, -4, 12, -6], (-128, 127)),
    "4x14to5": (14, [5, 5, 5, 5], [16, -11, -19, 9], (-128, 127)),
    "4x7to2": (7, [2, 2, 2, 2], [-25, -19, 20, -16], (-128, 127)),
    "2x16to8_block_boundary": (16, [8, 8], [0, 100], (-128, 127)),
    "3_ops_8_1_12": (33, [8, 1, 12], [-128, 5, 127], (-128, 127)),
    "2x3to3_clamped": (3, [3, 3], [-20, 30], (-20, 90)),
}


def _c_array(name: str, ctype: str, values) -> str:
    return f"static const {ctype} {name}[] = {{{', '.join(str(int(v)) for v in values)}}};\n"


def _c_inputs(rng, n_in: int, ctype: str, bits: int) -> str:
    """200 random inputs, the first all at the type's least value, the second at its greatest."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    inputs = rng.integers(lo, hi + 1, size=(200, n_in))
    inputs[0], inputs[1] = lo, hi
    return _c_array("inputs", ctype, inputs.reshape(-1))


def _c_arg(a) -> str:
    """A call's argument in the check's C: tensor 1 is the input x, tensors from 1000 the ops' weights (w<op>),
    the others (10 and up) the ops' own outputs (ref<k>)."""
    if isinstance(a, ConstArg):
        return a.name
    if isinstance(a, TensorArg):
        return "x" if a.index == 1 else f"w{a.index - 1000}" if a.index >= 1000 else f"ref{a.index - 10}"
    return c_expr(a)


def _case_source(name: str, n_in: int, rows: list[int], zps: list[int], clamp, rounding: str, seed: int):
    rng = np.random.default_rng(seed)
    specs = [(1, 10 + k, n_in, r, zp, {"lo": clamp[0], "hi": clamp[1], "rounding": rounding})
             for k, (r, zp) in enumerate(zip(rows, zps))]
    graph, calls = _schedule([(s[0], s[1], s[2], s[3], s[4], dict(s[5])) for s in specs], seed)
    grouped = grouping.group_calls(graph, calls, "g")
    assert len(grouped) == 1 and isinstance(grouped[0], grouping.GroupedCall)
    g = grouped[0]
    src = ""
    for c in [*calls, g]:
        for arr in c.arrays:
            src += _c_array(arr.name, arr.ctype, arr.values)
    n_out = sum(rows)
    src += _c_inputs(rng, n_in, "int8_t", 8)
    arg = _c_arg

    lines = []
    for c in calls:
        lines.append(f"        edgernn_fully_connected_s8({', '.join(arg(a) for a in c.args)});")
    ga = call_args(g)
    outs = ", ".join(f"got{k}" if k < len(rows) else "NULL" for k in range(4))
    # the whole group, then the team's sub-ranges: blocks of 4 rows, pointers advanced as its wrapper does
    whole = (f"        edgernn_fully_connected_group_s8(x, {ga['w'].name}, {ga['bias'].name}, {ga['multiplier'].name}, "
             f"{ga['rnd'].name}, {ga['shift'].name}, {c_expr(ga['rounding'])}, {ga['ends'].name}, 0, {c_expr(ga['act_min'])}, "
             f"{c_expr(ga['act_max'])}, {n_in}, {n_out}, {outs});")
    split = (f"        for (r0 = 0; r0 < {n_out}; r0 += step) {{\n"
             f"            const int r1 = r0 + step < {n_out} ? r0 + step : {n_out};\n"
             f"            edgernn_fully_connected_group_s8(x, {ga['w'].name} + (size_t)r0 * {n_in}, {ga['bias'].name} + r0, "
             f"{ga['multiplier'].name} + r0, {ga['rnd'].name} + r0, {ga['shift'].name} + r0, {c_expr(ga['rounding'])}, "
             f"{ga['ends'].name}, r0, {c_expr(ga['act_min'])}, {c_expr(ga['act_max'])}, {n_in}, r1 - r0, {outs});\n"
             f"        }}")
    # the range function on the argument block the generated code fills at init: the group's base pointers, each
    # worker's rows [r0, r1) in blocks of 4
    block = (f"        const edgernn_fc_group_s8_args_t blk = {{x, {ga['w'].name}, {ga['bias'].name}, "
             f"{ga['multiplier'].name}, {ga['rnd'].name}, {ga['shift'].name}, {ga['ends'].name}, {{{outs}}}, "
             f"{c_expr(ga['rounding'])}, {c_expr(ga['act_min'])}, {c_expr(ga['act_max'])}, {n_in}, 0}};\n")
    ranges = (f"        for (r0 = 0; r0 < {n_out}; r0 += step) {{\n"
              f"            edgernn_fully_connected_group_s8_range(&blk, r0, r0 + step < {n_out} ? r0 + step : {n_out});\n"
              f"        }}")
    decl = "".join(f"    int8_t ref{k}[{r}], got{k}[{r}];\n" for k, r in enumerate(rows))
    cmp = "".join(f"        bad += memcmp(ref{k}, got{k}, {r}) != 0;\n" for k, r in enumerate(rows))
    clear = "".join(f"        memset(got{k}, 0x55, {r});\n" for k, r in enumerate(rows))
    src += f"""
int main(void)
{{
{decl}    int t, r0, step, bad = 0;
    for (t = 0; t < 200; ++t) {{
        const int8_t *x = inputs + (size_t)t * {n_in};
{block}{chr(10).join(lines)}
{clear}{whole}
{cmp}        for (step = 4; step <= 16; step += 4) {{
{clear}{split}
{cmp}{clear}{ranges}
{cmp}        }}
    }}
    printf("%d\\n", bad);
    return 0;
}}
"""
    return "#include <stdio.h>\n#include <string.h>\n#include \"edgernn_kernels.h\"\n" + src


def _check(tmp_path, source: str):
    """check(label, flags): the C check ``source`` against the kernels, built with gcc and ``flags`` and run: its
    count of differing op outputs, as printed."""
    from conftest import require_tools

    require_tools("gcc")
    cc = shutil.which("gcc")
    kdir = tmp_path / "k"          # the reference kernels, and the GAP8 set's beside them for its variant
    shutil.copytree(templates_dir() / "kernels", kdir)
    write_sources(kdir)
    gap8 = tmp_path / "k_gap8"
    shutil.copytree(kdir, gap8)
    for path in (templates_dir() / "targets" / "gap8" / "kernels").iterdir():
        shutil.copyfile(path, gap8 / path.name)
    (tmp_path / "check.c").write_text(source)

    def check(label: str, flags: list[str]) -> str:
        exe = tmp_path / f"check_{label}"
        kernels = gap8 if kernel_set_of(flags) == "gap8" else kdir
        subprocess.run([cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", *flags, f"-I{kernels}",
                        str(tmp_path / "check.c"), str(kernels / "edgernn_fully_connected.c"), "-o", str(exe)],
                       check=True, capture_output=True, text=True)
        return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip()
    return check


@pytest.mark.toolchain
@pytest.mark.parametrize("rounding", ["EDGERNN_ROUND_ONCE", "EDGERNN_ROUND_TWICE_UP"])
@pytest.mark.parametrize("case", list(CASES))
def test_grouped_kernel_gives_each_ops_bytes(tmp_path, case, rounding):
    n_in, rows, zps, clamp = CASES[case]
    check = _check(tmp_path, _case_source(case, n_in, rows, zps, clamp, rounding, seed=len(case)))
    for label, flags in KERNEL_VARIANTS.items():
        out = check(label, flags)
        assert out == "0", f"{case} {rounding} {label}: {out} op outputs (200 inputs, whole and 8 splits) differ"


# ---- the 16x8 group (edgernn_fully_connected_group_s16) ----

def _fc_s16(i: int, src: int, out: int, w: np.ndarray, bias, reals, zp: int = 0, lo: int = -32768, hi: int = 32767,
            rounding: str = "EDGERNN_ROUND_DOUBLE", rows: int = 1) -> Call:
    """A 16x8 FULLY_CONNECTED call as the lowering makes it: its weights a constant tensor (1000 + i)."""
    n_out, n_in = w.shape
    mult, shift = zip(*(qp.quantize_multiplier(float(r)) for r in reals))
    arrays = [ConstArray(f"op{i}_bias", "int64_t", [int(v) for v in bias]),
              ConstArray(f"op{i}_mult", "int32_t", [int(v) for v in mult]),
              ConstArray(f"op{i}_shift", "int32_t", [int(v) for v in shift]),
              ConstArray(f"op{i}_scale", "int64_t", [int(np.float64(r).view(np.int64)) for r in reals])]
    args = {"in": TensorArg(src), "w": TensorArg(1000 + i), "bias": ConstArg(arrays[0].name),
            "multiplier": ConstArg(arrays[1].name), "shift": ConstArg(arrays[2].name),
            "scale": ConstArg(arrays[3].name), "rounding": Enum(rounding), "output_offset": int(zp),
            "act_min": int(lo), "act_max": int(hi), "rows": int(rows), "n_in": int(n_in), "n_out": int(n_out),
            "out": TensorArg(out)}
    return Call(i, "FULLY_CONNECTED", "edgernn_fully_connected_s16",
                kernel("edgernn_fully_connected_s16").order(args), arrays=arrays)


def _schedule_s16(specs, seed: int = 0):
    """specs: (src, out, n_in, n_out, extra kwargs) per 16x8 FC, or ("other", src, out)."""
    def make(i, rng, spec):
        src, out, n_in, n_out, kw = spec
        kw = dict(kw)
        w = rng.integers(-127, 128, size=(n_out, n_in)).astype(np.int8)
        w = kw.pop("w", lambda w: w)(w)
        bias = kw.pop("bias", lambda w: rng.integers(-(1 << 20), 1 << 20, size=n_out))(w)
        reals = kw.pop("reals", rng.uniform(1e-5, 3e-3, size=n_out))
        return _fc_s16(i, src, out, w, bias, reals, **kw), w
    return _schedule_of(specs, seed, make)


@pytest.mark.parametrize("specs,shape", [
    # a CfC cell's four heads of one input, then two of another with a call between
    ([(1, 10, 15, 9, {}), (1, 11, 15, 9, {}), (1, 12, 15, 9, {}), (1, 13, 15, 9, {}), (2, 14, 7, 2, {}),
      ("other", 2, 15), (2, 16, 7, 2, {})], [[0, 1, 2, 3], 4, 5, 6]),
    # the key: another input, another n_in, another clamp, another rounding, another zero point, more than one row
    ([(1, 10, 5, 3, {}), (2, 11, 5, 3, {}), (2, 12, 6, 3, {}), (2, 13, 6, 3, {"lo": 0}),
      (2, 14, 6, 3, {"rounding": "EDGERNN_ROUND_TWICE_UP"}), (2, 15, 6, 3, {"zp": 1}), (2, 16, 6, 3, {"rows": 2})],
     [0, 1, 2, 3, 4, 5, 6]),
])
def test_adjacent_16x8_fcs_of_one_input_are_grouped(specs, shape):
    graph, calls = _schedule_s16(specs)
    out = grouping.group_calls(graph, calls, "m")
    assert _shape(out) == shape
    grouped = [c for c in out if isinstance(c, grouping.GroupedCall)]
    # their sums are bounded to int32 (weights of +-127, 15 inputs, biases below 2^20): the 32-bit form
    assert all(c.fn == grouping.GROUP_S16_WORDS for c in grouped)
    # the members' weight tensors are the group's now, unless another call reads them
    taken = {1000 + m.op_index for c in grouped for m in c.members}
    assert grouping.dropped_consts(out, set(range(1000, 1000 + len(specs)))) == taken


def test_an_int8_and_a_16x8_fc_of_one_input_are_not_grouped():
    graph, calls = _schedule_s16([(1, 10, 6, 3, {}), (1, 11, 6, 3, {})])
    w = np.ones((3, 6), np.int8)
    graph.tensors[1002] = type("T", (), {"data": w})()
    graph.operators.append(type("Op", (), {"inputs": [0, 1002, -1]})())
    calls.append(_fc(2, 1, 12, w, [0] * 3, [1 << 30] * 3, [-5] * 3, 0))
    assert _shape(grouping.group_calls(graph, calls, "m")) == [[0, 1], 2]


def _at_bound(past: int):
    """A bias that puts a row's reach, |bias| + 2^15 * sum |w|, ``past`` beyond INT32_MAX (of the sign of the
    row's first weight, so that the inputs all at -2^15 or all at 2^15 - 1 bring the sum to its bound)."""
    return lambda w: [int(np.sign(r[0]) or 1) * (grouping.INT32_MAX + past - (1 << 15) * int(np.abs(r).sum()))
                      for r in w.astype(np.int64)]


def _extreme(w):
    """Weights of +-127 (their signs random): the largest reach a row of its length has."""
    return np.where(w < 0, -127, 127).astype(np.int8)


# each case: n_in, the ops' rows, clamp, the group's kernel, what the ops' weights, biases and real scales are made
# of where not random (_schedule_s16)
WORDS, WIDE = "edgernn_fully_connected_group_s16_words", "edgernn_fully_connected_group_s16"
CASES_S16 = {
    "4x15to9": (15, [9, 9, 9, 9], (-32768, 32767), WORDS, {}),
    "4x7to2": (7, [2, 2, 2, 2], (-32768, 32767), WORDS, {}),
    "3_ops_4_1_6": (33, [4, 1, 6], (-32768, 32767), WORDS, {}),
    "2x300to5_chunks": (300, [5, 5], (-32768, 32767), WORDS, {}),
    "2x3to3_clamped": (3, [3, 3], (-3000, 20000), WORDS, {}),
    # sums reaching INT32_MAX (and INT32_MIN + 1) exactly at the extreme inputs, scales that keep them in range: the
    # 32-bit form at its bound
    "at_int32_bound": (8, [3, 2], (-32768, 32767), WORDS,
                       {"w": _extreme, "bias": _at_bound(0), "reals": [1.2e-5] * 3}),
    # one past: the 64-bit form (its sums in int64, its chunks)
    "past_int32_bound": (8, [3, 2], (-32768, 32767), WIDE,
                         {"w": _extreme, "bias": _at_bound(1), "reals": [1.2e-5] * 3}),
    # a right shift of 2 (a real scale of 1/4 and more): the 64-bit form, whose requantization takes it; ruy's
    # rounding takes any shift in 32-bit words
    "shift_2": (4, [2, 2], (-32768, 32767), {"EDGERNN_ROUND_DOUBLE": WIDE, "EDGERNN_ROUND_TWICE_UP": WORDS},
                {"reals": [0.3, 0.26]}),
}
ROUNDINGS_S16 = ["EDGERNN_ROUND_DOUBLE", "EDGERNN_ROUND_TWICE_UP"]


def _case_source_s16(n_in: int, rows: list[int], clamp, rounding: str, seed: int, fn: str, made: dict) -> str:
    rng = np.random.default_rng(seed)
    graph, calls = _schedule_s16([(1, 10 + k, n_in, r, {"lo": clamp[0], "hi": clamp[1], "rounding": rounding,
                                                         **{key: (v[:r] if key == "reals" else v)
                                                            for key, v in made.items()}})
                                  for k, r in enumerate(rows)], seed)
    grouped = grouping.group_calls(graph, calls, "g")
    assert len(grouped) == 1 and grouped[0].fn == fn
    g = grouped[0]
    src = "".join(_c_array(arr.name, arr.ctype, arr.values) for c in [*calls, g] for arr in c.arrays)
    src += "".join(_c_array(f"w{c.op_index}", "int8_t", graph.tensors[1000 + c.op_index].data.reshape(-1))
                   for c in calls)
    n_out = sum(rows)
    src += _c_inputs(rng, n_in, "int16_t", 16)
    arg = _c_arg

    lines = "\n".join(f"        edgernn_fully_connected_s16({', '.join(arg(a) for a in c.args)});" for c in calls)
    ga = call_args(g)
    outs = ", ".join(f"got{k}" if k < len(rows) else "NULL" for k in range(4))
    head = (f"{c_expr(ga['rounding'])}, {c_expr(ga['output_offset'])}, {c_expr(ga['act_min'])}, "
            f"{c_expr(ga['act_max'])}, {ga['ends'].name}")
    whole = (f"        {fn}(x, {ga['w'].name}, {ga['bias'].name}, {ga['multiplier'].name}, "
             f"{ga['shift'].name}, {ga['scale'].name}, {head}, 0, {n_in}, {n_out}, {outs});")
    split = (f"        for (r0 = 0; r0 < {n_out}; r0 += step) {{\n"
             f"            const int r1 = r0 + step < {n_out} ? r0 + step : {n_out};\n"
             f"            {fn}(x, {ga['w'].name} + (size_t)r0 * {n_in}, {ga['bias'].name} + r0, "
             f"{ga['multiplier'].name} + r0, {ga['shift'].name} + r0, {ga['scale'].name} + r0, {head}, r0, {n_in}, "
             f"r1 - r0, {outs});\n"
             f"        }}")
    decl = "".join(f"    int16_t ref{k}[{r}], got{k}[{r}];\n" for k, r in enumerate(rows))
    cmp = "".join(f"        bad += memcmp(ref{k}, got{k}, sizeof ref{k}) != 0;\n" for k in range(len(rows)))
    clear = "".join(f"        memset(got{k}, 0x55, sizeof got{k});\n" for k in range(len(rows)))
    return f"""#include <stdio.h>
#include <string.h>
#include "edgernn_kernels.h"
{src}
int main(void)
{{
{decl}    int t, r0, step, bad = 0;
    for (t = 0; t < 200; ++t) {{
        const int16_t *x = inputs + (size_t)t * {n_in};
{lines}
{clear}{whole}
{cmp}        for (step = 1; step <= 4; step += step == 1 ? 2 : 1) {{
{clear}{split}
{cmp}        }}
    }}
    printf("%d\\n", bad);
    return 0;
}}
"""


@pytest.mark.toolchain
@pytest.mark.parametrize("rounding", ROUNDINGS_S16)
@pytest.mark.parametrize("case", list(CASES_S16))
def test_grouped_16x8_kernel_gives_each_ops_bytes(tmp_path, case, rounding):
    """The group against each op's own 16x8 call (held against the interpreter in test_fully_connected_s16.py),
    whole and in the team's sub-ranges of 1, 3 and 4 rows, in a 32-bit core's forms of the kernel and a 64-bit
    host's."""
    n_in, rows, clamp, fn, made = CASES_S16[case]
    fn = fn[rounding] if isinstance(fn, dict) else fn
    check = _check(tmp_path, _case_source_s16(n_in, rows, clamp, rounding, len(case), fn, made))
    for words in ("0", "1"):     # a 64-bit host's forms, a 32-bit core's (test_fully_connected_s16.WORDS)
        out = check(words, [f"-DEDGERNN_S16_WORDS={words}", f"-DEDGERNN_S16_COMPACT={words}"])
        assert out == "0", f"{case} {rounding} words={words}: {out} op outputs (200 inputs, whole and 2 splits) differ"
