"""A model beyond L2 on GAP8 in GVSOC: the step's cycles against its two bounds, and the HyperFlash and HyperRAM
read bandwidths, as GVSOC's timing model has them (not a chip). Prints figures; asserts nothing.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_l3.py [--model lstm|camera] [--steps 12]

The models are tests/targets/gap8/test_gvsoc_l3.py's, built for gvsoc_gap8 (edgernn/backend/streaming.py plans what
streams):
- lstm: LSTM(256) -> LSTM(128) -> Dense(4), int8, fused, 8 inputs (keras seed 0); its LSTM(256)'s recurrent
  matrix (262,144 B) is in L3 (HyperRAM), streamed each step in chunks of 16 units (16 KiB) into two L2 slots;
- camera: edgernn/testing/frames_zoo.py's camera_gru_l3, 24x32 frames, a CNN whose flatten feeds a Dense(128),
  then GRU(256), int8, step; the Dense's matrix (393,216 B) and the GRU's recurrent one (196,608 B) are in L3.
The same project is built four times with make's EDGERNN_L3_BENCH (templates/kernels/edgernn_l3_stream.h,
templates/targets/gap8/hal/l3/): 0 the firmware as built (its bytes are held to the interpreter by the test), 1 the
streamed calls' transfers alone (every chunk fetched and waited for, none computed; the rest of the step still
runs), 2 the compute alone (every chunk computed on what the slots hold, none fetched: the weights read from the
L2 slots, as in the real step, the others from L2), 4 the same with every chunk read from a buffer of the
slots' size in L1 (where L1 has room for it beside the arena and state: the compute with the streamed weights
in L1; else that mode reads the slots, and the bench says the figure is not measured), 3 the bandwidths: at init the fabric
controller reads the blob once from the HyperFlash (pi_flash_read) and once from the HyperRAM (pi_ram_read), in
4 KiB transfers to L2, counting its own cycles (pi_perf), and prints them. Cycles per step: the firmware's
count of the whole step (the FC's timer, the dispatch to the cluster included, in cluster cycles at 175 MHz),
the median from the third step on. The two bounds of the step: the compute alone (2), and the L3 transfer
time, the streamed bytes at the HyperRAM bandwidth that 3 measures (the FC's own 4 KiB reads: a conservative
figure, since the cluster's 16 KiB chunks stream faster, as 1 shows).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from edgernn.link import LinkClient
from edgernn.targets import device as devices
from edgernn.tflite.oracle import quantize

BOARD = "gvsoc_gap8"
MODES = {0: "the step as built", 1: "transfers alone", 2: "compute alone", 4: "compute alone, L1"}  # EDGERNN_L3_BENCH


def build(work: Path, which: str) -> Path:
    import keras

    from edgernn.pipeline.build import build_model as build_folder
    from edgernn.testing.frames_zoo import camera_gru_l3, moving_blobs
    from edgernn.testing.zoo import trajectories

    out = work / "out"
    if which == "camera":
        path = work / "camera_gru_l3.keras"
        camera_gru_l3().save(path)
        build_folder(str(path), out, board=BOARD, quant="int8", calib=moving_blobs(4, 20, 24, 32, seed=1))
        return out
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None, 8)), keras.layers.LSTM(256, return_sequences=True),
                              keras.layers.LSTM(128, return_sequences=True), keras.layers.Dense(4)], name="l3lstm")
    path = work / "l3lstm.keras"
    model.save(path)
    build_folder(str(path), out, board=BOARD, quant="int8", mode="fused", calib=trajectories(4, 40, 8, 1))
    return out


def inputs(which: str, steps: int, entry: dict) -> np.ndarray:
    from edgernn.testing.frames_zoo import moving_blobs

    if which == "camera":
        return quantize(moving_blobs(1, steps, 24, 32, seed=5)[0].reshape(steps, -1), entry)
    return quantize(np.random.default_rng(0).normal(0, 0.5, (steps, entry["shape"][-1])).astype(np.float32), entry)


def run_mode(out: Path, mode: int, xs: np.ndarray, work: Path):
    board = devices.load_board(BOARD)
    elf = devices.build_elf(out / "firmware", board, work / f"mode{mode}", make_vars={"EDGERNN_L3_BENCH": mode}).elf
    with devices.start(elf, board) as device:
        if mode == 3:
            return _bench_line(device.url)
        with LinkClient.open(device.url, baud=board["serial"]["baud"], timeout=board["serial"]["timeout_s"]) as link:
            link.wait_ready(board["emulator"]["start_timeout_s"])
            link.hello()
            return link.run(xs, states="every")


def _bench_line(url: str, timeout: float = 300.0) -> dict[str, int]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    text = b""
    with socket.create_connection((host, int(port))) as s:
        s.settimeout(1.0)
        end = time.monotonic() + timeout
        while time.monotonic() < end and b"~~~\n" not in text.split(b"L3 BENCH", 1)[-1]:
            try:
                chunk = s.recv(4096)
            except socket.timeout:
                continue
            if not chunk:
                break
            text += chunk
    found = re.search(rb"L3 BENCH bytes=(\d+) flash_fc_cycles=(\d+) ram_fc_cycles=(\d+)", text)
    if not found:
        raise SystemExit(f"no bandwidth line from the firmware: {text[-200:]!r}")
    return dict(zip(("bytes", "flash", "ram"), (int(v) for v in found.groups())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("lstm", "camera"), default="lstm")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    board = devices.load_board(BOARD)
    fc_hz, cl_hz = board["cpu"]["fc_hz"], board["cpu"]["cluster_hz"]
    with tempfile.TemporaryDirectory(prefix="bench_l3_") as tmp:
        work = Path(tmp)
        out = build(work, args.model)
        manifest = json.loads((out / "manifest.json").read_text())
        streamed = manifest["placement"]["streaming"]["l3_bytes_per_step"]
        x_entry = manifest["inputs"][0]
        xs = inputs(args.model, args.steps, x_entry)
        cycles, results = {}, {}
        l1_free = manifest["placement"]["budgets"]["l1"] - sum(
            v["bytes"] for v in manifest["placement"]["items"].values() if v["memory"] == "l1")
        in_l1 = manifest["placement"]["streaming"]["tile_bytes"] <= l1_free
        for mode in MODES:
            if mode == 4 and not in_l1:
                continue
            results[mode] = run_mode(out, mode, xs, work)
            cycles[mode] = float(np.median(results[mode].cycles[2:]))
            print(f"{MODES[mode]:20s} {cycles[mode]:12,.0f} cycles/step", file=sys.stderr)
        bw = run_mode(out, 3, xs, work)
    ram_per_fc_cycle = bw["bytes"] / bw["ram"]
    transfer = streamed / ram_per_fc_cycle * cl_hz / fc_hz      # the L3 transfer time, in cluster cycles
    compute = cycles[4] if in_l1 else cycles[2]
    bound = max(compute, transfer)
    name = "LSTM(256)/LSTM(128)/Dense(4)" if args.model == "lstm" else "camera CNN/Dense(128)/GRU(256)/Dense(4)"
    print(f"model: {name} int8, {manifest['macs_per_step']:,} MACs a step, weights "
          f"{manifest['weight_bytes']:,} B, {streamed:,} B of them read from L3 (HyperRAM) each step\n")
    print("| what | cycles/step | µs/step at 175 MHz |")
    print("|---|---|---|")
    rows = [(MODES[0], cycles[0]),
            ("bound: the compute alone, streamed weights in L1 (EDGERNN_L3_BENCH=4)" if in_l1 else
             f"bound: the compute alone, streamed weights in L1: not measured (the slots' "
             f"{manifest['placement']['streaming']['tile_bytes']:,} B do not fit L1's {l1_free:,} B left)",
             cycles.get(4, float("nan"))),
            ("the compute alone, streamed weights read from the L2 slots (EDGERNN_L3_BENCH=2)", cycles[2]),
            (f"bound: {streamed:,} B at the HyperRAM's bandwidth below", transfer),
            ("the step without the streamed calls' compute (EDGERNN_L3_BENCH=1)", cycles[1])]
    for label, n in rows:
        print(f"| {label} | {n:,.0f} | {n / cl_hz * 1e6:,.1f} |")
    print(f"\nthe step against the larger bound ({'L1' if in_l1 else 'L2'} compute, transfer): {cycles[0] / bound:.3f}x "
          f"(goal <= 1.25x); against the compute alone from the L2 slots: {cycles[0] / cycles[2]:.3f}x; against the "
          f"sum of the bounds: {cycles[0] / (compute + transfer):.3f}x")
    print(f"the cluster's stream (pi_cl_ram_read, 16 KiB chunks), from EDGERNN_L3_BENCH=1: at least "
          f"{streamed / cycles[1]:.3f} B per cluster cycle = {streamed / cycles[1] * cl_hz / 1e6:,.1f} MB/s (that step also "
          "computes the unstreamed ops)")
    for key, label in (("flash", "HyperFlash (pi_flash_read)"), ("ram", "HyperRAM (pi_ram_read)")):
        per_cycle = bw["bytes"] / bw[key]
        print(f"{label}, FC, 4 KiB transfers to L2: {bw['bytes']:,} B in {bw[key]:,} FC cycles = {per_cycle:.3f} B per "
              f"FC cycle = {per_cycle * fc_hz / 1e6:,.1f} MB/s at {fc_hz / 1e6:.0f} MHz")
    print("\nGVSOC's timing model of GAP8, not a chip.")


if __name__ == "__main__":
    main()
