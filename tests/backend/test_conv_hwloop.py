"""The hardware loops of edgernn_conv.c's GAP8 path keep the rules silicon keeps and GVSOC does not check: the
kernel source compiled for rv32imc as a GAP8 build compiles it (Xpulp by `.insn`, -O3), its object read back,
every `lp.setup` decoded: a body of at least 3 instructions, none compressed, the last not a branch or jump,
loop 0 the inner one (loop 1 only around it, ending 2 or more instructions after it: the depthwise rows); and
the bodies are those of the table below: the 4x2 blocking's 6 post-increment loads and 8 pv.sdotsp.b, the
depthwise pair and single loops with their requantizations (edgernn_halves), the planes' fills (a pixel, or 4
by pv.shuffle2.b, a turn). (The check of every GAP8 ELF, all kernels, is issue 25's test beside the
matrix-vector kernels.)"""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import require_tools

pytestmark = pytest.mark.toolchain

CC = "riscv64-unknown-elf-gcc"
OBJDUMP = "riscv64-unknown-elf-objdump"
LP_SETUP = (0x7B, 4)                      # opcode, funct3
POST_LW = (0x0B, 2)                       # p.lw rd, imm(rs1!)
SDOTSP_B = (0x57, 1, 0x5C >> 1)           # opcode, funct3, funct7 (0101110x)
BRANCH_OPCODES = {0x63, 0x6F, 0x67}       # branch, jal, jalr


def _words(tmp_path) -> list[tuple[int, bytes]]:
    """(address, bytes) of every instruction of the object's .text, as objdump walks it."""
    from edgernn.backend.codegen import copy_kernels

    copy_kernels(tmp_path, None, {"edgernn_conv_s8", "edgernn_depthwise_conv_s8"}, kernel_set="gap8")
    obj = tmp_path / "conv.o"
    subprocess.run([CC, "-march=rv32imc", "-mabi=ilp32", "--specs=picolibc.specs", "-O3", "-DEDGERNN_XPULP=1",
                    "-I", str(tmp_path), "-c", str(tmp_path / "edgernn_conv.c"), "-o", str(obj)],
                   check=True, capture_output=True, text=True)
    dump = subprocess.run([OBJDUMP, "-d", "-j", ".text", str(obj)], check=True, capture_output=True, text=True).stdout
    out = []
    for m in re.finditer(r"^\s*([0-9a-f]+):\s+([0-9a-f]{4}(?:[0-9a-f]{4})?)\s", dump, re.M):
        hexes = m.group(2)
        out.append((int(m.group(1), 16), int(hexes, 16).to_bytes(len(hexes) // 2, "little")))
    return out


# (instructions, post-increment word loads, pv.sdotsp.b) of every loop-0 body the kernels hold
BODIES = {
    (14, 6, 8),                                         # CONV_2D's 4x2 blocking
    (31, 3, 6), (27, 3, 6), (29, 3, 6), (25, 3, 6),     # depthwise pairs: signed/signless x p.max-p.min/p.clip
    (17, 3, 3), (15, 3, 3), (16, 3, 3), (14, 3, 3),     # depthwise singles (stride 2), the same forms
    (4, 0, 0),                                          # the planes' zero point, 4 words a turn
    (8, 0, 0),                                          # a pixel's word into a quad's planes (a register-step load)
    (20, 0, 0),                                         # 4 pixels' words transposed into a quad's planes
}


def _fields(word: int) -> tuple[int, int, int]:
    return word & 0x7F, (word >> 12) & 7, word >> 25


def test_conv_hardware_loops_keep_the_silicon_rules(tmp_path):
    require_tools(CC, OBJDUMP)
    insns = _words(tmp_path)
    by_addr = {a: b for a, b in insns}
    setups = [(a, int.from_bytes(b, "little")) for a, b in insns
              if len(b) == 4 and _fields(int.from_bytes(b, "little"))[:2] == LP_SETUP]
    assert setups, "no lp.setup in the GAP8 build of edgernn_conv.c"
    spans, found = [], set()
    for addr, word in setups:
        loop = (word >> 7) & 1
        end = addr + ((word >> 20) << 1)
        body = []
        a = addr + 4
        while a <= end:
            b = by_addr[a]
            body.append(b)
            a += len(b)
        assert a == end + 4, f"lp.setup at {addr:#x}: its end {end:#x} is not an instruction's start"
        assert len(body) >= 3
        assert all(len(b) == 4 for b in body), f"lp.setup at {addr:#x}: a compressed instruction in the body"
        words = [int.from_bytes(b, "little") for b in body]
        assert _fields(words[-1])[0] not in BRANCH_OPCODES
        spans.append((loop, addr, end))
        if loop == 1:
            continue
        assert not any(_fields(w)[:2] == LP_SETUP for w in words), "a hardware loop inside loop 0's body"
        loads = [w for w in words if _fields(w)[:2] == POST_LW]
        dots = [w for w in words if _fields(w)[0] == SDOTSP_B[0] and _fields(w)[1] == SDOTSP_B[1]
                and _fields(w)[2] >> 1 == SDOTSP_B[2]]
        shape = (len(body), len(loads), len(dots))
        assert shape in BODIES, f"lp.setup at {addr:#x}: {shape}"
        found.add(shape)
    assert found == BODIES
    # a loop inside another's range is loop 0 inside loop 1, whose body ends 2 or more instructions later
    for outer, s0, e0 in spans:
        for inner, a, e in spans:
            if s0 < a < e0:
                assert (outer, inner) == (1, 0) and e0 - e >= 8, f"lp.setup at {a:#x} nested in {s0:#x}"
    assert any(loop == 1 for loop, _, _ in spans), "no loop 1 around the depthwise rows"
