"""Where a GAP8 step's cycles go in GVSOC: a profile by op and core, and of one cluster core (--core, 0 by default) by function and
instruction, from GVSOC's instruction trace.

The model (int8 LSTM(64) step model by default, as bench_gap8.py builds it) is built once, its ai_deck
firmware built with the given make variables, and run in GVSOC's debug build with every cluster core's
instructions traced: edgernn.targets.gap8.gvsoc_trace.GvsocTracedRun, the machinery of `edgernn validate --profile`
(the trace is read from a named pipe as GVSOC writes it). Each traced instruction is charged the cycles
until its core's next one, so a multi-cycle instruction (mulh, div), a taken branch or a stall lands on one
instruction, and an instruction-cache miss on the first instruction of a 16-byte line; a core's sleep in
the event unit lands on the instruction before its wake-up. The window is one step: from the N-th entry of
the cluster's master core into the step's body (edgernn_step_body) to its return, the very span the
firmware's own counter (cluster cycles) times. Functions come from the ELF's symbols (nm); `--pcs K` lists
core 0's K costliest instructions with their disassembly, `--annotate F` every instruction of function F.

It prints figures and asserts nothing.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/profile_gap8.py [--cores 1] [--simd 1] [--model lstm64]
        [--work DIR] [--steps 5] [--step 3] [--pcs 30] [--annotate FUNCTION] [--var NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from edgernn.link import LinkClient
from edgernn.targets import device as devices
from edgernn.targets.gap8.sdk import build_gvsoc
from edgernn.targets.gap8.gvsoc_trace import GvsocTracedRun
from edgernn.targets.profile import binutil, disassembly
from edgernn.testing.bench import build_gap8, gap8_inputs
from edgernn.tflite import model as tfl
from edgernn.tflite.oracle import quantize
from edgernn.validate.run import outside_rows

BOARD = "gvsoc_gap8"


def run_traced(elf: Path, model_c: Path, xs: np.ndarray, step: int) -> GvsocTracedRun:
    """Run elf in GVSOC with every cluster core traced, feeding it xs over the UART; the run, finished."""
    board = devices.load_board(BOARD)
    traced = GvsocTracedRun(elf, model_c, board, step, install=build_gvsoc())
    try:
        with LinkClient.open(traced.url, baud=board.serial.baud, timeout=board.serial.timeout_s * 10) as link:
            link.wait_ready(board.emulator.start_timeout_s * 10)
            link.hello()
            result = link.run(xs, states="none")
            link.bye()
        traced.counted = result
        traced.profile = traced.result()
    finally:
        traced.stop()
    return traced


def report(traced: GvsocTracedRun, elf: Path, out: Path, n_pcs: int, annotate: list[str] = (), core: int = 0) -> None:
    prof, profiler, step = traced.profile, traced.profiler, traced.profile["step"]
    team = traced.counted.team_cycles
    counted = int(team[step]) if team is not None else int(traced.counted.cycles[step])
    total = prof["cycles"]
    print(f"step {step} on the cluster: {total:,} cycles traced, {counted:,} counted by the firmware "
          f"({100 * (total - counted) / counted:+.2f} %); the whole step {int(traced.counted.cycles[step]):,}")
    macs = tfl.op_macs(tfl.read((out / "step.tflite").read_bytes())) if (out / "step.tflite").is_file() else []
    print(f"{'op':48s} {'cycles':>8s} {'share':>6s} {'MACs':>8s} {'MAC/cyc':>8s}  work per core")
    for row in prof["statements"]:
        m = sum(macs[i] for i in row["ops"] if i < len(macs))
        print(f"{row['label'][:48]:48s} {row['cycles']:8,d} {100 * row['cycles'] / total:5.1f}% {m:8,d} "
              f"{m / row['cycles'] if row['cycles'] and m else 0:8.3f}  {row['work']}")
    whole = int(traced.counted.cycles[step])
    for row in outside_rows(prof, int(team[step]) if team is not None else None, whole):
        print(f"{row['label'][:48]:48s} {row['cycles']:8,d} {100 * row['cycles'] / total:5.1f}% {0:8,d} {0:8.3f}  "
              f"{row['work']}")
    print(f"{'the rows add up to the whole step':48s} {whole:8,d}")
    print(f"{'cores':48s} work {prof['work']}, wait {prof['wait']} (in the body)")
    lines = sorted({pc >> 4 for pc in profiler.by_pc(None)})
    sets: dict[int, int] = {}
    for line in lines:
        sets[line % 64] = sets.get(line % 64, 0) + 1
    over = {s: n for s, n in sets.items() if n > 4}
    print(f"code the step ran, every core: {len(lines)} lines of 16 bytes ({16 * len(lines):,} B; the cluster's "
          f"instruction cache holds 256 in 64 sets of 4), {len(over)} sets asked for more than 4 "
          f"({sum(over.values())} lines)")
    per_fn_lines: dict[str, int] = {}
    for line in lines:
        fn = profiler.map.function(line << 4 if (line << 4) in profiler.by_pc(None) else min(
            pc for pc in profiler.by_pc(None) if pc >> 4 == line))
        per_fn_lines[fn] = per_fn_lines.get(fn, 0) + 1
    print("  by function: " + ", ".join(f"{fn} {n}" for fn, n in sorted(per_fn_lines.items(), key=lambda kv: -kv[1])))
    per_fn = profiler.by_function(core)
    print(f"\ncluster core {core} by function:\n{'function':44s} {'cycles':>9s} {'share':>6s} {'insns':>8s} {'cyc/insn':>8s}")
    for fn, (c, n) in sorted(per_fn.items(), key=lambda kv: -kv[1][0]):
        print(f"{fn:44s} {c:9,d} {100 * c / total:5.1f}% {n:8,d} {c / max(n, 1):8.2f}")
    board = devices.load_board(BOARD)
    per_pc = profiler.by_pc(core)
    addrs, names = profiler.map.addrs, profiler.map.names
    if n_pcs or annotate:
        dis = disassembly(elf, binutil(board, "objdump"))
    if n_pcs:
        print(f"\nthe {n_pcs} costliest instructions of core {core} (cycles, times run, function, disassembly):")
        for pc, (c, n) in sorted(per_pc.items(), key=lambda kv: -kv[1][0])[:n_pcs]:
            print(f"{pc:08x} {c:7,d} {n:6,d}  {profiler.map.function(pc):32s} {dis.get(pc, '?')}")
    for fn in annotate:
        k = names.index(fn)
        end = addrs[k + 1] if k + 1 < len(addrs) else max(dis) + 1
        print(f"\n{fn}, instruction by instruction on core {core} (cycles, times run, disassembly):")
        for pc in sorted(a for a in dis if addrs[k] <= a < end):
            c, n = per_pc.get(pc, (0, 0))
            print(f"{pc:08x} {c:7,d} {n:6,d}  {dis[pc]}")


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
    parser.add_argument("--model", default="lstm64", help="edgernn.testing.bench.GAP8_MODELS' names")
    parser.add_argument("--quant", default="int8", choices=["int8", "int16"], help="the --model's precision")
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--simd", type=int, default=1)
    parser.add_argument("--var", action="append", default=[], help="another make variable, NAME=VALUE")
    parser.add_argument("--work", help="a folder kept between runs (the model is built once)")
    parser.add_argument("--out", help="an OUT folder already generated for gvsoc_gap8 (a frame model of "
                                      "bench_conv.py --keep or bench_frames.py --keep) instead of --model")
    parser.add_argument("--steps", type=int, default=5, help="steps to run")
    parser.add_argument("--step", type=int, default=3, help="the step profiled (0-based; the first warm caches)")
    parser.add_argument("--pcs", type=int, default=30)
    parser.add_argument("--core", type=int, default=0, help="the cluster core profiled by function and instruction")
    parser.add_argument("--annotate", action="append", default=[], help="a function to list instruction by instruction")
    args = parser.parse_args()

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="profile_gap8_"))
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else work / (args.model if args.quant == "int8" else f"{args.model}_{args.quant}")
    name = out.name
    if args.out:
        manifest = step_facts(out)
    else:
        if not (out / "manifest.json").is_file():
            out = build_gap8(args.model, work, args.quant)
        manifest = json.loads((out / "manifest.json").read_text())
    x_entry = manifest["inputs"][0]
    width = int(np.prod(x_entry["shape"][1:]))  # a vector's features or a frame's H*W*C
    steps = max(args.steps, args.step + 2)
    xs = (gap8_inputs(args.model, steps, x_entry) if not args.out else
          quantize(np.random.default_rng(0).normal(0, 0.5, (steps, width)).astype(np.float32), x_entry))
    make_vars = {"EDGERNN_CLUSTER_CORES": args.cores, "EDGERNN_XPULP": args.simd}
    make_vars.update(dict(v.split("=", 1) for v in args.var))
    tag = "_".join(f"{k}{v}" for k, v in sorted(make_vars.items()))
    board = devices.load_board(BOARD)
    elf = Path(devices.build_elf(out / "firmware", board, work / f"{name}_{tag}", make_vars=make_vars).elf)
    traced = run_traced(elf, out / "firmware" / "model.c", xs, args.step)
    print(f"model {name}, {manifest['macs_per_step']:,} MACs/step, make variables {make_vars}")
    report(traced, elf, out, args.pcs, args.annotate, args.core)


if __name__ == "__main__":
    main()
