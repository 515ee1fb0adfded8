"""Where a step's cycles go, op by op and core by core, from an instruction trace of the firmware.

A board that can trace its cores' instructions (``gvsoc_gap8``: GVSOC's instruction trace, read by
``edgernn.targets.gap8.gvsoc_trace``) hands every traced instruction to a ``StepProfiler``, in the order the
cores ran them: its core, its cycle and its address. An instruction is charged the cycles until its core's
next one, so a multi-cycle instruction or a stall lands on one instruction; the cycles before an
instruction that ends a sleep (GAP8's ``p.elw``, which GVSOC traces when the core wakes) are a wait.

The window is one step: from the master core's N-th entry into ``edgernn_step_body`` to its return there
(the cluster's master core on GAP8, which the firmware's own counter times around the same call). Inside
it the master core runs the step's statements one after the other, as ``model.c`` lists them, each under its
comment ``/* op N: WHAT */``; the ELF's line table (``addr2line``) says which statement each instruction of
the step's body belongs to. A statement lasts, on every core, from the master's first instruction of it
to the master's first instruction of the next: what the master calls (a kernel, the team's split) and what
the other cores run meanwhile (their share of a split op, their wait at its barriers) is charged to it.
A core asleep in its event unit is waiting; every other cycle is work.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from edgernn.errors import EdgeRNNError

STEP_BODY = "edgernn_step_body"
ENTRY = "step entry"                 # the step body's own instructions before its first statement
TAIL = "output and new state"        # its copies of y and of the new state, after the last statement

_OP_COMMENT = re.compile(r"^\s*/\* op (\d+): (.+?) \*/\s*$")
_TAIL_COMMENT = re.compile(r"^\s*/\* y, then the new state")
_TRACED = re.compile(r"EDGERNN_TRACE_OP\((\d+),")
_CALLED = re.compile(r"^\s*(\w+)\((.*)\);")
_LOOP_OPS = re.compile(r"^/\* ops (.+?): one (?:loop|split by units)")   # a fused loop, a split by units


@dataclass
class Statement:
    """One statement of the step's body: an op's kernel call, or a group of ops in one call or loop."""

    label: str                  # "16: ADD+LOGISTIC+MUL", or ENTRY / TAIL
    ops: list[int]              # the step graph's ops it computes (empty for ENTRY and TAIL)
    lines: tuple[int, int]      # its lines in model.c, [first, last]


def step_statements(model_c: str) -> list[Statement]:
    """The statements of ``edgernn_step_body`` in ``model.c``, ENTRY first and TAIL last. A statement's ops
    are its comment's op, the ops whose outputs it traces (a grouped call), and the members of a fused
    loop it runs (the loop's own comment)."""
    lines = model_c.splitlines()
    loops = {}
    for i, line in enumerate(lines):
        m = _LOOP_OPS.match(line)
        if m and i + 1 < len(lines):
            name = re.search(r"\b(\w+)\(", lines[i + 1])
            if name:
                loops[name.group(1)] = [int(n) for n in re.findall(r"(\d+) \(", m.group(1))]
    try:
        start = next(i for i, line in enumerate(lines) if re.match(rf"^static void {STEP_BODY}\(", line))
    except StopIteration:
        raise EdgeRNNError(f"model.c has no {STEP_BODY}: not a firmware edgernn generated") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("}")), len(lines) - 1)
    found = [Statement(ENTRY, [], (start + 1, start + 1))]
    for i in range(start + 1, end + 1):
        line = lines[i]
        m = _OP_COMMENT.match(line)
        if m:
            found.append(Statement(f"{m.group(1)}: {m.group(2)}", [int(m.group(1))], (i + 1, i + 1)))
        elif _TAIL_COMMENT.match(line):
            found.append(Statement(TAIL, [], (i + 1, i + 1)))
        else:
            statement = found[-1]
            statement.lines = (statement.lines[0], i + 1)
            traced = _TRACED.search(line)
            if traced and statement.label not in (ENTRY, TAIL):
                op = int(traced.group(1))
                if op not in statement.ops:
                    statement.ops.append(op)
            called = _CALLED.match(line)
            if called and statement.label not in (ENTRY, TAIL):
                for name in re.findall(r"\b(\w+)\b", called.group(2)) + [called.group(1)]:
                    for op in loops.get(name, []):
                        if op not in statement.ops:
                            statement.ops.append(op)
    if found[-1].label != TAIL:
        found.append(Statement(TAIL, [], (end + 1, end + 1)))
    for statement in found:
        statement.ops.sort()
    return found


# ---- the ELF: symbols, addresses to lines ----

def binutil(board, tool: str) -> str:
    """A binutils program (nm, objdump, addr2line) for the board's ELF: the one beside its compilers."""
    candidates = []
    for cc in (board.toolchain.cc, board.toolchain.check_cc,
               getattr(board.gap_sdk, "debian_cc", None) if board.gap_sdk else None):
        if cc and cc.endswith("gcc"):
            candidates.append(cc[:-3] + tool)
    candidates.append(tool)
    for name in candidates:
        if shutil.which(name):
            return name
    raise EdgeRNNError(f"profiling needs {candidates[0]} (binutils of the board's compiler), which is not installed")


def symbols(elf: Path, nm: str) -> tuple[list[int], list[str]]:
    """The ELF's function symbols, sorted by address."""
    out = subprocess.run([nm, "-n", "--defined-only", str(elf)], capture_output=True, text=True, check=True).stdout
    addrs, names = [], []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            addrs.append(int(parts[0], 16))
            names.append(parts[2])
    return addrs, names


def disassembly(elf: Path, objdump: str, start: int | None = None, stop: int | None = None) -> dict[int, str]:
    """Address -> the instruction's disassembly (of [start, stop) when given)."""
    bounds = [f"--start-address={start:#x}", f"--stop-address={stop:#x}"] if start is not None else []
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", *bounds, str(elf)], capture_output=True,
                         text=True).stdout
    lines = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(.*)$", line)
        if m:
            lines[int(m.group(1), 16)] = m.group(2).strip()
    return lines


def source_lines(elf: Path, addr2line: str, pcs: list[int], source: str) -> dict[int, int]:
    """Address -> its line in the source file named ``source``, the outermost frame of that file where the
    compiler inlined one function into another (addr2line -i)."""
    if not pcs:
        return {}
    out = subprocess.run([addr2line, "-e", str(elf), "-a", "-i", "-p", *[f"{pc:#x}" for pc in pcs]],
                         capture_output=True, text=True, check=True).stdout
    found: dict[int, int] = {}
    pc = None
    for line in out.splitlines():
        m = re.match(r"^0x([0-9a-f]+): (.*)$", line)
        text = line
        if m:
            pc, text = int(m.group(1), 16), m.group(2)
        text = text.strip().removeprefix("(inlined by) ")
        where = re.match(r"^(.*?):(\d+)", text.split(" at ")[-1])
        if pc is not None and where and Path(where.group(1)).name == source:
            found[pc] = int(where.group(2))      # later frames are outer ones: the last one stays
    return found


@dataclass
class StepMap:
    """The step's body in one ELF: where it starts, and which statement each of its instructions is of."""

    entry: int
    statements: list[Statement]
    at_pc: dict[int, int]                       # address in the step's body -> statement index
    addrs: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, elf: Path, model_c: Path, board) -> "StepMap":
        statements = step_statements(Path(model_c).read_text())
        addrs, names = symbols(elf, binutil(board, "nm"))
        if STEP_BODY not in names:
            raise EdgeRNNError(f"{elf} has no symbol {STEP_BODY}: not a firmware edgernn generated")
        k = names.index(STEP_BODY)
        entry = addrs[k]
        stop = next((a for a in addrs[k + 1:] if a > entry), entry + 0x10000)
        pcs = sorted(disassembly(elf, binutil(board, "objdump"), entry, stop))
        lines = source_lines(elf, binutil(board, "addr2line"), pcs, Path(model_c).name)
        if not lines:
            raise EdgeRNNError(f"{elf} has no line table for {Path(model_c).name}: build it with -g to profile it")
        starts = [s.lines[0] for s in statements]
        at_pc = {}
        for pc, line in lines.items():
            if line >= starts[0]:
                at_pc[pc] = bisect.bisect_right(starts, line) - 1
        return cls(entry, statements, at_pc, addrs, names)

    def function(self, pc: int) -> str:
        k = bisect.bisect_right(self.addrs, pc) - 1
        return self.names[k] if k >= 0 else "?"


class StepProfiler:
    """Instructions in, a step's profile out: ``instruction`` for each traced instruction in the order
    the cores ran them, then ``result``. ``done`` turns true once the window has closed."""

    def __init__(self, step_map: StepMap, step: int, master: int = 0):
        self.map, self.step, self.master = step_map, step, master
        self.entries = 0
        self.start = self.end = None
        self.ret = None
        self.link = None                    # the master's return address, as its last call set it
        self.pending: dict[int, tuple[int, int]] = {}
        self.now = 0                        # the master's statement
        self.changes: list[int] = []        # cycles at which the master's statement changed
        self.statement_at: list[int] = []   # ... and the statement from then on
        # (core, statement, pc) -> [cycles, instructions]; (core, statement) -> cycles asleep
        self.cells: dict[tuple[int, int, int], list[int]] = defaultdict(lambda: [0, 0])
        self.waits: dict[tuple[int, int], int] = defaultdict(int)
        self.cores: set[int] = set()
        self.unsettled: set[int] = set()    # cores whose instruction at the window's end has not ended yet

    @property
    def done(self) -> bool:
        """Whether the window has closed and every core's last instruction in it has been charged."""
        return self.end is not None and not self.unsettled

    def instruction(self, core: int, cycle: int, pc: int, woke: bool = False, link: int | None = None) -> None:
        """One instruction of ``core`` at ``cycle``; ``woke``: it ends a sleep, so the core waited since its
        previous instruction; ``link``: the return address it writes (a call)."""
        before = self.pending.get(core)
        if self.end is not None:
            # after the window: a core's instruction that was running at its end is charged up to it,
            # as a wait when the core was asleep
            if core in self.unsettled:
                self.unsettled.discard(core)
                self._charge(core, before, cycle, woke)
            return
        self.cores.add(core)
        if core == self.master:
            if self.start is None and pc == self.map.entry:
                self.entries += 1
                if self.entries == self.step + 1:
                    self.start, self.ret = cycle, self.link
                    self.changes, self.statement_at = [cycle], [0]
                    self.now = 0
            elif self.start is not None and pc == self.ret:
                self._close(cycle)
                return
            if link is not None:
                self.link = link
        self.pending[core] = (pc, cycle)
        if self.start is None:
            return
        if before is not None:
            self._charge(core, before, cycle, woke)
        if core == self.master and pc in self.map.at_pc and self.map.at_pc[pc] != self.now:
            self.now = self.map.at_pc[pc]
            self.changes.append(cycle)
            self.statement_at.append(self.now)

    def _close(self, cycle: int) -> None:
        self._charge(self.master, self.pending[self.master], cycle, False)
        self.end = cycle
        self.unsettled = {core for core in self.pending if core != self.master}

    def finish(self) -> None:
        """The trace has ended: a core that never ran again after the window slept through its end."""
        for core in sorted(self.unsettled):
            self._charge(core, self.pending[core], self.end, True)
        self.unsettled.clear()

    def _charge(self, core: int, before: tuple[int, int], until: int, waits: bool) -> None:
        pc, since = before
        since = max(since, self.start)
        until = min(until, self.end) if self.end is not None else until
        if until <= since:
            return
        if core == self.master:
            self._add(core, self.now, pc, since, until, waits, True)
            return
        k = max(bisect.bisect_right(self.changes, since) - 1, 0)
        first = True
        while since < until:
            stop = self.changes[k + 1] if k + 1 < len(self.changes) else until
            stop = min(stop, until)
            self._add(core, self.statement_at[k], pc, since, stop, waits, first)
            first = False
            since, k = stop, k + 1

    def _add(self, core: int, statement: int, pc: int, since: int, until: int, waits: bool, counted: bool) -> None:
        cell = self.cells[(core, statement, pc)]
        cell[0] += until - since
        cell[1] += 1 if counted else 0
        if waits:
            self.waits[(core, statement)] += until - since

    def result(self) -> dict:
        """The profile of the step: its cycles, and per statement its cycles (on the master core, from its
        start to the next statement's) and each core's work and wait in it."""
        if self.end is None or self.unsettled:
            raise EdgeRNNError(f"the trace ended before step {self.step + 1}'s body returned "
                               f"({self.entries} entries into {STEP_BODY} seen)")
        cores = sorted(self.cores)
        rows = []
        for s, statement in enumerate(self.map.statements):
            busy = {c: 0 for c in cores}
            for (core, st, _pc), (cycles, _n) in self.cells.items():
                if st == s:
                    busy[core] += cycles
            wall = busy[self.master]
            if wall == 0 and statement.label in (ENTRY, TAIL):
                continue
            waits = {c: self.waits.get((c, s), 0) for c in cores}
            rows.append({"label": statement.label, "ops": list(statement.ops), "cycles": wall,
                         "work": [busy[c] - waits[c] for c in cores], "wait": [waits[c] for c in cores]})
        total = self.end - self.start
        return {"step": self.step, "cycles": total, "cores": cores, "statements": rows,
                "work": [sum(r["work"][i] for r in rows) for i in range(len(cores))],
                "wait": [sum(r["wait"][i] for r in rows) for i in range(len(cores))]}

    def by_function(self, core: int | None = None) -> dict[str, list[int]]:
        """Function -> [cycles, instructions] in the window (of one core, or of all)."""
        found: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for (c, _st, pc), (cycles, n) in self.cells.items():
            if core is None or c == core:
                cell = found[self.map.function(pc)]
                cell[0] += cycles
                cell[1] += n
        return dict(found)

    def by_pc(self, core: int | None = None) -> dict[int, list[int]]:
        """Address -> [cycles, times run] in the window (of one core, or of all)."""
        found: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for (c, _st, pc), (cycles, n) in self.cells.items():
            if core is None or c == core:
                found[pc][0] += cycles
                found[pc][1] += n
        return dict(found)


class TracePipe:
    """A named pipe an emulator writes its instruction trace into, read by a thread as it is written, so a
    trace never fills a disk: ``read(lines)`` gets the pipe's lines and must read them to the end."""

    def __init__(self, read):
        self.folder = Path(tempfile.mkdtemp(prefix="edgernn_trace_"))
        self.path = self.folder / "insn.trace"
        os.mkfifo(self.path)
        self.failure: list[BaseException] = []

        def reader() -> None:
            try:
                with open(self.path, errors="replace") as lines:
                    read(lines)
            except BaseException as exc:  # noqa: BLE001 - raised by check()
                self.failure.append(exc)

        self.thread = threading.Thread(target=reader, name="trace-pipe", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Once the emulator has ended: the reader has its end of file (also when the emulator never opened
        the pipe), and the pipe is gone."""
        for _ in range(600):
            if not self.thread.is_alive():
                break
            with contextlib.suppress(OSError):      # a reader still waiting for a writer gets its end of file
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            self.thread.join(timeout=0.1)
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            self.folder.rmdir()

    def check(self) -> None:
        if self.failure:
            raise self.failure[0]


def call_returns(elf: Path, objdump: str) -> dict[int, int]:
    """The ELF's calls (RISC-V's jal, jalr: they write ra; Arm's bl, blx: lr): address -> the return address (the
    next instruction's)."""
    out = subprocess.run([objdump, "-d", str(elf)], capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{2,8} )+)\s*(\S+)", line)
        if m and m.group(3) in ("jal", "jalr", "bl", "blx"):
            size = sum(len(word) for word in m.group(2).split()) // 2
            found[int(m.group(1), 16)] = int(m.group(1), 16) + size
    return found


class TracedRun:
    """A firmware running in an emulator that traces its instructions into a ``TracePipe``, read as written.
    A board's subclass starts the emulator (``_launch``) and says how to wait for its end (``_wait``). Drive the
    firmware over its UART (``url``), end it with BYE, then ``result()``; ``stop()`` (always, or ``with``) ends
    the emulator and the reader."""

    source = ""

    def __init__(self, board, profiler: StepProfiler, read):
        self.board = board
        self.profiler = profiler
        self.pipe = TracePipe(read)
        self.emulator = None

    def _launch(self, start) -> None:
        try:
            self.emulator = start()
        except BaseException:
            self.stop()
            raise
        self.url = self.emulator.url

    def _wait(self, timeout: float) -> None:
        raise NotImplementedError

    def result(self) -> dict:
        """The profile, once the firmware has ended (an emulator writes out the trace it buffers as it exits)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._wait(self.board.serial.timeout_s)
        self.stop()
        self.pipe.check()
        return {**self.profiler.result(), "source": self.source}

    def stop(self) -> None:
        if self.emulator is not None:
            self.emulator.stop()
        self.pipe.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
