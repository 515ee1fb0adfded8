"""A step of a GAP8 firmware profiled in GVSOC, from its instruction trace of the cluster's cores.

GVSOC's debug build (``gvsoc_launcher_debug``: the only one with traces compiled in) runs the firmware with
the instruction trace of every cluster core on. The trace goes into a named pipe and is read while it is
written, so it never fills a disk: a thread hands each line to a ``StepProfiler``
(edgernn.targets.profile) and, once the profiled step's window has closed, drains the rest. The host
feeds the firmware a few steps over the UART, the first ones warming the instruction cache, then ends it
(BYE), so that GVSOC exits and writes out the trace it still buffers (``GvsocTracedRun``).

A line of the trace: ``<time ps>: <cycles>: [<component>] <mode> <pc> <mnemonic> <operands and values>``;
the cycles are the cluster's clock, shared by its cores. A call shows the return address it writes
(``ra=1c00554e``); ``p.elw`` is the load that puts a core to sleep in the event unit until an event (a
barrier, the FC's call), and GVSOC traces it when the core wakes.

Whoever drives the run over the link (validate --profile, bench/profile_gap8.py: the link is a later stage)
adds the firmware's own count of the profiled step, which the trace's window should match.

These figures are GVSOC's timing model, not measured on a GAP8.
"""

from __future__ import annotations

import re
from pathlib import Path

from edgernn.targets.profile import StepMap, StepProfiler, TracedRun

CLUSTER_CORES = ".*/cluster/pe[0-9]/insn"   # GVSOC reads no "+" here
LINE = re.compile(r"^\s*\d+:\s+(\d+):\s+\[[^\]]*?/pe(\d+)/insn[^\]]*\]\s+\S+\s+([0-9a-fA-F]+)\s+(\S+)(.*)$")
LINK = re.compile(r"\bra=([0-9a-fA-F]+)")
WAITS = {"p.elw"}       # traced when the core wakes: it slept in the event unit until an event (a barrier)
SOURCE = "GVSOC's instruction trace of the cluster's cores (GVSOC's timing model, not measured on a GAP8)"


def read_trace(lines, profiler: StepProfiler) -> None:
    """Hand each instruction line to ``profiler`` until its window closes; the rest is read and dropped."""
    for line in lines:
        if profiler.done:
            continue
        m = LINE.match(line)
        if m is None:
            continue
        mnemonic = m.group(4)
        link = None
        if "jal" in mnemonic:
            called = LINK.search(m.group(5))
            link = int(called.group(1), 16) if called else None
        profiler.instruction(int(m.group(2)), int(m.group(1)), int(m.group(3), 16), mnemonic in WAITS, link)
    if profiler.end is not None:
        profiler.finish()


class GvsocTracedRun(TracedRun):
    """A firmware running in GVSOC's debug build with the cluster's cores traced into a named pipe that a
    thread reads as GVSOC writes it (edgernn.targets.profile.TracedRun: ``url``, ``result()``, ``stop()``)."""

    source = SOURCE

    def __init__(self, elf: Path, model_c: Path, board, step: int, *, install, readfs_files: list | tuple = ()):
        from edgernn.targets.gap8 import gvsoc

        step_map = StepMap.read(elf, model_c, board)
        # A port chosen here that another process takes before GVSOC listens is chosen again, as start_gvsoc
        # does, but with a new pipe and profile each time: the pipe's reader ends with the GVSOC that had it
        # open, and a second GVSOC would wait forever to open a pipe nobody reads.
        for attempt in range(gvsoc.PORT_ATTEMPTS):
            profiler = StepProfiler(step_map, step)
            super().__init__(board, profiler, lambda lines, profiler=profiler: read_trace(lines, profiler))
            port = gvsoc.free_port()
            try:
                self._launch(lambda: gvsoc.start_gvsoc(
                    elf, Path(elf).parent / "gvsoc", port, install=install, timeout=board.emulator.start_timeout_s,
                    baud=board.serial.baud, readfs_files=readfs_files,
                    trace=gvsoc.Trace(CLUSTER_CORES, self.pipe.path)))
                return
            except gvsoc.PortTaken:
                if attempt + 1 == gvsoc.PORT_ATTEMPTS:
                    raise

    def _wait(self, timeout: float) -> None:
        self.emulator.wait(timeout)
