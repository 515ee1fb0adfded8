"""The hardware-loop checker (edgernn/targets/gap8/hwloop_check.py) on hand-made loops: each silicon rule has
a body that breaks it and is caught, beside one that keeps it. The bodies are assembled by Debian's
riscv64-unknown-elf-gcc with the kernels' own macro header (templates/targets/gap8/kernels/edgernn_xpulp_asm.h), so
the encodings checked are those the kernels use; the same checker reads every GAP8 ELF edgernn builds
(edgernn.targets.gap8.adapter.build_gap_project), and edgernn's own kernels are checked here too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import require_tools

from edgernn.resources import templates_dir
from edgernn.targets.gap8 import hwloop_check
from edgernn.targets.gap8.hwloop_check import Insn

GAP8_KERNELS = templates_dir() / "targets" / "gap8" / "kernels"     # the GAP8 kernel set

CC = "riscv64-unknown-elf-gcc"
OBJDUMP = "riscv64-unknown-elf-objdump"

GUARD = "    blez a2, 9f\n"
SETUP = "    XP_LP_SETUP 0, RV_A2, 1f\n"
BODY3 = "    addi a0, a0, 1\n    addi a1, a1, 1\n1:  addi a3, a3, 1\n"
END = "9:  ret\n"

# name: (assembly of one function, the rules it breaks)
CASES = {
    "kept": (GUARD + SETUP + BODY3 + END, set()),
    "count known positive by li": ("    li a2, 5\n" + SETUP + BODY3 + END, set()),
    "immediate count": ("    XP_LP_SETUPI 0, 4, 1f\n" + BODY3 + END, set()),
    "two instructions": (GUARD + SETUP + "    addi a0, a0, 1\n1:  addi a3, a3, 1\n" + END, {"body"}),
    "compressed in the body": (GUARD + SETUP + "    .option rvc\n    c.addi a0, 1\n    .option norvc\n"
                               "    addi a1, a1, 1\n1:  addi a3, a3, 1\n" + END, {"compressed"}),
    "last is a branch": (GUARD + SETUP + "    addi a0, a0, 1\n    addi a1, a1, 1\n1:  bnez a0, 9f\n" + END,
                         {"last"}),
    "count not guarded": (SETUP + BODY3 + END, {"count"}),
    "guard overwritten": (GUARD + "    addi a2, a2, -1\n" + SETUP + BODY3 + END, {"count"}),
    "guard does not skip the loop": ("    blez a2, 8f\n8:\n" + SETUP + BODY3 + END, {"count"}),
    "immediate count 0": ("    XP_LP_SETUPI 0, 0, 1f\n" + BODY3 + END, {"count"}),
    "inner loop is loop 1": ("    XP_LP_SETUPI 0, 4, 2f\n    XP_LP_SETUPI 1, 4, 1f\n" + BODY3 +
                             "    addi a4, a4, 1\n2:  addi a5, a5, 1\n" + END, {"nesting"}),
    "outer ends 1 instruction after": ("    XP_LP_SETUPI 1, 4, 2f\n    XP_LP_SETUPI 0, 4, 1f\n" + BODY3 +
                                       "2:  addi a5, a5, 1\n" + END, {"nesting"}),
    "outer ends 2 instructions after": ("    XP_LP_SETUPI 1, 4, 2f\n    XP_LP_SETUPI 0, 4, 1f\n" + BODY3 +
                                        "    addi a4, a4, 1\n2:  addi a5, a5, 1\n" + END, set()),
}


def _assemble(source: str, tmp_path: Path) -> Path:
    require_tools(CC, OBJDUMP)
    path = tmp_path / "loop.S"
    path.write_text('#include "edgernn_xpulp_asm.h"\n    .option norvc\n    .option norelax\n    .text\n'
                    "    .globl f\nf:\n" + source)
    obj = tmp_path / "loop.o"
    subprocess.run([CC, "-march=rv32imc", "-mabi=ilp32", "-I", str(GAP8_KERNELS), "-c", str(path),
                    "-o", str(obj)], check=True, capture_output=True, text=True)
    return obj


@pytest.mark.parametrize("case", list(CASES))
def test_each_rule_is_caught_and_a_kept_one_passes(case, tmp_path):
    source, broken = CASES[case]
    loops, problems = hwloop_check.check_elf(_assemble(source, tmp_path), OBJDUMP)
    assert loops, "the checker found no hardware loop"
    assert {p.rule for p in problems} == broken, [str(p) for p in problems]


def test_edgernns_dot_kernels_keep_the_rules(tmp_path):
    """The .S kernels as the GAP8 build assembles them: two loops (8 and 4 rows), bodies of 17 and 9
    instructions, none breaking a rule."""
    require_tools(CC, OBJDUMP)
    obj = tmp_path / "dot.o"
    subprocess.run([CC, "-march=rv32imc", "-mabi=ilp32", "-DEDGERNN_DOT_ASM=1", "-DEDGERNN_XPULP=1",
                    "-I", str(GAP8_KERNELS), "-c", str(GAP8_KERNELS / "edgernn_dot_xpulp.S"),
                    "-o", str(obj)], check=True, capture_output=True, text=True)
    loops, problems = hwloop_check.check_elf(obj, OBJDUMP)
    assert problems == []
    assert [(loop.end - loop.start) // 4 + 1 for loop in loops] == [17, 9]


# The reader alone, on words written here (no toolchain): lp.setup 0, a2, +12 bytes; three addi; ret.
_SETUP_12 = (6 << 20) | (12 << 15) | (4 << 12) | 0x7B
_ADDI = 0x00150513      # addi a0, a0, 1


def test_the_reader_finds_a_loop_in_objdump_text():
    text = "\n".join(f"{a:8x}:\t{w:08x}          \t.word\t0x{w:08x}" for a, w in
                     ((0x100, _SETUP_12), (0x104, _ADDI), (0x108, _ADDI), (0x10C, _ADDI), (0x110, 0x00008067)))
    insns = hwloop_check.parse_objdump(text)
    assert [i.size for i in insns] == [4] * 5
    loops, problems = hwloop_check.check(insns)
    assert [(loop.index, loop.start, loop.end, loop.count_reg) for loop in loops] == [(0, 0x104, 0x10C, 12)]
    assert [p.rule for p in problems] == ["count"]      # nothing before it guards a2


def test_an_end_between_instructions_is_a_body_fault():
    insns = [Insn(0x100, 4, (7 << 20) | (1 << 15) | (5 << 12) | 0x7B), Insn(0x104, 4, _ADDI), Insn(0x108, 4, _ADDI),
             Insn(0x10C, 4, _ADDI)]
    _, problems = hwloop_check.check(insns)
    assert [p.rule for p in problems] == ["body"]
