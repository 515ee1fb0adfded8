"""The int8 FULLY_CONNECTED requantization of GAP8 builds (edgernn_fully_connected.c: the Xpulp block of 8 and
4 outputs, and the C it falls back to), byte for byte against Python's reference, in GVSOC; and
edgernn_mbqm_hi_tight and edgernn_halves (edgernn_fixedpoint.h: the depthwise convolution's requantizations)
on the same cases, against MultiplyByQuantizedMultiplier.

A firmware (tests/fixtures/gap8_requant/main.c) runs edgernn_fully_connected_s8 on an input of zeros, so that
each output row's accumulator is its bias: the table below gives (multiplier, shift, accumulator) cases
that reach the edge cases (INT32_MIN and INT32_MAX, the rounding ties of both roundings, negative values at
ties, the smallest right shift of the Xpulp form, the shifts it leaves to the C: -1, 0 and left shifts),
each under several zero points and clamps. The reference is edgernn/backend/requant_proof.py's, written
from TFLite's formulas (the same values as edgernn_fixedpoint.h's C, checked on the host in
tests/backend/test_requant_proof.py)."""

from __future__ import annotations

import re
import shutil
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import require_gap_sdk, require_tools

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "gvsoc_gap8"
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "gap8_requant"
DONE = b"~~~REQUANT DONE~~~"
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def xpulp_cases() -> list[tuple[int, int, int]]:
    """(multiplier, shift, accumulator) with shift <= -2: the Xpulp form's."""
    cases = []
    # 0x7FFE8000 and INT32_MAX: edgernn_halves' low half >= 2^15 (its high half + 1 just below 2^15, and 2^15)
    for m in (1 << 30, (1 << 30) + 1, 1518500250, 0x7FFE8000, INT32_MAX):
        for shift in (-2, -3, -7, -10, -20, -31):
            e = -shift
            accs = [0, 1, -1, INT32_MIN, INT32_MAX, INT32_MIN + 1]
            if m in (1 << 30, (1 << 30) + 1):
                # acc * m / 2^(31+e) = acc / 2^(1+e) (plus acc / 2^(62+e) for 2^30 + 1): a tie of the one rounding
                # (m = 2^30) and of the second of the two (both) at odd multiples of 2^e, and
                # of the first rounding of the two at odd accumulators
                accs += [(1 << e), -(1 << e), 3 * (1 << e), -3 * (1 << e), (1 << e) + 1, -(1 << e) - 1,
                         (1 << e) - 1, -(1 << e) + 1, 1 << (e + 1), -(1 << (e + 1)) - 1]
            else:
                accs += [12345, -12345, 1 << 20, -(1 << 20), 987654321, -987654321,
                         (1 << 30) - 1, -(1 << 30), 65535, -65536, -65537]   # edgernn_halves' ends and halves
            cases += [(m, shift, a) for a in accs if INT32_MIN <= a <= INT32_MAX]
    rng = np.random.default_rng(7)
    for _ in range(64):
        cases.append((int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(-14, -1)),
                      int(rng.integers(-(1 << 24), 1 << 24))))
    return cases


def c_cases() -> list[tuple[int, int, int]]:
    """shift -1, 0 and left shifts (the C path); accumulators small enough that x * 2^shift and the rescale
    plus a zero point stay in int32 (TFLite's preconditions)."""
    cases = []
    for m in (1 << 30, 1518500250, INT32_MAX):
        for shift in (-1, 0, 1, 3):
            for a in (0, 1, -1, 2, -2, 3, -3, 100, -100, 1 << 12, -(1 << 12) - 1):
                cases.append((m, shift, a))
    return cases


CONFIGS = [  # (rounding, zero point, act_min, act_max)
    ("EDGERNN_ROUND_ONCE", 0, -128, 127),
    ("EDGERNN_ROUND_ONCE", -7, -128, 127),
    ("EDGERNN_ROUND_TWICE_UP", 3, -128, 127),
    ("EDGERNN_ROUND_TWICE_UP", -128, -128, 127),
    ("EDGERNN_ROUND_ONCE", 5, 5, 127),
    ("EDGERNN_ROUND_TWICE_UP", 0, -100, 60),
]


def table() -> list[tuple[int, int, int]]:
    """The Xpulp cases in whole blocks of 8 first (a block with one C case is written again by the C), then
    the C cases, then a block of 4 and single rows."""
    fast = xpulp_cases()
    slow = c_cases()
    fast = fast[: len(fast) // 8 * 8]
    rows = fast + slow
    while (len(rows) - 4 - 3) % 8:
        rows.append(fast[len(rows) % len(fast)])
    return rows + fast[:4] + fast[4:7]


def expected(rows, config) -> bytes:
    from edgernn.backend import requant_proof as rp

    rounding, zp, lo, hi = config
    mode = rp.ROUND_TWICE_UP if rounding.endswith("TWICE_UP") else rp.ROUND_ONCE
    return bytes(rp.exact_requantize_int(a, m, s, mode, zp, lo, hi) & 0xFF for (m, s, a) in rows)


def stage(work: Path, board, rows) -> Path:
    import jinja2

    from edgernn._version import __version__
    from edgernn.backend.codegen import copy_kernels, render_hal_templates
    from edgernn.resources import templates_dir

    project = work / "project"
    project.mkdir(parents=True)
    sources = copy_kernels(project, board, ("edgernn_fully_connected_s8",))
    shutil.copyfile(FIXTURE / "main.c", project / "main.c")
    for name in ("hal.c", "init_failed.h"):
        shutil.copyfile(templates_dir() / "targets" / "gap8" / "hal" / name, project / name)
    shutil.copyfile(templates_dir() / "firmware" / "hal.h", project / "hal.h")
    cases = [{"acc_c": f"({a + 1} - 1)" if a == INT32_MIN else str(a), "multiplier": m, "shift": s}
             for (m, s, a) in rows]
    configs = [{"rounding_c": r, "zero_point": zp, "act_min": lo, "act_max": hi} for (r, zp, lo, hi) in CONFIGS]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(FIXTURE)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    (project / "cases.h").write_text(env.get_template("cases.h.j2").render(cases=cases, configs=configs))
    render_hal_templates(board, project, {"version": __version__, "sha256": "(requant test, no model)"},
                         [*sources, "main.c", "hal.c"])
    return project


def run_firmware(elf: Path, board, timeout: float = 300.0) -> bytes:
    from edgernn.targets import device as devices

    data = b""
    with devices.start(elf, board) as device:
        host, port = device.url.split("://", 1)[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            deadline = time.monotonic() + timeout
            while DONE not in data and time.monotonic() < deadline:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
    return data


@pytest.mark.parametrize("variant", [
    pytest.param({"EDGERNN_CLUSTER_CORES": 0, "EDGERNN_XPULP": 1}, id="xpulp"),
    pytest.param({"EDGERNN_CLUSTER_CORES": 0, "EDGERNN_XPULP": 0}, id="portable-c"),
])
def test_fc_requantization_bytes_in_gvsoc(tmp_path, variant):
    from edgernn.backend import quantparams as qp

    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    from edgernn.targets import device as devices
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.targets.gap8.adapter import build_gap_project

    gap_sdk.build_gvsoc()
    board = devices.load_board(BOARD)
    rows = table()
    project = stage(tmp_path, board, rows)
    elf = build_gap_project(project, board, make_vars=variant, image=False).elf
    data = run_firmware(elf, board)
    lines = re.findall(rb"REQUANT ([0-9a-f]+)", data)
    assert DONE in data and len(lines) == len(CONFIGS), data[-300:]
    for config, line in zip(CONFIGS, lines):
        got = bytes.fromhex(line.decode())
        want = expected(rows, config)
        bad = [(rows[k], got[k], want[k]) for k in range(len(rows)) if got[k] != want[k]]
        assert not bad, f"{config}: {len(bad)} of {len(rows)} bytes differ, e.g. {bad[:5]}"
    tight = re.search(rb"TIGHT ([0-9a-f]+)", data)
    assert tight is not None, data[-300:]
    words = tight.group(1).decode()
    got = [int(words[8 * k: 8 * k + 8], 16) for k in range(len(rows))]
    taken = [k for k, (m, s, _) in enumerate(rows) if m > 1 << 30 and s <= -2]
    assert len(taken) > 100
    bad = [(rows[k], got[k]) for k in taken if got[k] != qp.mbqm(rows[k][2], rows[k][0], rows[k][1]) & 0xFFFFFFFF]
    assert not bad, f"edgernn_mbqm_hi_tight: {len(bad)} of {len(taken)} differ, e.g. {bad[:5]}"
    halves = re.search(rb"HALVES ([0-9a-f]+)", data)
    assert halves is not None, data[-300:]
    words = halves.group(1).decode()
    got = [int(words[8 * k: 8 * k + 8], 16) for k in range(len(rows))]
    taken = [k for k, (m, s, a) in enumerate(rows) if -(1 << 30) <= a < 1 << 30 and 1 <= -s <= 22 and m >= 1 << 30
             and (m & 0xFFFF8000) != 0x7FFF8000]
    assert len(taken) > 100
    bad = [(rows[k], got[k]) for k in taken if got[k] != qp.mbqm(rows[k][2], rows[k][0], rows[k][1]) & 0xFFFFFFFF]
    assert not bad, f"edgernn_halves: {len(bad)} of {len(taken)} differ, e.g. {bad[:5]}"
