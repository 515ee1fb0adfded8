"""A step of a GAP8 firmware profiled in GVSOC, from its instruction trace of the cluster's cores.

GVSOC's debug build (``gvsoc_launcher_debug``: the only one with traces compiled in) runs the firmware with
the instruction trace of every cluster core on. The trace goes into a named pipe and is read while it is
written, so it never fills a disk: a thread hands each line to a ``StepProfiler``
(edgernn.targets.profile) and, once the profiled step's window has closed, drains the rest. The host
feeds the firmware a few steps over the UART, the first ones warming the instruction cache, then ends it
(BYE), so that GVSOC exits and writes out the trace it still buffers.

A line of the trace: ``<time ps>: <cycles>: [<component>] <mode> <pc> <mnemonic> <operands and values>``;
the cycles are the cluster's clock, shared by its cores. A call shows the return address it writes
(``ra=1c00554e``); ``p.elw`` is the load that puts a core to sleep in the event unit until an event (a
barrier, the FC's call).

These figures are GVSOC's timing model, not measured on a GAP8.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from edgernn.errors import EdgeRNNError, LinkError
from edgernn.targets.profile import StepMap, StepProfiler

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


def profile_step(elf: Path, model_c: Path, board, xq: np.ndarray, step: int, *, install,
                 readfs_files: list | tuple = ()) -> dict:
    """Run ``elf`` in GVSOC's debug build with the cluster's cores traced, feed it the quantized inputs
    ``xq`` (steps, features), and profile step ``step`` (0-based; ``xq`` holds at least one step more).
    Returns ``StepProfiler.result()`` with ``counted``: the firmware's own counts of that step
    (``cycles``, and ``team_cycles`` where the HAL has them)."""
    from edgernn import procs
    from edgernn.link import LinkClient
    from edgernn.targets import gvsoc

    if len(xq) < step + 2:
        raise EdgeRNNError(f"profiling step {step} needs {step + 2} steps of input, not {len(xq)}")
    profiler = StepProfiler(StepMap.read(elf, model_c, board), step)
    folder = Path(tempfile.mkdtemp(prefix="edgernn_trace_"))
    pipe = folder / "insn.trace"
    os.mkfifo(pipe)
    failure: list[BaseException] = []

    def reader() -> None:
        try:
            with open(pipe, errors="replace") as lines:
                read_trace(lines, profiler)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            failure.append(exc)

    thread = threading.Thread(target=reader, name="gvsoc-trace", daemon=True)
    thread.start()
    sim = None
    try:
        sim = gvsoc.start_gvsoc(elf, Path(elf).parent / "gvsoc", install=install,
                                timeout=board.emulator.start_timeout_s, baud=board.serial.baud,
                                readfs_files=readfs_files, trace=gvsoc.Trace(CLUSTER_CORES, pipe))
        with LinkClient.open(sim.url, baud=board.serial.baud, timeout=board.serial.timeout_s * 10) as link:
            if board.hal.ready_byte:
                link.wait_ready(board.emulator.start_timeout_s * 10)
            link.hello()
            run = link.run(xq, states="every")
            with contextlib.suppress(LinkError):
                link.bye()
        with contextlib.suppress(subprocess.TimeoutExpired):
            sim.wait(board.serial.timeout_s)      # GVSOC writes out its trace as it exits
    finally:
        if sim is not None:
            sim.stop()
        for _ in range(600):
            _unblock(pipe, thread)
            thread.join(timeout=0.1)
            if not thread.is_alive():
                break
        with contextlib.suppress(OSError):
            pipe.unlink()
            folder.rmdir()
    if failure:
        raise failure[0]
    result = profiler.result()
    result["counted"] = {"cycles": int(run.cycles[step]),
                         **({"team_cycles": int(run.team_cycles[step])} if run.team_cycles is not None else {})}
    result["source"] = SOURCE
    return result


def _unblock(pipe: Path, thread: threading.Thread) -> None:
    """A reader still waiting for GVSOC to open the pipe (GVSOC never started) gets its end of file."""
    if not thread.is_alive():
        return
    with contextlib.suppress(OSError):
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
