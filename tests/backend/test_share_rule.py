"""Which calls the team shares: by cost on a board with ``[parallel] split_cycles`` (GAP8's cluster), by
output count elsewhere; the estimate and the rule of edgernn/backend/parallel.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from edgernn.backend.fusion import FusedCall
from edgernn.backend.kernels import BY_NAME
from edgernn.backend.lowering import Call
from edgernn.backend.parallel import (CYCLES_PER_FUSED_OP, CYCLES_PER_MAC, CYCLES_PER_MAC_S16, CYCLES_PER_ROW,
                                      CYCLES_PER_ROW_S16, estimate_cycles, share_calls, share_rule)
from edgernn.targets.board import Parallel

# the part of a board the rule reads: its typed [parallel] table
GAP8 = SimpleNamespace(parallel=Parallel(workers=8, min_count=32, split_cycles=150))
BY_COUNT = SimpleNamespace(parallel=Parallel(workers=8, min_count=32))
ONE_WORKER = SimpleNamespace(parallel=Parallel(workers=1, split_cycles=150))


def fc(n_in: int, n_out: int, rows: int = 1, fn: str = "edgernn_fully_connected_s8") -> Call:
    names = BY_NAME[fn].arg_names
    values = {"rows": rows, "n_in": n_in, "n_out": n_out}
    return Call(0, "FULLY_CONNECTED", fn, [values.get(n) for n in names])


def fc16(n_in: int, n_out: int, rows: int = 1) -> Call:
    return fc(n_in, n_out, rows, "edgernn_fully_connected_s16")


def sum_thresholds(outer: int, reduced: int, inner: int, fn: str = "edgernn_sum_thresholds_s8") -> Call:
    names = BY_NAME[fn].arg_names
    values = {"outer": outer, "reduced": reduced, "inner": inner, "stride": inner, "n_thresholds": 255, "first": -128}
    return Call(0, "SUM", fn, [values.get(n) for n in names])


def sum16(outer: int, reduced: int, inner: int) -> Call:
    return sum_thresholds(outer, reduced, inner, "edgernn_sum_s16")


def fused(n: int, ops: int) -> FusedCall:
    return FusedCall(0, "ADD", "edgernn_step_fused0", [], members=[object()] * ops, n=n)


# (call, board, shared): tiny ops stay on one core under the cost rule, where the split's cost outweighs
# the share the busiest core is spared; the count rule looks at the outputs alone
CASES = [
    (lambda: fc(15, 36), GAP8, True),        # 5 grains of 8 rows: the busiest core has 8 of 36
    (lambda: fc(7, 8), GAP8, False),         # one grain: one core does it all, plus the split
    (lambda: fc(64, 256), GAP8, True),
    (lambda: fc16(12, 9), GAP8, True),       # 16x8: a row's requantization; grains of one row
    (lambda: fc16(7, 8), GAP8, True),        # where the int8 kernel's one grain of 8 keeps one core
    (lambda: fc16(7, 4), GAP8, True),        # a row a core
    (lambda: fc16(7, 1), GAP8, False),       # one row: one core does it all, plus the split
    (lambda: fc16(12, 9), BY_COUNT, False),
    (lambda: fused(9, 6), GAP8, True),       # 9 elements of 6 fused ops: 2 on the busiest core
    (lambda: fused(2, 1), GAP8, False),      # 50 cycles of work against 150 of split
    (lambda: fc(15, 36), BY_COUNT, True),    # 36 outputs >= 32
    (lambda: fc(14, 20), BY_COUNT, False),
    (lambda: fused(9, 6), BY_COUNT, False),
    (lambda: fc(64, 256), ONE_WORKER, False),
    (lambda: sum_thresholds(1, 16, 16), GAP8, True),    # LTC's: 16 outputs, each 16 reductions and a search
    (lambda: sum_thresholds(2, 16, 16), GAP8, False),   # more than one outer row: the team cannot split it
    (lambda: sum_thresholds(1, 16, 16), BY_COUNT, False),
    (lambda: sum16(1, 16, 16), GAP8, True),             # its int16 form (no search): 16 outputs of 16
    (lambda: sum16(1, 16, 2), GAP8, False),             # 2 outputs of 16: 128 cycles against 150 of split
    (lambda: sum16(2, 16, 16), GAP8, False),
]


@pytest.mark.parametrize("make, board, shared", CASES)
def test_a_call_is_shared_where_the_team_gains(make, board, shared):
    call = make()
    before = call.fn
    assert share_calls([call], share_rule(board)) == ([call.op_index] if shared else [])
    if isinstance(call, FusedCall):
        assert call.team is shared
    else:
        assert (call.fn != before) is shared
        assert call.fn == (BY_NAME[before].team_name if shared else before)


def test_the_estimate_counts_rows_macs_and_fused_ops():
    assert estimate_cycles(fc(15, 36)) == 36 * (CYCLES_PER_ROW + 15 * CYCLES_PER_MAC)
    assert estimate_cycles(fc(15, 36, rows=3)) == 3 * 36 * (CYCLES_PER_ROW + 15 * CYCLES_PER_MAC)
    assert estimate_cycles(fc16(12, 9)) == 9 * (CYCLES_PER_ROW_S16 + 12 * CYCLES_PER_MAC_S16)
    assert estimate_cycles(fused(9, 6)) == 9 * 6 * CYCLES_PER_FUSED_OP
    # a kernel without an estimate: the count rule decides even on a cost board
    assert estimate_cycles(Call(0, "RESHAPE", "edgernn_copy", [])) is None


def test_the_boards_say_which_rule():
    from edgernn.targets.board import load_board

    deck = share_rule(load_board("ai_deck"))
    assert deck.split_cycles == 150 and deck.workers == 8
    assert share_rule(load_board("gvsoc_gap8")) == deck
    assert share_rule(load_board("host")).split_cycles is None
    assert share_rule(None).split_cycles is None
