"""Where a GAP8 step's cycles go in GVSOC: a profile of cluster core 0 by function, from GVSOC's
instruction trace.

The model (int8 LSTM(64) step model by default, as bench_gap8.py builds it) is built once, its ai_deck
firmware built with the given make variables, and run in GVSOC's debug build (gvsoc_launcher_debug: the
only one with traces compiled in) with the instruction trace of cluster core 0 on
(`gvsoc/traces/include_regex` in the launcher's configuration). Each traced instruction carries the
core's cycle count; an instruction is charged the cycles until the core's next traced instruction, so a
multi-cycle instruction (mulh, div), a taken branch or a stall lands on one instruction, and an
instruction-cache miss on the first instruction of a 16-byte line. The window is one step: from the N-th
entry into the step's body (edgernn_step_body) to the next entry, so it holds the cluster's own side of
the dispatch and its wait for the next task (cl_master_sleep), not the FC's. Functions come from the
ELF's symbols (nm); `--pcs K` lists the K costliest instructions with their disassembly, `--annotate F`
every instruction of function F.

It prints figures and asserts nothing.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/profile_gap8.py [--cores 1] [--simd 1] [--model lstm64]
        [--work DIR] [--steps 5] [--step 3] [--pcs 30] [--annotate FUNCTION] [--trace FILE] [--var NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import re
import shutil
import subprocess
import tempfile
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from edgernn import procs  # noqa: E402
from edgernn.link import LinkClient  # noqa: E402
from edgernn.targets import device as devices  # noqa: E402
from edgernn.targets import gvsoc  # noqa: E402
from edgernn.targets.gap_sdk import build_gvsoc  # noqa: E402
from edgernn.tflite.oracle import quantize  # noqa: E402

BOARD = "gvsoc_gap8"
TRACE_RE = re.compile(r"^\s*(\d+):\s+(\d+):\s+\[[^\]]*\]\s+\S+\s+M?\s*([0-9a-fA-F]+)\s")
STEP_BODY = "edgernn_step_body"


def symbols(elf: Path) -> tuple[list[int], list[str]]:
    """Function symbols of the ELF, sorted by address."""
    nm = shutil.which("riscv64-unknown-elf-nm") or "nm"
    out = subprocess.run([nm, "-n", "--defined-only", str(elf)], capture_output=True, text=True, check=True).stdout
    addrs, names = [], []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            addrs.append(int(parts[0], 16))
            names.append(parts[2])
    return addrs, names


def disassembly(elf: Path) -> dict[int, str]:
    objdump = shutil.which("riscv64-unknown-elf-objdump") or "objdump"
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(elf)], capture_output=True, text=True).stdout
    lines = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(.*)$", line)
        if m:
            lines[int(m.group(1), 16)] = m.group(2).strip()
    return lines


def run_traced(elf: Path, xs: np.ndarray, trace: Path) -> None:
    """Run elf in GVSOC with core 0 of the cluster traced into trace, feeding it xs over the UART."""
    install = build_gvsoc()
    work = elf.parent / "gvsoc_trace"
    port = gvsoc.free_port()
    config_path = gvsoc.prepare_gvsoc_run(elf, work, port, install)
    config = json.loads(config_path.read_text())
    traces = config["gvsoc"]["traces"]
    traces.update({"enabled": True, "level": "debug", "include_regex": [f".*/cluster/pe0/insn:{trace}"]})
    config["gvsoc"]["debug-mode"] = True   # traces are compiled only into the debug models
    config_path.write_text(json.dumps(config))
    command = [str(Path(install) / "bin" / "gvsoc_launcher_debug"), f"--config={config_path}"]
    board = devices.load_board(BOARD)
    with open(work / "gvsoc.log", "wb") as log:
        proc = procs.spawn(command, cwd=work, env=gvsoc.gvsoc_env(install), stdin=subprocess.DEVNULL,
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not gvsoc._listens(proc.pid, port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"GVSOC did not start: see {work / 'gvsoc.log'}")
            time.sleep(0.05)
        with LinkClient.open(f"socket://127.0.0.1:{port}", baud=board["serial"]["baud"],
                             timeout=board["serial"]["timeout_s"] * 10) as link:
            link.wait_ready(board["emulator"]["start_timeout_s"] * 10)
            link.hello()
            result = link.run(xs, states="every")
            print(f"cycles per step (the firmware's own count): {[int(c) for c in result.cycles]}", file=sys.stderr)
    finally:
        procs.stop(proc, timeout=2.0)


def profile(trace: Path, elf: Path, step: int, n_pcs: int, annotate: list[str] = ()) -> None:
    addrs, names = symbols(elf)
    entry = addrs[names.index(STEP_BODY)]
    pcs, cycles = [], []
    with open(trace, errors="replace") as f:
        for line in f:
            m = TRACE_RE.match(line)
            if m:
                cycles.append(int(m.group(2)))
                pcs.append(int(m.group(3), 16))
    starts = [i for i, pc in enumerate(pcs) if pc == entry]
    if len(starts) < step + 2:
        raise SystemExit(f"the trace holds {len(starts)} entries into {STEP_BODY}; need {step + 2}")
    lo, hi = starts[step], starts[step + 1]
    per_pc: collections.Counter[int] = collections.Counter()
    count_pc: collections.Counter[int] = collections.Counter()
    for i in range(lo, hi):
        per_pc[pcs[i]] += cycles[i + 1] - cycles[i]
        count_pc[pcs[i]] += 1
    total = cycles[hi] - cycles[lo]
    per_fn: collections.Counter[str] = collections.Counter()
    insn_fn: collections.Counter[str] = collections.Counter()
    for pc, c in per_pc.items():
        k = bisect.bisect_right(addrs, pc) - 1
        per_fn[names[k] if k >= 0 else "?"] += c
        insn_fn[names[k] if k >= 0 else "?"] += count_pc[pc]
    print(f"one step on cluster core 0 (entry {step} to {step + 1} of {STEP_BODY}): {total:,} cycles, "
          f"{hi - lo:,} instructions")
    print(f"{'function':44s} {'cycles':>9s} {'share':>6s} {'insns':>8s} {'cyc/insn':>8s}")
    for fn, c in per_fn.most_common():
        print(f"{fn:44s} {c:9,d} {100 * c / total:5.1f}% {insn_fn[fn]:8,d} {c / max(insn_fn[fn], 1):8.2f}")
    if n_pcs:
        dis = disassembly(elf)
        print(f"\nthe {n_pcs} costliest instructions (cycles, times run, function, disassembly):")
        for pc, c in per_pc.most_common(n_pcs):
            k = bisect.bisect_right(addrs, pc) - 1
            print(f"{pc:08x} {c:7,d} {count_pc[pc]:6,d}  {names[k]:32s} {dis.get(pc, '?')}")
    for fn in annotate:
        dis = disassembly(elf)
        k = names.index(fn)
        end = addrs[k + 1] if k + 1 < len(addrs) else max(dis) + 1
        print(f"\n{fn}, instruction by instruction (cycles, times run, disassembly):")
        for pc in sorted(a for a in dis if addrs[k] <= a < end):
            print(f"{pc:08x} {per_pc[pc]:7,d} {count_pc[pc]:6,d}  {dis[pc]}")


def step_facts(out: Path) -> dict:
    """The manifest's input entry and MACs of an OUT folder: its manifest.json, or for a folder of
    bench_conv.py --keep (step.tflite and firmware/ only) the step model's input "x" and its
    CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED MACs."""
    if (out / "manifest.json").is_file():
        return json.loads((out / "manifest.json").read_text())
    if not (out / "step.tflite").is_file() or not (out / "firmware").is_dir():
        raise SystemExit(f"{out}: neither manifest.json nor step.tflite with firmware/")
    from edgernn.backend.reader import read_tflite

    g = read_tflite(out / "step.tflite")
    x = g.tensor(g.inputs["x"])
    scale, zp = x.qparams()
    macs = 0
    for op in g.operators:
        o, w = g.tensor(op.outputs[0]).shape, g.tensor(op.inputs[1]).shape if len(op.inputs) > 1 else ()
        if op.op == "CONV_2D":
            macs += int(np.prod(o[1:])) * w[1] * w[2] * w[3]
        elif op.op == "DEPTHWISE_CONV_2D":
            macs += int(np.prod(o[1:])) * w[1] * w[2]
        elif op.op == "FULLY_CONNECTED":
            macs += int(np.prod(w))
    return {"inputs": [{"shape": list(x.shape), "dtype": x.dtype, "scale": scale, "zero_point": zp}],
            "macs_per_step": macs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lstm64", help="bench_gap8.py's model names")
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--simd", type=int, default=1)
    parser.add_argument("--var", action="append", default=[], help="another make variable, NAME=VALUE")
    parser.add_argument("--work", help="a folder kept between runs (the model is built once)")
    parser.add_argument("--out", help="an OUT folder already generated for gvsoc_gap8 (a frame model of "
                                      "bench_conv.py --keep or bench_frames.py --keep) instead of --model")
    parser.add_argument("--steps", type=int, default=5, help="steps to run")
    parser.add_argument("--step", type=int, default=3, help="the step profiled (0-based; the first warm caches)")
    parser.add_argument("--pcs", type=int, default=30)
    parser.add_argument("--annotate", action="append", default=[], help="a function to list instruction by instruction")
    parser.add_argument("--trace", help="profile this trace of an earlier run instead of running")
    args = parser.parse_args()
    import bench_gap8

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="profile_gap8_"))
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else work / args.model
    name = out.name if args.out else args.model
    if args.out:
        manifest = step_facts(out)
    else:
        if not (out / "manifest.json").is_file():
            out = bench_gap8.build(args.model, work)
        manifest = json.loads((out / "manifest.json").read_text())
    x_entry = manifest["inputs"][0]
    width = int(np.prod(x_entry["shape"][1:]))  # a vector's features or a frame's H*W*C
    xs = quantize(np.random.default_rng(0).normal(0, 0.5, (args.steps, width)).astype(np.float32), x_entry)
    make_vars = {"EDGERNN_CLUSTER_CORES": args.cores, "EDGERNN_XPULP": args.simd}
    make_vars.update(dict(v.split("=", 1) for v in args.var))
    tag = "_".join(f"{k}{v}" for k, v in sorted(make_vars.items()))
    board = devices.load_board(BOARD)
    elf = devices.build_elf(out / "firmware", board, work / f"{name}_{tag}", make_vars=make_vars).elf
    trace = Path(args.trace) if args.trace else work / f"{name}_{tag}.trace"
    if not args.trace:
        run_traced(Path(elf), xs, trace)
    print(f"model {name}, {manifest['macs_per_step']:,} MACs/step, make variables {make_vars}")
    profile(trace, Path(elf), args.step, args.pcs, args.annotate)


if __name__ == "__main__":
    main()
