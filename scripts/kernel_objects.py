#!/usr/bin/env python3
"""Show that a change to the C kernels' text left their compiled code as it was: each kernel source is
compiled at a git revision and in the working tree, in each configuration of CONFIGS (-O2, the kernels'
headers rendered from each side's own kernel table): the reference set by the host's gcc and by the
RISC-V gcc of qemu_riscv32, and the GAP8 kernel set (templates/targets/gap8/kernels/ over the reference
files, where a side has it) as the GAP8 build compiles it and as the host tests emulate it. The
disassembly of every function is compared, function by function (so a function that moved within a
file, or to another file, still compares).

    python scripts/kernel_objects.py --rev HEAD~1                       # every templates/kernels/*.c
    python scripts/kernel_objects.py --rev main edgernn_reduce.c edgernn_lstm.c

It prints, per compiler, the functions that differ, are only before or only after, and the count that
are identical; it exits 1 when any differs. scripts/firmware_digest.py shows which generated files a
change touched; this shows that the code compiled from the touched kernels did not change.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = (["gcc"], "objdump")
RV32 = (["riscv64-unknown-elf-gcc", "-march=rv32imc", "-mabi=ilp32", "--specs=picolibc.specs"],
        "riscv64-unknown-elf-objdump")
# what the GAP8 wrapper force-includes: this checkout's, on both sides (it is the toolchain's, not a kernel)
GAP8_BUILTINS = str(ROOT / "templates" / "targets" / "gap8" / "sdk" / "toolchain" / "gap8_builtins.h")
# label: (compiler, objdump, kernel set, flags)
CONFIGS = {
    "host gcc": (*HOST, "reference", []),
    "riscv32 gcc": (*RV32, "reference", []),
    "GAP8 set, riscv32 gcc as the GAP8 build": (*RV32, "gap8", ["-DEDGERNN_XPULP=1", "-DEDGERNN_DOT_ASM=1",
                                                                  "-D__GAP8__", "-include", GAP8_BUILTINS]),
    "GAP8 set, riscv32 gcc, .S kernels called": (*RV32, "gap8", ["-DEDGERNN_XPULP=1", "-DEDGERNN_DOT_ASM=2",
                                                                   "-D__GAP8__", "-include", GAP8_BUILTINS]),
    "GAP8 set, host gcc emulated": (*HOST, "gap8", ["-DEDGERNN_XPULP_EMULATE"]),
    "GAP8 set, host gcc on GCC vectors": (*HOST, "gap8", ["-DEDGERNN_XPULP=1", "-D__builtin_pulp_sdotsp4(a,b,c)="
                                                          "((c)+(a)[0]*(b)[0]+(a)[1]*(b)[1]+(a)[2]*(b)[2]+(a)[3]*(b)[3])"]),
}


def _tree_at(rev: str | None, dest: Path) -> Path:
    """templates/ and edgernn/ as they are at rev (None: the working tree), under dest."""
    dest.mkdir()
    if rev is None:
        shutil.copytree(ROOT / "templates", dest / "templates")
        shutil.copytree(ROOT / "edgernn", dest / "edgernn", ignore=shutil.ignore_patterns("__pycache__"))
        return dest
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "templates", "edgernn"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _render_headers(tree: Path, out: Path) -> None:
    """The kernel table's C files (edgernn_kernels.h ...) as tree's own code renders them."""
    out.mkdir()
    code = "import sys; from edgernn.backend.kernel_sources import write_sources; write_sources(sys.argv[1])"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=env, cwd=tree)


def _functions(obj: Path, objdump: str) -> dict[str, str]:
    """Each function's disassembly with its addresses taken out (so a function's place does not count)."""
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(obj)], check=True, capture_output=True,
                          text=True).stdout
    functions, name = {}, None
    for line in text.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head and not head.group(1).startswith(".L"):      # a local label belongs to the function it is in
            name = head.group(1)
            functions[name] = []
        elif name and line.strip() and not head:
            instruction = re.sub(r"\b[0-9a-f]+ <", "<", line.split(":", 1)[-1].strip())
            functions[name].append(re.sub(r"<\.L\d+>", "<.L>", instruction))
    return {k: "\n".join(v) for k, v in functions.items()}


def _kernel_dir(tree: Path, kernel_set: str, dest: Path) -> Path:
    """The side's kernels as a build of kernel_set has them: the reference files, then the set's over them (a
    side older than the kernel sets has its GAP8 paths in the reference files)."""
    shutil.copytree(tree / "templates" / "kernels", dest)
    overlay = tree / "templates" / "targets" / kernel_set / "kernels"
    if kernel_set != "reference" and overlay.is_dir():
        for path in overlay.iterdir():
            shutil.copyfile(path, dest / path.name)
    return dest


def _compile(kernels: Path, headers: Path, source: str, compiler: list[str], flags: list[str],
             objdump: str, work: Path) -> dict[str, str]:
    path = kernels / source
    if not path.exists():
        return {}
    obj = work / (source + ".o")
    subprocess.run([*compiler, "-std=c99", "-O2", *flags, "-c",
                    "-I", str(kernels), "-I", str(headers), str(path), "-o", str(obj)], check=True)
    return _functions(obj, objdump)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", required=True, help="the git revision to compare the working tree with")
    parser.add_argument("sources", nargs="*", help="kernel sources (default: every templates/kernels/*.c)")
    args = parser.parse_args()
    differ = 0
    with tempfile.TemporaryDirectory(prefix="edgernn-objects-") as tmp:
        tmp = Path(tmp)
        sides = {}
        for side, rev in (("before", args.rev), ("after", None)):
            tree = _tree_at(rev, (tmp / side))
            _render_headers(tree, tmp / side / "headers")
            sides[side] = tree
        sources = args.sources or sorted({p.name for side in sides.values()
                                          for p in (side / "templates" / "kernels").glob("*.c")})
        for label, (compiler, objdump, kernel_set, flags) in CONFIGS.items():
            if shutil.which(compiler[0]) is None:
                print(f"{label}: {compiler[0]} not found, not compared")
                continue
            functions = {}
            for side, tree in sides.items():
                work = tmp / side / "".join(c if c.isalnum() else "-" for c in label)
                work.mkdir()
                kernels = _kernel_dir(tree, kernel_set, work / "kernels")
                functions[side] = {}
                for source in sources:
                    functions[side].update(_compile(kernels, tmp / side / "headers", source, compiler, flags,
                                                    objdump, work))
            before, after = functions["before"], functions["after"]
            same = 0
            for name in sorted(set(before) | set(after)):
                if name not in after or name not in before:
                    print(f"{label}: {name} only {'before' if name not in after else 'after'}")
                    differ += 1
                elif before[name] != after[name]:
                    print(f"{label}: {name} differs")
                    differ += 1
                else:
                    same += 1
            print(f"{label}: {same} functions identical in {len(sources)} sources")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
