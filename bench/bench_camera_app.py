"""The deck's camera application in GVSOC (`edgernn build --board gvsoc_gap8 --app camera`, `edgernn validate --data
frames.npy`): for each model, the frames per second at the cluster's 175 MHz and each frame's split between capture,
preprocessing and model, in GVSOC's timing model (its camera model's frame timing included: a simulator's count,
not a measurement on a GAP8), beside the parity over every frame. Asserts nothing.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_camera_app.py [--models cnn_gru,residual_cnn,dronet_quarter]
        [--frames 8] [--keep DIR]

Models (edgernn.testing.frames_zoo): cnn_gru, a CNN + GRU(8) with a Dense head after every frame, int8, 48x64 (the
frame reduced by 5); residual_cnn, a stateless CNN with an Add, int16, 36x40 at factor 2, [-1, 1]; dronet_quarter,
the PULP-Dronet-class CNN at a quarter of its widths, int8, 200x200 (the frame's centre, factor 1); dronet, the same at
PULP-Dronet's widths (0.32 M parameters); frame_cfc, a CNN into a CfC on an AutoNCP(12, 2) wiring, int8, 48x64. A
model the application cannot hold is listed with its refusal. Calibrated on the twin's float inputs of other frames.
"capture" is the rest of the frame period: sending the previous frame's outputs, then waiting for this frame; the
loop is camera-bound when it is the largest. "GAP8 alone" is the frames per second of preprocessing and model alone.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path


def _models():
    from edgernn.testing import frames_zoo as zoo

    return {
        "cnn_gru": (lambda: zoo.camera_cnn_gru_head(seed=3), "int8", {}),
        "residual_cnn": (lambda: zoo.camera_residual_cnn(seed=3), "int16",
                         {"factor": 2, "crop": (30, 20), "scale": 2 / 255, "offset": -1.0}),
        "dronet_quarter": (lambda: zoo.dronet_class(zoo.DRONET_WIDTHS_L2, seed=3), "int8", {}),
        "dronet": (lambda: zoo.dronet_class(zoo.DRONET_WIDTHS, seed=3), "int8", {}),
        "frame_cfc": (lambda: zoo.frame_cfc(48, 64, 1, seed=3), "int8", {}),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cnn_gru,residual_cnn,frame_cfc,dronet_quarter,dronet")
    ap.add_argument("--frames", type=int, default=8, help="frames a sequence (one sequence)")
    ap.add_argument("--keep", help="build in this folder and keep it")
    args = ap.parse_args()

    import numpy as np

    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.build import build_model
    from edgernn.targets import camera
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import camera_frames
    from edgernn.validate.run import validate

    gap_sdk.build_gvsoc()
    models = _models()
    with contextlib.ExitStack() as stack:
        root = Path(args.keep) if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        root.mkdir(parents=True, exist_ok=True)
        frames = camera_frames(1, args.frames, seed=11)
        np.save(root / "frames.npy", frames)
        rows, refused = [], []
        for name in args.models.split(","):
            make, quant, options = models[name]
            model = make()
            path = root / f"{name}.keras"
            model.save(path)
            shape = model.input_shape[2:] if len(model.input_shape) == 5 else model.input_shape[1:]
            pre = camera.plan_preprocess(shape, **options)
            calib = camera.float_inputs(camera_frames(4, 12, seed=5), pre)
            try:
                build_model(str(path), root / name, board="gvsoc_gap8", quant=quant, calib=calib,
                            app=camera.AppOptions(**options))
            except EdgeRNNError as why:
                refused.append(f"{name}: refused: {why}")
                continue
            report = validate(root / name, data=str(root / "frames.npy"), json_path=root / f"{name}.json")
            app, cyc = report["app"], report["app"]["cycles_per_frame"]
            rows.append((name, quant, f"{pre.height}x{pre.width}", f"{pre.factor} ({pre.crop_x},{pre.crop_y})",
                         app["frame_buffers"], cyc["capture"], cyc["preprocess"], cyc["model"],
                         app["frames_per_second"], app["compute_frames_per_second"],
                         report["device"]["macs_per_cycle"], report["reference"]["mismatches"]))
    print("| model | quant | input | factor (crop) | buffers | capture | preprocessing | model | frames/s | "
          "GAP8 alone, frames/s | model MAC/cycle | mismatches |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]:,.0f} | {r[6]:,.0f} | {r[7]:,.0f} | {r[8]:,.1f} | "
              f"{r[9]:,.1f} | {r[10]:.2f} | {r[11]} |")
    for line in refused:
        print(line)
    print(f"\nGVSOC's timing model of GAP8 at 175 MHz (cluster cycles), its camera model's frame timing included; "
          f"{args.frames} frames, the first left out of the means.")


if __name__ == "__main__":
    main()
