"""edgernn's corrections of the GAP SDK, applied to its private copy in the cache, never to ``$GAP_SDK_HOME``.

Two kinds, both part of the copy's cache key:

- **Whole files** that edgernn wrote, in ``templates/targets/gap8/sdk/overrides/`` at the SDK's relative paths; each
  says at its top what it changes and why (the UART testbench, the telnet proxy).
- **Edits** of upstream files (``FIXES`` below): exact text replaced by other text, each edit with the
  upstream fault it corrects. Exact text rather than whole files, so that one fix serves every SDK release
  whose file carries that text (4.8.0 and master differ elsewhere in the same files). An edit whose text
  is absent is an error naming the fix and the file, unless its replacement is there already (an SDK that
  carries the correction itself); an ``optional`` edit is skipped when its text is absent.

No TensorFlow here, no subprocess: this only reads and writes files of the copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgernn.errors import EdgeRNNError


@dataclass(frozen=True)
class Edit:
    old: str
    new: str
    optional: bool = False      # absent in some supported releases: skipped there


@dataclass(frozen=True)
class Fix:
    """One correction of one upstream file: its name (in messages and source.json), the file, the fault."""

    name: str
    path: str
    fault: str
    edits: tuple[Edit, ...]
    testbench: bool = False     # a correction of GVSOC's UART testbench (the self-test proves these)


DPI_WRAPPER = "gvsoc/gvsoc/models/utils/dpi_wrapper_impl.cpp"
IET = "rtos/freeRTOS/vendors/gwt/gap8/src/device/gap8_iet.S"
CLUSTER_CORE = "rtos/freeRTOS/vendors/gwt/gap8/pmsis/cluster/drivers/cluster_synchronisation/cluster_core.S"

_ELW = ".insn i 0x03, 6, {rd}, {offset}   /* p.elw: edgernn, for assemblers without Xpulp */"

FIXES: tuple[Fix, ...] = (
    Fix(
        "glibc-sched-yield", DPI_WRAPPER,
        "GVSOC 4.8.0 calls pthread_yield, which glibc 2.34 and later deprecate; the build uses -Werror, so it "
        "fails with Debian 12's compiler (master calls sched_yield, the POSIX call)",
        (Edit("    pthread_yield();", "    sched_yield();", optional=True),)),
    Fix(
        "iet-tiny-relocation", IET,
        "the FreeRTOS port loads a word through the GAP linker's %tiny relocation, which Debian's "
        "riscv64-unknown-elf binutils do not know; the same load through %hi/%lo reaches any address",
        (Edit("        lw t0, %tiny(__global_hyper_fifo_head)(x0) // t0 holds __global_hyper_driver_fifo[0]->fifo_head",
              "        lui t0, %hi(__global_hyper_fifo_head)      // edgernn: was lw t0, %tiny(...)(x0)\n"
              "        lw t0, %lo(__global_hyper_fifo_head)(t0)   // t0 holds __global_hyper_driver_fifo[0]->fifo_head"),)),
    Fix(
        "cluster-core-xpulp", CLUSTER_CORE,
        "the cluster's start-up code uses Xpulp mnemonics (p.elw, p.bclr) that Debian's assembler does not "
        "know; p.elw is written by its encoding (LOAD opcode, funct3 6) and p.bclr as the equal andi",
        tuple(Edit(f"        p.elw {rd}, {offset}", "        " + _ELW.format(rd=rd, offset=offset))
              for rd, offset in (("t0", "CL_DEMUX_EU_CORE_EVENT_WAIT_CLEAR(s0)"),
                                 ("t0", "CL_DEMUX_EU_HW_BARRIER_TRIGGER_WAIT_CLEAR(s7)"),
                                 ("a0", "CL_DEMUX_EU_DISPATCH_FIFO_ACCESS(s1)"),
                                 ("t0", "CL_DEMUX_EU_DISPATCH_FIFO_ACCESS(s1)")))
        + (Edit("        p.bclr t0, t0, 0, 0 ", "        andi t0, t0, -2     /* p.bclr t0, t0, 0, 0: edgernn */ "),)),
)


def fixes(testbench: bool = True) -> tuple[Fix, ...]:
    """The fixes to apply; ``testbench=False`` leaves GVSOC's UART testbench as upstream has it (only to
    show that the self-test catches its faults)."""
    return tuple(f for f in FIXES if testbench or not f.testbench)


def describe(testbench: bool = True) -> str:
    """What the fixes are, as text for the cache key: a change to any of them makes a new copy."""
    return "\n".join(f"{f.name}\0{f.path}\0" + "\0".join(f"{e.old}\0{e.new}\0{e.optional}" for e in f.edits)
                     for f in fixes(testbench))


def apply_fixes(sdk: Path, testbench: bool = True) -> list[str]:
    """Apply the edits to the copy at ``sdk``; returns the names of the fixes that changed a file. An edit
    whose text is found neither before nor after raises EdgeRNNError (an SDK edgernn does not know)."""
    applied = []
    for fix in fixes(testbench):
        path = Path(sdk) / fix.path
        if not path.is_file():
            raise EdgeRNNError(f"edgernn's fix {fix.name} does not apply: the GAP SDK has no {fix.path} "
                               "(edgernn supports GAP SDK 4.8.0 and later)")
        text = path.read_text()
        changed = False
        for edit in fix.edits:
            count = text.count(edit.old)
            if count == 0:
                if edit.optional or edit.new in text:
                    continue
                raise EdgeRNNError(f"edgernn's fix {fix.name} does not apply to this GAP SDK's {fix.path}: the "
                                   f"text it corrects is not there ({edit.old.strip()[:60]!r}); edgernn knows "
                                   "the SDK from release 4.8.0 to master a2302650")
            text = text.replace(edit.old, edit.new)
            changed = True
        if changed:
            path.write_text(text)
            applied.append(fix.name)
    return applied
