"""The profiler's arithmetic, without a simulator: model.c's statements and their ops, GVSOC's trace lines,
and a step's cycles charged to statements and cores from a stream of instructions."""

from __future__ import annotations

import pytest

from edgernn.targets.gap8.gvsoc_trace import read_trace
from edgernn.targets.profile import ENTRY, TAIL, Statement, StepMap, StepProfiler, step_statements

# The shape model.j2 writes: a fused loop's own comment names its ops; a grouped call traces each member.
MODEL_C = """\
/* ops 6 (ADD), 7 (LOGISTIC), 9 (MUL): one loop, intermediates in registers */
static void edgernn_step_fused9(const void *args, int begin, int end)
{
    int i;
}

static void edgernn_step_body(void *arg)
{
    const edgernn_in_t *x = ((const edgernn_step_io_t *)arg)->x;
    (void)x;
    /* op 0: FULLY_CONNECTED */
    edgernn_team_fully_connected_group_s8(x, w, 3, EDGERNN_ARENA(int8_t, 0));
    EDGERNN_TRACE_OP(0, EDGERNN_ARENA(int8_t, 0), 16);
    EDGERNN_TRACE_OP(2, EDGERNN_ARENA(int8_t, 16), 16);
    EDGERNN_TRACE_OP(4, EDGERNN_ARENA(int8_t, 32), 16);
    /* op 5: STRIDED_SLICE */
    memcpy((uint8_t *)(void *)EDGERNN_ARENA(int8_t, 48) + 0 * 1, x + 2 * 1, 4 * 1);
    /* op 9: ADD+LOGISTIC+MUL */
    edgernn_team_split(edgernn_step_fused9, x, 16, 1);
    EDGERNN_TRACE_OP(9, EDGERNN_ARENA(int8_t, 64), 16);

    /* y, then the new state replaces the old one */
    edgernn_move_bytes(y, EDGERNN_ARENA(int8_t, 64), 1);
}
"""


def test_the_statements_of_the_step_body_and_their_ops():
    found = step_statements(MODEL_C)
    assert [(s.label, s.ops) for s in found] == [
        (ENTRY, []), ("0: FULLY_CONNECTED", [0, 2, 4]), ("5: STRIDED_SLICE", [5]),
        ("9: ADD+LOGISTIC+MUL", [6, 7, 9]), (TAIL, [])]
    # each statement's lines run up to the next one's comment
    assert [s.lines[0] for s in found] == [7, 11, 16, 18, 22]
    assert found[1].lines == (11, 15)


# GVSOC's lines as its debug build writes them (colours and all)
GVSOC_LINES = [
    "695639745883: 121178624: [\x1b[34m/sys/board/chip/cluster/pe0/insn       \x1b[0m] M 1c00554c c.jalr"
    "              ra, s7, 0, 0      ra=1c00554e  s7:1c00625c\n",
    "695639757247: 121178626: [\x1b[34m/sys/board/chip/cluster/pe0/insn       \x1b[0m] M 1c00625c c.addi16sp"
    "          sp, sp, -80       sp=10007060  sp:100070b0\n",
    "695640478861: 121178753: [\x1b[34m/sys/board/chip/cluster/pe3/insn       \x1b[0m] M 1c00544c p.elw"
    "               a5, 0(s1)         a5=00000000\n",
    "not a trace line\n",
]


class Recorder:
    done = False
    end = None

    def __init__(self):
        self.seen = []

    def instruction(self, core, cycle, pc, woke=False, link=None):
        self.seen.append((core, cycle, pc, woke, link))


def test_gvsoc_trace_lines_give_core_cycle_address_wake_and_return_address():
    recorder = Recorder()
    read_trace(GVSOC_LINES, recorder)
    assert recorder.seen == [(0, 121178624, 0x1C00554C, False, 0x1C00554E),
                             (0, 121178626, 0x1C00625C, False, None),
                             (3, 121178753, 0x1C00544C, True, None)]


ENTRY_PC, RET, CALLER = 0x100, 0x504, 0x500
# the step body: 0x100-0x10f entry, 0x110-0x11f statement 1, 0x120-0x12f statement 2, 0x130- tail
STEP_MAP = StepMap(entry=ENTRY_PC, statements=[Statement(ENTRY, [], (1, 1)), Statement("1: FULLY_CONNECTED", [1], (2, 2)),
                                               Statement("2: TANH", [2], (3, 3)), Statement(TAIL, [], (4, 4))],
                   at_pc={0x100: 0, 0x110: 1, 0x120: 2, 0x130: 3}, addrs=[0x100, 0x200, 0x300],
                   names=["edgernn_step_body", "kernel", "worker_loop"])


def one_step(profiler: StepProfiler, t0: int, worker_after: list[tuple[int, int, bool]]) -> None:
    """One step in the order a trace gives it: the master calls the body at t0, statement 1 is shared with
    core 1 (the master calls the kernel, core 1 wakes and works), statement 2 and the tail are the master's."""
    m, w = 0, 1
    profiler.instruction(m, t0 - 2, CALLER, link=RET)        # the call of the body
    profiler.instruction(m, t0, ENTRY_PC)                     # entry: 10 cycles
    profiler.instruction(m, t0 + 10, 0x110)                   # statement 1 starts
    profiler.instruction(m, t0 + 12, 0x200)                   # the master in the kernel: 50 cycles
    profiler.instruction(w, t0 + 15, 0x300, woke=True)        # core 1 wakes: asleep since its last instruction
    profiler.instruction(w, t0 + 16, 0x200)                   # core 1 in the kernel: 40 cycles
    profiler.instruction(w, t0 + 56, 0x300)                   # core 1 back in its loop, then asleep
    profiler.instruction(m, t0 + 62, 0x120)                   # statement 2: 30 cycles
    profiler.instruction(m, t0 + 92, 0x130)                   # the tail: 8 cycles
    profiler.instruction(m, t0 + 100, RET)                    # back in the caller: the window ends
    for core, dt, woke in worker_after:
        profiler.instruction(core, t0 + dt, 0x300, woke=woke)


@pytest.mark.parametrize("after, asleep_after_kernel", [
    ([(1, 140, True)], True),        # core 1 wakes for the next step: it slept from its share's end on
    ([(1, 140, False)], False),      # core 1's next instruction does not end a sleep: it ran on (spinning)
    ([], True),                      # the trace ends with core 1 asleep
], ids=["woken-later", "ran-on", "trace-ended"])
def test_a_step_is_charged_to_its_statements_and_cores(after, asleep_after_kernel):
    profiler = StepProfiler(STEP_MAP, step=1)
    one_step(profiler, 1000, [(1, 1050, True)])               # step 0: not profiled
    profiler.instruction(1, 1990, 0x300)                       # core 1 goes to sleep before step 1
    one_step(profiler, 2000, after)
    if not after:
        assert not profiler.done
        profiler.finish()
    assert profiler.done
    result = profiler.result()
    assert result["cycles"] == 100 and result["cores"] == [0, 1]
    rows = {r["label"]: r for r in result["statements"]}
    assert list(rows) == [ENTRY, "1: FULLY_CONNECTED", "2: TANH", TAIL]
    assert [rows[k]["cycles"] for k in rows] == [10, 52, 30, 8]
    assert sum(r["cycles"] for r in result["statements"]) == result["cycles"]
    # the master works throughout; core 1 sleeps until t+15 (the entry's 10 cycles, 5 of statement 1),
    # works 41 (its wake-up and its share), then from t+56 to the window's end (6 cycles of statement 1,
    # statement 2's 30 and the tail's 8) either sleeps or runs on
    assert result["work"][0] == 100 and result["wait"][0] == 0
    assert [rows[k]["wait"][1] for k in rows] == ([10, 11, 30, 8] if asleep_after_kernel else [10, 5, 0, 0])
    assert [rows[k]["work"][1] for k in rows] == ([0, 41, 0, 0] if asleep_after_kernel else [0, 47, 30, 8])
    assert [w + s for w, s in zip(result["work"], result["wait"])] == [100, 100]


def test_a_trace_that_ends_before_the_step_returns_says_so():
    profiler = StepProfiler(STEP_MAP, step=3)
    one_step(profiler, 1000, [])
    with pytest.raises(Exception, match="before step 4's body returned .1 entries"):
        profiler.result()


@pytest.mark.parametrize("team, whole, labels", [
    (106, 180, ["team: call into the body, counter",
                "fabric controller: dispatch, wake-up"]),
    (None, 112, ["call around the body"]),     # a board without a team count (QEMU)
    (100, 100, []),                                         # nothing outside the window: no row of 0
], ids=["cluster", "one-core", "nothing-outside"])
def test_the_rows_outside_the_window_make_the_profile_add_up_to_the_whole_step(team, whole, labels):
    """An accounting identity, not a timing: the body's rows plus the rows for the team's call and counter and
    the fabric controller's share add up to the whole step the firmware counted, on every core as work plus
    wait; outside the body only the master works (in the team's call), the others wait."""
    from edgernn.validate.run import outside_rows

    profiler = StepProfiler(STEP_MAP, step=1)
    one_step(profiler, 1000, [(1, 1050, True)])
    profiler.instruction(1, 1990, 0x300)
    one_step(profiler, 2000, [(1, 140, True)])
    raw = profiler.result()
    extra = outside_rows(raw, team, whole)
    assert [r["label"] for r in extra] == labels
    rows = raw["statements"] + extra
    assert sum(r["cycles"] for r in rows) == whole
    for k in range(len(raw["cores"])):
        assert sum(r["work"][k] + r["wait"][k] for r in rows) == whole
    for r in extra:
        assert r["ops"] == [] and r["outside"] and r["work"][1] == 0
        assert r["work"][0] == (r["cycles"] if not r["label"].startswith("fabric") else 0)
