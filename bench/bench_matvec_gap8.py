"""The int8 matrix-vector kernel alone on GAP8 in GVSOC: 256 x 256 int8 weights in cluster L1, MAC/cycle
on 1 and 8 cluster cores, gcc's C dot products (EDGERNN_DOT_ASM=0) against the hand-written Xpulp
assembly (EDGERNN_DOT_ASM=1: inlined from edgernn_dot.h with Debian's gcc; 2: edgernn_dot_xpulp.S called), next to GVSOC's ceiling for the kernel's loop. Prints figures; asserts
nothing (a run whose int32 sums differ from numpy's, or whose output bytes differ between variants, is
printed as such).

The firmware is templates/targets/gap8/bench_matvec/main.c, built as a GAP SDK project with the kernels,
edgernn's GAP8 team and HAL (the same files and Makefile as a model's firmware), run in GVSOC's timing
model of GAP8 (not a chip) and read over its simulated UART. Two figures per run: "dot", the blocked
dot products to int32 (no requantization), and "fc", edgernn_fully_connected_s8 with its exact mulh
requantization to int8. See main.c for why the 256 rows read 128 rows held in L1 twice.

The ceiling is GVSOC's cost of the loop's instructions (1 cycle each, a hardware loop's back edge 0, no
load result used by the next instruction): one p.lw of 4 inputs, then per row one p.lw of 4 weights and
one pv.sdotsp.b, so 8 rows sharing an input word take 17 cycles per 32 MACs (1.88 MAC/cycle on one core,
15.1 on 8 with no fork or bank conflict), and any number of rows tends to 2 per core.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_matvec_gap8.py [--cores 1,8] [--asm 0,1]
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from edgernn._version import __version__
from edgernn.resources import templates_dir
from edgernn.targets import device as devices

BOARD = "gvsoc_gap8"
N_IN, N_OUT, HELD_ROWS = 256, 256, 128
DONE = b"~~~MATVEC DONE~~~"
ROWS_PER_WORD = 8
KINDS = {0: "gcc's SIMD C", 1: "assembly (EDGERNN_DOT_ASM=1)", 2: "assembly, .S called (EDGERNN_DOT_ASM=2)"}


def ceiling(cores: int) -> float:
    """GVSOC's MAC/cycle for the 8-row loop body: 32 MACs in 1 + 2 * 8 instructions, per core."""
    return cores * 4 * ROWS_PER_WORD / (1 + 2 * ROWS_PER_WORD)


def expected_sums() -> tuple[int, int]:
    """The sum of the int32 sums and of their squares, from main.c's generator (its order of draws)."""
    state = 12345

    def draw(n):
        nonlocal state
        out = np.empty(n, dtype=np.int8)
        for i in range(n):
            state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
            out[i] = np.int8(np.uint8(state >> 24))
        return out

    w = draw(HELD_ROWS * N_IN).reshape(HELD_ROWS, N_IN).astype(np.int64)
    x = draw(N_IN).astype(np.int64)
    bias = draw(N_OUT).astype(np.int64) * 64
    sums = np.array([bias[o] + int(w[o % HELD_ROWS] @ x) for o in range(N_OUT)], dtype=np.int64)
    return int(sums.sum()), int((sums * sums).sum())


def stage(work: Path, board) -> Path:
    """The GAP SDK project: the bench's main.c, the kernels, the GAP8 team and HAL, and the board's Makefile."""
    from edgernn.backend.codegen import copy_kernels, render_hal_templates

    project = work / "project"
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    sources = copy_kernels(project, board, ("edgernn_fully_connected_s8",))
    shutil.copyfile(templates_dir() / "targets" / "gap8" / "bench_matvec" / "main.c", project / "main.c")
    shutil.copyfile(templates_dir() / "targets" / "gap8" / "hal" / "hal.c", project / "hal.c")
    shutil.copyfile(templates_dir() / "firmware" / "hal.h", project / "hal.h")
    render_hal_templates(board, project, {"version": __version__, "sha256": "(kernel bench, no model)"},
                         [*sources, "main.c", "hal.c"])
    return project


def run(project: Path, board, cores: int, asm: int, work: Path, timeout: float = 600.0) -> dict:
    build = work / f"c{cores}_a{asm}"
    if build.exists():
        shutil.rmtree(build)
    shutil.copytree(project, build)
    from edgernn.targets.gap8.adapter import build_gap_project

    elf = build_gap_project(build, board, make_vars={"EDGERNN_CLUSTER_CORES": cores, "EDGERNN_DOT_ASM": asm},
                            image=False).elf
    data = b""
    with devices.start(elf, board) as device:
        host, port = device.url.split("://", 1)[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            deadline = time.monotonic() + timeout
            while DONE not in data and b"FAILED" not in data and time.monotonic() < deadline:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
    line = re.search(rb"MATVEC (.*?)\n", data)
    if line is None:
        raise SystemExit(f"no MATVEC line from the bench firmware (cores {cores}, asm {asm}): {data[-200:]!r}")
    return {k: int(v) for k, v in (f.split("=") for f in line.group(1).decode().split())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="1,8")
    parser.add_argument("--asm", default="0,1,2", help="EDGERNN_DOT_ASM values: 0 gcc's C, 1 the assembly in the "
                        "form that suits the compiler (inlined with Debian's gcc), 2 the .S functions called")
    parser.add_argument("--work", default=None, help="keep the builds in this folder")
    args = parser.parse_args()
    board = devices.load_board(BOARD)
    total, squares = expected_sums()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_matvec_") as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        project = stage(work, board)
        hashes = set()
        for cores in (int(c) for c in args.cores.split(",")):
            for asm in (int(a) for a in args.asm.split(",")):
                r = run(project, board, cores, asm, work)
                exact = r["sum_offset"] - (1 << 40) == total and r["squares"] == squares
                hashes.add(r["out_hash"])
                macs = N_IN * N_OUT
                rows.append((cores, KINDS[asm], r["dot_cycles"], macs / r["dot_cycles"], r["fc_cycles"],
                             macs / r["fc_cycles"], ceiling(cores), "yes" if exact else "NO"))
                print(f"cores {cores} {KINDS[asm]}: dot {r['dot_cycles']} fc {r['fc_cycles']} cycles",
                      file=sys.stderr)
    print(f"| cluster cores | dot products | dot cycles | dot MAC/cycle | FC cycles (with requantization) | "
          f"FC MAC/cycle | GVSOC ceiling of the loop | int32 sums exact |")
    print("|---|---|---|---|---|---|---|---|")
    for cores, kind, dc, dm, fc, fm, ceil, exact in rows:
        print(f"| {cores} | {kind} | {dc:,} | {dm:.2f} | {fc:,} | {fm:.2f} | {ceil:.2f} | {exact} |")
    print(f"\n{N_OUT} x {N_IN} int8, weights in cluster L1 ({HELD_ROWS} rows held, read twice); GVSOC's timing model "
          f"of GAP8, not a chip; cycles of the cluster task (forks included), the last of 3 runs. Output bytes "
          f"{'the same in every variant' if len(hashes) == 1 else 'DIFFER between variants'}.")


if __name__ == "__main__":
    main()
