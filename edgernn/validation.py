"""``edgernn validate``: run test sequences on the device and prove its numbers.

The device's outputs and states are compared byte for byte with the TFLite interpreter running
``step.tflite`` on the reference kernels (state fed back step by step), and its dequantized outputs
with the float Keras model on the same sequences. Parity holds when int8/int16 outputs and states
match exactly, or float32 ones within 1e-5 relative.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn.errors import EdgeRNNError, LinkError
from edgernn.reference import dequantize, quantize

FLOAT_RTOL = 1e-5
DEFAULT_STEPS = 1000
_DTYPES = {"int8": np.int8, "int16": np.int16, "float32": np.float32}


@dataclass
class ReferenceRun:
    """What the oracle says for quantized input sequences."""

    y: np.ndarray          # (sequences, steps, outputs) in the device's output type
    states: np.ndarray     # (sequences, steps, state_bytes) uint8: all states after each step


def read_build_folder(out_dir: str | os.PathLike) -> dict:
    out = Path(out_dir)
    manifest_path = out / "manifest.json"
    if not out.is_dir() or not manifest_path.is_file():
        what = "does not exist" if not out.exists() else "is not an edgernn build folder (no manifest.json)"
        raise EdgeRNNError(f"{out} {what}: create one with `edgernn build MODEL --board BOARD -o {out}`")
    try:
        manifest = json.loads(manifest_path.read_text())
    except ValueError as exc:
        raise EdgeRNNError(f"{manifest_path} is not valid JSON ({exc})") from None
    for key in ("inputs", "outputs", "states", "model_sha256", "quant"):
        if key not in manifest:
            raise EdgeRNNError(f"{manifest_path} lacks '{key}': rebuild {out} with this edgernn version")
    return manifest


def _size(entry: dict) -> int:
    return int(np.prod(entry["shape"]))


def _features(manifest: dict) -> int:
    return _size(manifest["inputs"][0])


def load_test_data(data: Any, manifest: dict, steps: int | None, sequences: int = 1, seed: int = 0) -> np.ndarray:
    """Test sequences (sequences, steps, features) float32 from a .npy path, an array, or made up."""
    features = _features(manifest)
    if data is None:
        return synthetic_sequences(manifest, steps or DEFAULT_STEPS, sequences, seed)
    if isinstance(data, (str, os.PathLike)):
        try:
            data = np.load(data, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise EdgeRNNError(f"cannot read test data {data}: {exc}") from None
    data = np.asarray(data)
    if data.ndim == 2 and features == 1 and data.shape[-1] != 1:
        data = data[..., None]
    if data.ndim != 3 or data.shape[2] != features or data.shape[0] < 1 or data.shape[1] < 1:
        raise EdgeRNNError(f"test data of shape {tuple(data.shape)} does not fit the model: expected "
                           f"(sequences, steps, {features}) in the model's input units")
    if not np.all(np.isfinite(data)):
        raise EdgeRNNError("test data holds NaN or infinite values")
    if steps:
        data = data[:, :steps]
    return data.astype(np.float32)


def synthetic_sequences(manifest: dict, steps: int, sequences: int = 1, seed: int = 0) -> np.ndarray:
    """Smooth random signals spanning most of the input's quantized range (or [-1, 1] for float)."""
    entry = manifest["inputs"][0]
    features = _size(entry)
    lo, hi = -1.0, 1.0
    if entry["dtype"] != "float32":
        info = np.iinfo(_DTYPES[entry["dtype"]])
        lo = (info.min - entry["zero_point"]) * entry["scale"]
        hi = (info.max - entry["zero_point"]) * entry["scale"]
    mid, half = (lo + hi) / 2, 0.8 * (hi - lo) / 2
    rng = np.random.default_rng(seed)
    t = np.arange(steps)[None, :, None]
    freq = rng.uniform(0.005, 0.08, (sequences, 1, features))
    phase = rng.uniform(0, 2 * np.pi, (sequences, 1, features))
    noise = rng.normal(0, 0.15, (sequences, steps, features))
    return (mid + half * np.clip(np.sin(2 * np.pi * freq * t + phase) * 0.85 + noise, -1, 1)).astype(np.float32)


def interpreter_reference(out_dir: Path, manifest: dict) -> Callable[[np.ndarray], ReferenceRun]:
    """The TFLite interpreter on step.tflite, with each state fed back, as a reference function."""
    from edgernn.reference import StepRunner

    runner = StepRunner(out_dir, manifest)

    def run(xq: np.ndarray) -> ReferenceRun:
        trace = runner.run(xq, quantized_input=True)
        parts = [np.ascontiguousarray(trace.states[s["name"]].astype(_DTYPES[s["dtype"]]))
                 for s in manifest["states"]]
        per_step = [p.reshape(p.shape[0], p.shape[1], -1).view(np.uint8) for p in parts]
        states = np.concatenate(per_step, axis=2) if per_step else np.zeros(xq.shape[:2] + (0,), np.uint8)
        return ReferenceRun(trace.y.astype(_DTYPES[manifest["outputs"][0]["dtype"]]), states)

    run.runner = runner  # type: ignore[attr-defined]
    return run


def compare_reference(device_y: np.ndarray, ref_y: np.ndarray, device_states: np.ndarray | None,
                      ref_states: np.ndarray, y_entry: dict) -> dict:
    quant = y_entry["dtype"]
    d = device_y.astype(np.float64)
    r = ref_y.astype(np.float64)
    diff = np.abs(d - r)
    if quant == "float32":
        bad = diff > FLOAT_RTOL * np.maximum(np.abs(r), 1.0)
        lsb = 0
    else:
        bad = diff != 0
        lsb = int(diff.max()) if diff.size else 0
    result = {
        "mismatches": int(bad.sum()),
        "max_abs_lsb": lsb,
        "max_abs": float(np.max(np.abs(dequantize(device_y, y_entry) - dequantize(ref_y, y_entry))))
        if diff.size else 0.0,
        "compared_values": int(diff.size),
        "first_mismatch": None,
    }
    if bad.any():
        s, t, o = (int(v) for v in np.argwhere(bad)[0])
        result["first_mismatch"] = {"sequence": s, "step": t, "output": o,
                                    "device": float(device_y[s, t, o]), "reference": float(ref_y[s, t, o])}
    if device_states is not None:
        state_bad = device_states != ref_states
        if quant == "float32":
            dv = device_states.view(np.float32).astype(np.float64)
            rv = ref_states.view(np.float32).astype(np.float64)
            state_bad = np.abs(dv - rv) > FLOAT_RTOL * np.maximum(np.abs(rv), 1.0)
        result["state_mismatches"] = int(state_bad.sum())
        result["first_state_mismatch_step"] = (int(np.argwhere(state_bad)[0][1]) if state_bad.any() else None)
    return result


def float_metrics(device: np.ndarray, keras: np.ndarray) -> dict:
    d = np.asarray(device, np.float64).ravel()
    k = np.asarray(keras, np.float64).ravel()
    err = d - k
    norm_k = float(np.linalg.norm(k))
    norm_d = float(np.linalg.norm(d))
    return {
        "rmse": float(np.sqrt(np.mean(err ** 2))),
        "mae": float(np.mean(np.abs(err))),
        "max_abs": float(np.max(np.abs(err))),
        "l2r": float(np.linalg.norm(err) / norm_k) if norm_k else math.inf,
        "cos": float(np.dot(d, k) / (norm_d * norm_k)) if norm_d and norm_k else 0.0,
    }


def keras_outputs(manifest: dict, sequences: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    """The float Keras model's output on the test sequences, or None and the reason it is missing."""
    path = manifest.get("model_file")
    if not path:
        return None, "the build folder does not record the model file"
    if not Path(path).exists():
        return None, f"the model file {path} is not there any more"
    try:
        from edgernn.loading import file_sha256, load_model
    except ImportError as exc:
        return None, f"the Keras loader is not available ({exc})"
    if manifest.get("model_sha256") and file_sha256(path) != manifest["model_sha256"]:
        return None, f"{path} changed since the build (SHA-256 differs)"
    try:
        loaded = load_model(path)
        from edgernn.conversion import keras_reference
    except Exception as exc:  # noqa: BLE001 - the float comparison is extra; never hide why it is absent
        return None, f"loading {path} failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    out = keras_reference(loaded.model, sequences)
    if out is None:
        return None, "the Keras model takes a fixed sequence length other than the test data's"
    return out, None


def firmware_model_sha256(out_dir: Path, manifest: dict) -> str:
    """The hash the firmware carries: that of step.tflite, which the C was generated from."""
    import hashlib

    step = out_dir / manifest.get("files", {}).get("step", "step.tflite")
    if step.is_file():
        return hashlib.sha256(step.read_bytes()).hexdigest()
    return str(manifest["model_sha256"])


def _check_device(info, manifest: dict, url: str, want: str) -> None:
    if info.model_sha256.lower() != str(want).lower():
        raise LinkError(f"device on {url} carries another model (SHA-256 {info.model_sha256[:12]}…) than "
                        f"this build folder ({str(want)[:12]}…): flash this folder's firmware first")
    x, y = manifest["inputs"][0], manifest["outputs"][0]
    state_bytes = sum(_size(s) * np.dtype(_DTYPES[s["dtype"]]).itemsize for s in manifest["states"])
    layout = (info.input_size, info.output_size, info.state_bytes, info.input_dtype.itemsize,
              info.output_dtype.itemsize)
    expected = (_size(x), _size(y), state_bytes, np.dtype(_DTYPES[x["dtype"]]).itemsize,
                np.dtype(_DTYPES[y["dtype"]]).itemsize)
    if layout != expected:
        raise LinkError(f"device on {url} has layout (inputs, outputs, state bytes, in/out element bytes) "
                        f"{layout}, this build folder {expected}")


def validate(out_dir: str | os.PathLike, port: str | None = None, baud: int | None = None,
             data: Any = None, steps: int | None = None, sequences: int = 1,
             json_path: str | os.PathLike | None = None, html_path: str | os.PathLike | None = None,
             states: str = "every", timeout: float = 5.0, show: bool = True, console=None,
             reference: Callable[[np.ndarray], ReferenceRun] | None = None, seed: int = 0) -> dict:
    """Validate the firmware of ``out_dir`` on its board; returns the report (``report["pass"]``).

    ``port``: a pyserial URL; without one an emulated board is started and stopped here.
    ``data``: .npy path or array (sequences, steps, features) in the model's input units; else
    ``steps`` x ``sequences`` synthetic steps. ``reference`` replaces the interpreter (tests only).
    """
    from edgernn import devices
    from edgernn.link import LinkClient

    out = Path(out_dir)
    manifest = read_build_folder(out)
    board = _manifest_board(manifest.get("board"))
    if port is None and board is not None and not board.emulated:
        raise EdgeRNNError(f"board {board.name} is hardware: flash it (`edgernn flash {out}`), then pass its "
                           "serial port, e.g. `--port /dev/ttyUSB0`")
    test = load_test_data(data, manifest, steps, sequences, seed)
    x_entry, y_entry = manifest["inputs"][0], manifest["outputs"][0]
    xq = quantize(test, x_entry)
    n_seq, n_steps = xq.shape[:2]

    console = _console(console, show)
    if reference is None:
        reference = interpreter_reference(out, manifest)
    ref = reference(xq)

    device = None
    board_name = manifest.get("board")
    code_bytes = manifest.get("code_bytes")
    try:
        if port is None:
            device = devices.flash(out)
            port = device.url
            board_name = device.board.name
            code_bytes = _code_bytes(device) or code_bytes
        serial_baud = baud or (device.board if device else board or {}).get("serial", {}).get("baud", 115200)
        link = LinkClient.open(port, baud=serial_baud, timeout=timeout)
        try:
            info = link.hello()
            _check_device(info, manifest, port, firmware_model_sha256(out, manifest))
            board_name = board_name or info.board
            started = time.monotonic()
            runs = _stream(link, xq, states, console)
            elapsed = time.monotonic() - started
            if device is not None:
                try:
                    link.bye()
                except LinkError:
                    # An emulator may close its pty as the firmware exits, before the answer is read:
                    # the steps are all in by now, and the board is stopped below either way.
                    pass
        finally:
            link.close()
    finally:
        if device is not None:
            device.stop()

    device_y = np.stack([r.outputs for r in runs]).astype(ref.y.dtype)
    device_states = np.stack([r.states for r in runs]) if states == "every" else None
    cycles = np.concatenate([r.cycles for r in runs]).astype(np.float64)
    reference_cmp = compare_reference(device_y, ref.y, device_states, ref.states, y_entry)

    device_float = dequantize(device_y, y_entry)
    float_cmp, float_note, keras_y = _float_comparison(manifest, test, device_y, device_float, reference)
    parity = reference_cmp["mismatches"] == 0 and reference_cmp.get("state_mismatches", 0) == 0
    report = {
        "pass": bool(parity),
        "board": board_name,
        "quant": manifest["quant"],
        "model_sha256": manifest["model_sha256"],
        "steps": int(n_steps),
        "sequences": int(n_seq),
        "reference": reference_cmp,
        "float": float_cmp,
        "device": {
            "cycles_per_step": float(cycles.mean()) if cycles.size else 0.0,
            "cycles_per_step_median": float(np.median(cycles)) if cycles.size else 0.0,
            "cycles_per_step_max": float(cycles.max()) if cycles.size else 0.0,
            "cycle_counter": _cycle_counter(board_name),
            "macs_per_step": manifest.get("macs_per_step"),
            "arena_bytes": manifest.get("arena_bytes"),
            "weight_bytes": manifest.get("weight_bytes"),
            "code_bytes": code_bytes,
        },
        "link": {
            "port": port,
            "frames": int(sum(r.frames for r in runs)),
            "retries": int(sum(r.retries for r in runs)),
            "payload_bytes": int(link.payload_bytes),
            "seconds": round(elapsed, 3),
            "steps_per_second": round(n_seq * n_steps / elapsed, 1) if elapsed else None,
            "protocol_version": info.protocol_version,
        },
        "notes": [n for n in [float_note] if n],
    }
    report["device"].update(info.describe_target())
    macs = manifest.get("macs_per_step")
    if macs:
        report["device"]["cycles_per_mac"] = report["device"]["cycles_per_step"] / macs
        if report["device"]["cycles_per_step"]:
            report["device"]["macs_per_cycle"] = macs / report["device"]["cycles_per_step"]

    from edgernn import report as report_writer

    json_path = Path(json_path) if json_path else out / "report.json"
    html_path = Path(html_path) if html_path else json_path.with_suffix(".html")
    report_writer.write_json(report, json_path)
    report_writer.write_html(report, html_path, device_float=device_float,
                             reference_float=dequantize(ref.y, y_entry), keras=keras_y,
                             every_step=manifest.get("sequence_output", "every_step") == "every_step")
    report["files"] = {"json": str(json_path), "html": str(html_path)}
    if console is not None:
        _print_summary(console, report)
    return report


def exit_code(report: dict) -> int:
    return 0 if report.get("pass") else 1


def _stream(link, xq: np.ndarray, states: str, console) -> list:
    total = xq.shape[0] * xq.shape[1]
    if console is None:
        return [link.run(seq, states=states) for seq in xq]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("validating"), BarColumn(), MofNCompleteColumn(), TextColumn("steps"),
                  TimeRemainingColumn(), console=console, transient=True) as bar:
        task = bar.add_task("steps", total=total)
        return [link.run(seq, states=states, progress=lambda n: bar.advance(task, n)) for seq in xq]


def _float_comparison(manifest, test, device_y, device_float, reference):
    empty = {"rmse": None, "mae": None, "max_abs": None, "l2r": None, "cos": None}
    keras_y, note = keras_outputs(manifest, test)
    if keras_y is None:
        return {**empty, "skipped": note}, f"float comparison skipped: {note}", None
    if manifest.get("sequence_output", "every_step") == "every_step":
        mine = device_float.reshape(keras_y.shape)
    else:
        runner = getattr(reference, "runner", None)
        mine = (runner.run_head(device_y[:, -1, :]) if runner is not None and runner.head is not None
                else device_float[:, -1, :]).reshape(keras_y.shape)
    return float_metrics(mine, keras_y), None, keras_y


def _code_bytes(device) -> int | None:
    if device.elf is None:
        return None
    from edgernn.devices import elf_sizes

    sizes = elf_sizes(device.elf, device.board)
    return sizes[0] if sizes else None


def _manifest_board(board_name: str | None):
    """The build folder's board, or None when it names none or one this edgernn does not know."""
    if not board_name:
        return None
    try:
        from edgernn.boards import load_board

        return load_board(board_name)
    except EdgeRNNError:
        return None


def _cycle_counter(board_name: str | None) -> str | None:
    if not board_name:
        return None
    try:
        from edgernn.boards import load_board

        return load_board(board_name)["cpu"].get("cycle_counter")
    except EdgeRNNError:
        return None


def _console(console, show: bool):
    if console is not None or not show:
        return console
    from rich.console import Console

    return Console(stderr=True)


def _print_summary(console, report: dict) -> None:
    from rich.table import Table

    ref, flt, dev = report["reference"], report["float"], report["device"]
    table = Table(title=f"edgernn validate — {report['board']} ({report['quant']})", show_header=False)
    table.add_column("what")
    table.add_column("value")
    verdict = "[green]PASS[/green]" if report["pass"] else "[red]FAIL[/red]"
    table.add_row("parity with the interpreter", verdict)
    table.add_row("steps × sequences", f"{report['steps']} × {report['sequences']}")
    table.add_row("output mismatches", f"{ref['mismatches']} of {ref['compared_values']} "
                  f"(max {ref['max_abs_lsb']} LSB, {ref['max_abs']:.3g})")
    if "state_mismatches" in ref:
        table.add_row("state mismatches", str(ref["state_mismatches"]))
    if flt.get("rmse") is not None:
        table.add_row("vs float Keras model", f"rmse {flt['rmse']:.4g}  mae {flt['mae']:.4g}  max {flt['max_abs']:.4g}"
                      f"  l2r {flt['l2r']:.4g}  cos {flt['cos']:.5f}")
    else:
        table.add_row("vs float Keras model", f"skipped: {flt.get('skipped')}")
    table.add_row("cycles per step", f"{dev['cycles_per_step']:.1f} ({dev.get('cycle_counter') or 'board counter'})")
    link = report["link"]
    table.add_row("link", f"{link['frames']} frames, {link['retries']} retries, {link['steps_per_second']} steps/s")
    table.add_row("report", report["files"]["html"])
    console.print(table)
