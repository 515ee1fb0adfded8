"""GAP8's hardware-loop rules that GVSOC does not check, read from a built ELF's disassembly.

GAP8's cores (RI5CY with Xpulpv2) run a hardware loop (``lp.setup``, ``lp.setupi``, or ``lp.starti`` /
``lp.endi`` / ``lp.count[i]``) correctly only if:

* ``body``: the body is at least 3 instructions;
* ``compressed``: none of them is compressed (16-bit);
* ``last``: its last instruction is not a branch or a jump;
* ``nesting``: of two nested loops, loop 0 is the inner one, and the outer loop's body ends at least 2
  instructions after the inner one's;
* ``count``: a count of 0 runs the body once (not zero times), so a count held in a register is guarded
  by a branch around the loop, or set just before by an ``li`` of a positive value; an immediate count
  is at least 1.

GVSOC runs code that breaks them as if it were correct, so a kernel can pass every simulated test and
fail on the chip: ``check_elf`` finds every hardware loop of an ELF (the words by their encodings in
GVSOC's ISA table, gap_sdk gvsoc isa_riscv_gen.py: opcode 0x7b, funct3 0-5; any RISC-V objdump lists
them, as ``.word`` where it knows no Xpulp) and returns what breaks a rule. edgernn.targets.gap8.adapter runs it
on every GAP8 ELF it builds.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from edgernn.errors import EdgeRNNError

_LINE = re.compile(r"^\s*([0-9a-f]+):\s+([0-9a-f]{8}|[0-9a-f]{4})\s")

HWLOOP_OPCODE = 0x7B
_BRANCH, _JAL, _JALR = 0x63, 0x6F, 0x67
# lp.* funct3 (isa_riscv_gen.py: lp.starti 000, lp.endi 001, lp.count 010, lp.counti 011, lp.setup 100,
# lp.setupi 101)
_STARTI, _ENDI, _COUNT, _COUNTI, _SETUP, _SETUPI = range(6)
GUARD_WINDOW = 64   # instructions looked back from a loop's count for its guard


@dataclass(frozen=True)
class Insn:
    addr: int
    size: int     # 2 (compressed) or 4
    word: int


@dataclass(frozen=True)
class HardwareLoop:
    index: int            # 0 or 1
    at: int               # address of the instruction that completes the loop's setup
    start: int            # first instruction of the body
    end: int              # last instruction of the body
    count_reg: int | None     # the count's register, or None for an immediate count
    count_imm: int | None
    count_at: int         # address of the instruction that sets the count


@dataclass(frozen=True)
class Violation:
    rule: str             # body, compressed, last, nesting, count
    loop: HardwareLoop
    detail: str

    def __str__(self) -> str:
        return f"hardware loop {self.loop.index} set at {self.loop.at:#x} (body {self.loop.start:#x}..{self.loop.end:#x}): " \
               f"{self.rule}: {self.detail}"


def parse_objdump(text: str) -> list[Insn]:
    """The instructions of ``objdump -d`` output: address, size and raw word of each."""
    insns = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            raw = m.group(2)
            insns.append(Insn(int(m.group(1), 16), len(raw) // 2, int(raw, 16)))
    return insns


def _hwloop_fields(insn: Insn) -> tuple[int, int, int, int] | None:
    """(funct3, L, rs1 field, imm12) of a hardware-loop instruction, None for any other."""
    w = insn.word
    if insn.size != 4 or w & 0x7F != HWLOOP_OPCODE or (w >> 8) & 0xF:
        return None
    funct3 = (w >> 12) & 7
    if funct3 > _SETUPI:
        return None
    return funct3, (w >> 7) & 1, (w >> 15) & 31, w >> 20


def find_loops(insns: list[Insn]) -> list[HardwareLoop]:
    """Every hardware loop the instructions set up, in address order."""
    loops = []
    pending: dict[int, dict] = {0: {}, 1: {}}    # lp.starti / lp.endi / lp.count[i] seen, per loop
    for insn in insns:
        f = _hwloop_fields(insn)
        if f is None:
            continue
        funct3, index, rs1, imm = f
        if funct3 == _SETUP:
            loops.append(HardwareLoop(index, insn.addr, insn.addr + 4, insn.addr + 2 * imm, rs1, None, insn.addr))
            pending[index] = {}
        elif funct3 == _SETUPI:
            loops.append(HardwareLoop(index, insn.addr, insn.addr + 4, insn.addr + 2 * rs1, None, imm, insn.addr))
            pending[index] = {}
        else:
            p = pending[index]
            if funct3 == _STARTI:
                p["start"] = insn.addr + 2 * imm
            elif funct3 == _ENDI:
                p["end"] = insn.addr + 2 * imm
            else:
                p["count"] = (rs1, None, insn.addr) if funct3 == _COUNT else (None, imm, insn.addr)
            if {"start", "end", "count"} <= set(p):
                reg, value, count_at = p["count"]
                loops.append(HardwareLoop(index, insn.addr, p["start"], p["end"], reg, value, count_at))
                pending[index] = {}
    return loops


def _is_branch_or_jump(insn: Insn) -> bool:
    if insn.size == 2:
        q, funct3 = insn.word & 3, insn.word >> 13
        return (q == 1 and funct3 in (0b101, 0b110, 0b111)) or \
               (q == 2 and funct3 == 0b100 and (insn.word >> 2) & 31 == 0 and (insn.word >> 7) & 31 != 0)
    return insn.word & 0x7F in (_BRANCH, _JAL, _JALR)


def _written(insn: Insn) -> set[int] | None:
    """The registers an instruction may write; None where this reader cannot tell (then it may write any)."""
    w = insn.word
    if insn.size == 2:
        q, funct3 = w & 3, w >> 13
        rd, rd_short = (w >> 7) & 31, ((w >> 7) & 7) + 8
        if q == 0:
            return {((w >> 2) & 7) + 8} if funct3 in (0b000, 0b010) else set()
        if q == 1:
            if funct3 in (0b000, 0b010, 0b011):
                return {rd}
            if funct3 == 0b100:
                return {rd_short}
            return {1} if funct3 == 0b001 else set()       # c.jal writes ra
        if q == 2:
            if funct3 in (0b000, 0b010):
                return {rd}
            if funct3 == 0b100:
                return {1} if (w >> 2) & 31 == 0 and (w >> 12) & 1 else {rd}
            return set()
        return None
    op, rd, rs1 = w & 0x7F, (w >> 7) & 31, (w >> 15) & 31
    if op in (0x03, 0x13, 0x17, 0x33, 0x37, _JAL, _JALR, 0x57, 0x73):
        return {rd}
    if op == 0x0B:          # Xpulp post-increment loads: rd and the incremented base
        return {rd, rs1}
    if op == 0x2B:          # Xpulp post-increment stores: the base
        return {rs1}
    if op in (_BRANCH, 0x23, HWLOOP_OPCODE, 0x0F):
        return set()
    if op == 0x5B:          # Xpulp ALU (p.addRN, p.clip, ...)
        return {rd}
    return None


def _branch(insn: Insn) -> tuple[int, int, int, int] | None:
    """(funct3, rs1, rs2, target) of a conditional branch (c.beqz/c.bnez as beq/bne with x0)."""
    w = insn.word
    if insn.size == 2:
        if w & 3 != 1 or (w >> 13) not in (0b110, 0b111):
            return None
        off = (((w >> 12) & 1) << 8) | (((w >> 5) & 3) << 6) | (((w >> 2) & 1) << 5) | \
              (((w >> 10) & 3) << 3) | (((w >> 3) & 3) << 1)
        if off & 0x100:
            off -= 0x200
        return (0 if (w >> 13) == 0b110 else 1), ((w >> 7) & 7) + 8, 0, insn.addr + off
    if w & 0x7F != _BRANCH:
        return None
    off = (((w >> 31) & 1) << 12) | (((w >> 7) & 1) << 11) | (((w >> 25) & 0x3F) << 5) | (((w >> 8) & 0xF) << 1)
    if off & 0x1000:
        off -= 0x2000
    return (w >> 12) & 7, (w >> 15) & 31, (w >> 20) & 31, insn.addr + off


def _skips_zero(branch: tuple[int, int, int, int], reg: int) -> bool:
    """Whether the branch is taken when reg is 0: beq reg, x0 (beqz) or bge/bgeu x0, reg (blez); other
    forms are not recognised (the loop is then reported unguarded)."""
    funct3, rs1, rs2, _ = branch
    if funct3 == 0:                                  # beq
        return {rs1, rs2} == {reg, 0}
    if funct3 in (5, 7):                             # bge / bgeu x0, reg: taken when reg <= 0 (== 0)
        return rs1 == 0 and rs2 == reg
    return False


def _count_guarded(loop: HardwareLoop, insns: list[Insn], position: dict[int, int]) -> bool:
    reg = loop.count_reg
    if reg == 0:
        return False
    i = position[loop.count_at]
    for insn in reversed(insns[max(0, i - GUARD_WINDOW):i]):
        branch = _branch(insn)
        if branch is not None:
            if _skips_zero(branch, reg) and branch[3] > loop.end:
                return True
            continue
        if _is_branch_or_jump(insn) and insn.word & 0x7F != _BRANCH:
            return False                             # code reached from elsewhere: no guard known
        written = _written(insn)
        if written is None or reg in written:
            w = insn.word
            # li reg, imm (addi reg, x0, imm) with imm > 0: the count is known positive
            if insn.size == 4 and w & 0x7F == 0x13 and (w >> 12) & 7 == 0 and (w >> 15) & 31 == 0 \
                    and (w >> 7) & 31 == reg and 0 < (w >> 20) < 0x800:
                return True
            return False
    return False


def check(insns: list[Insn]) -> tuple[list[HardwareLoop], list[Violation]]:
    """Every hardware loop of the instructions (in address order) and each rule it breaks."""
    loops = find_loops(insns)
    position = {insn.addr: i for i, insn in enumerate(insns)}
    problems: list[Violation] = []
    for loop in loops:
        if loop.start not in position or loop.end not in position or loop.end < loop.start:
            problems.append(Violation("body", loop, "its start or end is not an instruction of the code"))
            continue
        body = insns[position[loop.start]:position[loop.end] + 1]
        if len(body) < 3:
            problems.append(Violation("body", loop, f"{len(body)} instructions; at least 3"))
        compressed = [i.addr for i in body if i.size == 2]
        if compressed:
            problems.append(Violation("compressed", loop, "compressed instructions at "
                                      + ", ".join(f"{a:#x}" for a in compressed)))
        if _is_branch_or_jump(body[-1]):
            problems.append(Violation("last", loop, f"the last instruction ({body[-1].word:#x}) is a branch or jump"))
        if loop.count_reg is None:
            if not loop.count_imm:
                problems.append(Violation("count", loop, "an immediate count of 0 runs the body once"))
        elif not _count_guarded(loop, insns, position):
            problems.append(Violation("count", loop, f"the count in x{loop.count_reg} is not guarded against 0 "
                                      "(a count of 0 runs the body once)"))
    for outer in loops:
        for inner in loops:
            if inner is outer or not (outer.start <= inner.at and inner.end <= outer.end):
                continue
            if inner.index != 0 or outer.index != 1:
                problems.append(Violation("nesting", inner, f"nested in loop {outer.index} set at {outer.at:#x}: "
                                          "the inner loop must be loop 0 and the outer loop 1"))
            elif outer.end - inner.end < 8:
                problems.append(Violation("nesting", inner, f"the outer loop (set at {outer.at:#x}) ends "
                                          f"{outer.end - inner.end} bytes after it; at least 2 instructions"))
    return loops, problems


def check_elf(elf: Path, objdump: str = "riscv64-unknown-elf-objdump") -> tuple[list[HardwareLoop], list[Violation]]:
    """``check`` on the code of an ELF, disassembled by ``objdump -d`` (any RISC-V objdump)."""
    try:
        proc = subprocess.run([objdump, "-d", str(elf)], capture_output=True, text=True)
    except OSError as e:
        raise EdgeRNNError(f"cannot run {objdump} to check the hardware loops of {elf}: {e}") from None
    if proc.returncode != 0:
        raise EdgeRNNError(f"{objdump} -d {elf} failed: {proc.stderr.strip()[:300]}")
    return check(parse_objdump(proc.stdout))
