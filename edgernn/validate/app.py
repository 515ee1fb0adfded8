"""``edgernn validate OUT --data frames.npy`` for a camera application (``edgernn build --app camera``): the
application as built, run on the emulated deck with its camera playing the frames, every output it sends
compared with the TFLite interpreter's on the same frames.

For each sequence of ``(sequences, frames, 244, 324)`` uint8 camera frames: the frames become .raw image files,
the board starts (gvsoc_gap8: GVSOC, its camera model playing the files, one file for each frame the sensor is
triggered for), the host connects to the deck's ESP32 as its WiFi host and collects the application's messages
(CPX APP packets, edgernn.link.appmsg), one a frame. The reference is the interpreter on the step model (and the
head after each step) fed the bytes of the host twin of the preprocessing (edgernn.targets.camera), from a reset
state at each sequence's first frame: a wrong state shows in every output after it. The float model is fed the
same frames' float inputs.

The report has validate's keys (docs/report.md) and ``app``: the frames per second at the board's clock and
each frame's split between the capture (the rest of the frame period: sending the previous frame's outputs and
waiting for this frame), the preprocessing and the model.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from edgernn.errors import EdgeRNNError, LinkError
from edgernn.outdir import Manifest
from edgernn.targets import camera
from edgernn.tflite.oracle import dequantize
from edgernn.validate import compare

FIRST_FRAME_TIMEOUT_S = 120.0       # boot, the model's init, the first capture: GVSOC runs it slower than the chip


def load_frames(data, steps: int | None) -> np.ndarray:
    """The camera frames of ``--data`` (a .npy path or an array), the first ``steps`` frames of each sequence."""
    if data is None:
        raise EdgeRNNError("validating a camera application needs camera frames: pass --data frames.npy, "
                           f"(sequences, frames, {camera.SENSOR_HEIGHT}, {camera.SENSOR_WIDTH}) uint8")
    if isinstance(data, (str, Path)):
        from edgernn.tflite.quantize import read_npy

        data = read_npy(data, "the camera frames", mmap=True)
    frames = camera.check_frames(data, "--data")
    return frames[:, :steps] if steps else frames


def _messages(device, count: int, n_outputs: int, dtype: str, timeout: float) -> list:
    """The first ``count`` messages the application sends to its WiFi host."""
    from edgernn.link import appmsg
    from edgernn.link.cpx import CpxPort

    port = CpxPort(device.url, connect_timeout=timeout)
    port.keep_other = 1 << 20
    reassembler = appmsg.Reassembler(n_outputs=n_outputs, dtype=dtype)
    got = []
    try:
        deadline = time.monotonic() + FIRST_FRAME_TIMEOUT_S + timeout
        while len(got) < count:
            if time.monotonic() > deadline:
                raise LinkError(f"the application sent {len(got)} of {count} frames' outputs, then nothing for "
                                f"{timeout:.0f} s (the simulator's log: {device.simulator.log_path})")
            if not device.running():
                raise LinkError(f"the simulated deck stopped (exit status {device.process.returncode}) after "
                                f"{len(got)} of {count} frames' outputs (log: {device.simulator.log_path})")
            for packet in port.packets(0.2):
                if packet.function != appmsg.cpx.APP or packet.source != appmsg.cpx.GAP8:
                    continue
                try:
                    message = reassembler.feed(packet.last, packet.data)
                except appmsg.AppMessageError as why:
                    raise LinkError(f"the application's message for frame {len(got)} is malformed: {why}") from None
                if message is not None:
                    got.append(message)
                    deadline = time.monotonic() + timeout
    finally:
        port.close()
    return got[:count]


def _run_sequence(adapter, out: Path, frames: np.ndarray, y_entry: dict, timeout: float) -> list:
    """One sequence's frames through the application on the emulated deck: its messages, one a frame."""
    with tempfile.TemporaryDirectory(prefix="edgernn-frames-") as folder:
        for i, frame in enumerate(frames):
            (Path(folder) / f"frame{i:06d}.raw").write_bytes(np.ascontiguousarray(frame).tobytes())
        device = adapter.start_app(out, str(Path(folder) / "frame%06d.raw"))
        try:
            n = int(np.prod(y_entry["shape"][1:]))
            return _messages(device, len(frames), n, y_entry["dtype"], timeout)
        finally:
            device.stop()


def _references(out: Path, manifest: Manifest):
    """The interpreter on the step model (edgernn.validate.run.InterpreterReference), and the float model beside
    it (FloatTwin), or None and why there is none: loaded once, reset at each sequence."""
    from edgernn.validate.run import FloatTwin, InterpreterReference

    reference = InterpreterReference(out, manifest)
    try:
        return reference, FloatTwin(out, manifest), None
    except FileNotFoundError:
        return reference, None, "this build folder has no float step model"


def _reference(reference, xq: np.ndarray) -> np.ndarray:
    """The interpreter's outputs for one sequence of the device's input bytes (frames, H, W, 1), from a reset state:
    the step's, or after each step the head's, raw."""
    reference.start()
    ys = reference.advance(xq.reshape(len(xq), -1)).y
    head = reference.stepper.head
    return np.asarray(head.run(ys)) if head is not None else ys


def _float_outputs(twin, x: np.ndarray) -> np.ndarray:
    """The float model's outputs for one sequence of float inputs, from a reset state (the head's after each step)."""
    twin.start(0)
    ys = twin.advance(x.reshape(len(x), -1))
    head = twin.stepper.head
    return np.asarray(head.run(ys), np.float32) if head is not None else ys


def validate_app(out: Path, manifest: Manifest, board, *, port=None, data=None, steps=None, json_path=None,
                 html_path=None, timeout: float | None = None, view=None) -> dict:
    """Validate OUT's camera application on its emulated board; returns the report (``report["pass"]``)."""
    from edgernn.targets.device import adapter_for
    from edgernn.validate.run import _ReportFiles

    if port is not None:
        raise EdgeRNNError(f"{out} holds a camera application: it is validated from image files on gvsoc_gap8 "
                           "(`edgernn build MODEL --board gvsoc_gap8 --app camera`), not over --port; on the deck its "
                           "outputs come from the camera (docs/app.md, \"Watching the outputs\")")
    if board is None or not board.emulated:
        raise EdgeRNNError(f"{out} holds a camera application for {manifest.board}: validate the same model built for "
                           "gvsoc_gap8 with --app camera, which plays image files through the deck's camera in GVSOC")
    frames = load_frames(data, steps)
    files = _ReportFiles.checked(out, json_path, html_path, None)
    record = manifest.app or {}
    pre = camera.Preprocess.from_dict(record.get("preprocess") or {})
    x_entry = manifest.inputs[0]
    y_entry = (manifest.head or {}).get("output") or manifest.outputs[0]
    adapter = adapter_for(board)
    timeout = float(timeout or board.serial.timeout_s)
    reference = compare.ReferenceStats(y_entry, [(0, frames.shape[1])])
    floats = compare.ErrorSums()
    interpreter, twin, float_note = _references(out, manifest)
    against = twin.against if twin is not None else None
    per_frame = []
    started = time.monotonic()
    progress = view.progress(frames.shape[0] * frames.shape[1]) if view is not None else None
    bar = progress.__enter__() if progress is not None else None
    try:
        for seq in range(frames.shape[0]):
            xq = camera.model_inputs(frames[seq], pre, x_entry)
            want = _reference(interpreter, xq)
            messages = _run_sequence(adapter, out, frames[seq], y_entry, timeout)
            got = np.stack([m.outputs for m in messages]).astype(want.dtype).reshape(want.shape)
            reference.update(seq, 0, got, want, None, None)
            if twin is not None:
                flt = _float_outputs(twin, camera.float_inputs(frames[seq], pre))
                floats.update(dequantize(got, y_entry), flt.reshape(got.shape))
            for t, m in enumerate(messages):
                if m.frame != t:
                    raise LinkError(f"the application numbered its outputs of frame {t} of sequence {seq} as frame "
                                    f"{m.frame}: it skipped or repeated a frame")
                per_frame.append((seq, t, m.capture_cycles, m.preprocess_cycles, m.model_cycles, m.overlapped))
            if bar is not None:
                bar(len(messages))
    finally:
        if progress is not None:
            progress.__exit__(None, None, None)
    report = _report(manifest, board, frames, reference, floats, float_note, against, per_frame, record,
                     time.monotonic() - started, files)
    if view is not None:
        view.summary(report)
    _write(report, files)
    return report


def _report(manifest, board, frames, reference, floats, float_note, against, per_frame, record, seconds, files) -> dict:
    ref = reference.result()
    flt = floats.result()
    if float_note:
        flt["skipped"] = float_note
    elif against:
        flt["against"] = against
    rows = np.asarray([r[2:5] for r in per_frame], np.float64)
    # the first frame of each sequence waits for the boot's first capture: the steady state is the others
    steady = np.asarray([r[1] > 0 for r in per_frame])
    body = rows[steady] if steady.any() else rows
    capture, pre, model = (float(v) for v in body.mean(axis=0))
    period = capture + pre + model
    clock = board.cpu.clock_hz
    macs = (manifest.macs_per_step or 0) + (manifest.head_macs or 0)
    app = {
        "frames": int(len(per_frame)),
        "preprocess": record.get("preprocess"),
        "frame_buffers": record.get("frame_buffers"),
        "destinations": record.get("destinations"),
        "cycles_per_frame": {"capture": capture, "preprocess": pre, "model": model, "period": period},
        "cycle_counter": board.cpu.cycle_counter,
        "clock_hz": clock,
        "frames_per_second": clock / period if period and clock else None,
        # what the GAP8's work alone would allow, were the camera never waited for
        "compute_frames_per_second": clock / (pre + model) if (pre + model) and clock else None,
        "capture_overlapped_compute": bool(all(r[5] for r in per_frame)),
        "camera_bound": bool(capture > pre + model),
        "per_frame": [{"sequence": r[0], "frame": r[1], "capture": r[2], "preprocess": r[3], "model": r[4]}
                      for r in per_frame],
        "timing": ("GVSOC's timing model, its camera model's frame timing included; not measured on a GAP8"
                   if board.emulated else "measured on the deck"),
    }
    return {
        "pass": ref["mismatches"] == 0,
        "board": board.name,
        "quant": manifest.quant,
        "model_sha256": manifest.model_sha256,
        "steps": int(frames.shape[1]),
        "sequences": int(frames.shape[0]),
        "reference": ref,
        "float": flt,
        "device": {"cycles_per_step": model, "cycle_counter": "the model's step (and head) in the application, "
                   + board.cpu.cycle_counter, "macs_per_step": macs, "arena_bytes": manifest.arena_bytes,
                   "weight_bytes": manifest.weight_bytes, "code_bytes": manifest.code_bytes,
                   "macs_per_cycle": macs / model if model else None},
        "app": app,
        "link": {"transport": "CPX APP packets through the simulated ESP32 (edgernn's model of the deck's, in GVSOC), "
                              "as its WiFi host", "seconds": round(seconds, 3)},
        "notes": [],
        "files": {"json": str(files.json), "html": str(files.html)},
    }


def _write(report: dict, files) -> None:
    from edgernn.outdir import os_error_message
    from edgernn.validate import report as report_writer
    from edgernn.validate.run import ReportNotWritten

    try:
        report_writer.write_json(report, files.json)
        report_writer.write_app_html(report, files.html)
        if files.default:
            files.folder.record(files.json.name, files.html.name)
    except OSError as exc:
        err = ReportNotWritten(os_error_message(exc, f"write {files.json}", show_file=False)
                               + f" (the verdict above stands: {'PASS' if report['pass'] else 'FAIL'})")
        err.exit_code = 2 if report["pass"] else 1
        raise err from None
