"""``edgernn validate``: run test sequences on the device and prove its numbers.

The device's outputs and states are compared byte for byte with the TFLite interpreter running
``step.tflite`` on the reference kernels (state fed back step by step), and its dequantized outputs
with the float model on the same sequences. Parity holds when int8/int16 outputs and states match
exactly, or float32 ones within 1e-5 relative.

Everything streams: test inputs are read (or made) a chunk of steps at a time, the device, the
interpreter and the float model each answer that chunk, and only running statistics stay
(``edgernn.validate.compare``), so memory does not grow with the number of steps.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from edgernn.errors import EdgeRNNError, LinkError
from edgernn.link.protocol import INIT_FAILED_STATUS
from edgernn.outdir import Manifest, read_manifest
from edgernn.tflite.oracle import dequantize, quantize
from edgernn.targets.adapter import LinkSettings
from edgernn.targets.board import Serial
from edgernn.validate import compare

FLOAT_RTOL = compare.FLOAT_RTOL
DEFAULT_STEPS = 1000
CHUNK_STEPS = 4096
_DTYPES = {"int8": np.int8, "int16": np.int16, "float32": np.float32}


class ReportNotWritten(EdgeRNNError):
    """The run is over and its verdict printed, but a report file could not be written."""


@dataclass
class ReferenceRun:
    """What the oracle says for a chunk of one sequence's quantized inputs."""

    y: np.ndarray          # (steps, outputs) in the device's output type
    states: np.ndarray     # (steps, state_bytes) uint8: all states after each step


def read_build_folder(out_dir: str | os.PathLike) -> Manifest:
    out = Path(out_dir)
    return read_manifest(out, require=("inputs", "outputs", "states", "model_sha256", "quant"),
                         rebuild_hint=f": create one with `edgernn build MODEL --board BOARD -o {out}`")


def _size(entry: dict) -> int:
    return int(np.prod(entry["shape"]))


def _features(manifest: Manifest) -> int:
    return _size(manifest.inputs[0])


def _step_shape(manifest: Manifest) -> tuple[int, ...]:
    """One step's shape: the input tensor's without its batch axis, (H, W, C) for a model of frames."""
    return tuple(int(d) for d in manifest.inputs[0]["shape"][1:])


def _flat_frames(array: np.ndarray, step: tuple[int, ...]) -> np.ndarray:
    """(sequences, steps, H, W, C) frames as (sequences, steps, H*W*C), the bytes the device reads per step;
    frames of another shape are one line naming both."""
    if len(step) < 2 or array.ndim < 3:
        return array
    frame = tuple(int(d) for d in array.shape[2:])
    if frame != step:
        raise EdgeRNNError(f"test data has frames of shape {frame}; the model takes frames of shape {step} "
                           f"(data shape {tuple(array.shape)})")
    return array.reshape(*array.shape[:2], int(np.prod(step)))


class TestSequences:
    """Test inputs (sequences, steps, features) in the model's units, handed out a chunk at a time (a model of
    frames takes (sequences, steps, H, W, C), flattened per step):
    from a .npy file (memory-mapped), an array, or made up chunk by chunk."""

    def __init__(self, data: Any, manifest: Manifest, steps: int | None, sequences: int = 1, seed: int = 0):
        features = _features(manifest)
        self.manifest, self.seed, self.features = manifest, seed, features
        if steps is not None and steps < 1:
            raise EdgeRNNError(f"--steps must be at least 1, not {steps}")
        if sequences < 1:
            raise EdgeRNNError(f"sequences must be at least 1, not {sequences}")
        self.array = None
        if data is None:
            self.sequences, self.steps = sequences, steps or DEFAULT_STEPS
            self._synthetic_setup()
            return
        if isinstance(data, (str, os.PathLike)):
            from edgernn.tflite.quantize import read_npy

            data = read_npy(data, "test data", mmap=True)
        array = np.asarray(data) if not isinstance(data, np.memmap) else data
        if array.dtype.kind not in "fiu":
            raise EdgeRNNError(f"test data has dtype {array.dtype}; expected float32 numbers")
        if array.ndim == 2 and features == 1 and array.shape[-1] != 1:
            array = array[..., None]
        array = _flat_frames(array, _step_shape(manifest))
        if array.ndim != 3 or array.shape[2] != features or array.shape[0] < 1 or array.shape[1] < 1:
            raise EdgeRNNError(f"test data of shape {tuple(array.shape)} does not fit the model: expected "
                               f"(sequences, steps, {features}) in the model's input units")
        self.array = array
        self.sequences = int(array.shape[0])
        self.steps = int(array.shape[1]) if not steps else min(int(steps), int(array.shape[1]))

    def _synthetic_setup(self) -> None:
        entry = self.manifest.inputs[0]
        lo, hi = -1.0, 1.0
        if entry["dtype"] != "float32":
            info = np.iinfo(_DTYPES[entry["dtype"]])
            lo = (info.min - entry["zero_point"]) * entry["scale"]
            hi = (info.max - entry["zero_point"]) * entry["scale"]
        self._mid, self._half = (lo + hi) / 2, 0.8 * (hi - lo) / 2
        rng = np.random.default_rng(self.seed)
        self._freq = rng.uniform(0.005, 0.08, (self.sequences, self.features))
        self._phase = rng.uniform(0, 2 * np.pi, (self.sequences, self.features))

    def chunks(self, seq: int, size: int = CHUNK_STEPS) -> Iterator[np.ndarray]:
        for start in range(0, self.steps, size):
            yield self.chunk(seq, start, min(size, self.steps - start))

    def chunk(self, seq: int, start: int, n: int) -> np.ndarray:
        if self.array is not None:
            part = np.asarray(self.array[seq, start:start + n], dtype=np.float32)
            if not np.all(np.isfinite(part)):
                raise EdgeRNNError(f"test data holds NaN or infinite values (sequence {seq}, from step {start})")
            return part
        # Smooth random signals spanning most of the input's quantized range (or [-1, 1] for float),
        # the noise of each chunk drawn from its own generator so any chunk can be made alone.
        t = np.arange(start, start + n)[:, None]
        noise = np.random.default_rng([self.seed, seq, start]).normal(0, 0.15, (n, self.features))
        wave = np.sin(2 * np.pi * self._freq[seq] * t + self._phase[seq]) * 0.85 + noise
        return (self._mid + self._half * np.clip(wave, -1, 1)).astype(np.float32)

    def sequence(self, seq: int) -> np.ndarray:
        return np.concatenate(list(self.chunks(seq))) if self.steps else np.zeros((0, self.features), np.float32)


def load_test_data(data: Any, manifest: Manifest, steps: int | None, sequences: int = 1, seed: int = 0) -> np.ndarray:
    """All test sequences at once (sequences, steps, features) float32; validate itself streams them."""
    test = TestSequences(data, manifest, steps, sequences, seed)
    return np.stack([test.sequence(s) for s in range(test.sequences)])


def synthetic_sequences(manifest: Manifest, steps: int, sequences: int = 1, seed: int = 0) -> np.ndarray:
    return load_test_data(None, manifest, steps, sequences, seed)


class InterpreterReference:
    """The TFLite interpreter on step.tflite (``Stepper``), one chunk of a sequence at a time."""

    def __init__(self, out_dir: Path, manifest: Manifest):
        from edgernn.tflite.oracle import Stepper

        files = manifest.files or {}
        for key in ("step", "head"):
            name = files.get(key) if key != "head" else (manifest.head or {}).get("file")
            if key == "step" and not name:
                raise EdgeRNNError(f"{out_dir}/manifest.json names no step model (files.step); rebuild {out_dir}")
            if name and not (out_dir / name).is_file():
                raise EdgeRNNError(f"{out_dir / name} is missing: rebuild {out_dir} with edgernn build")
        try:
            self.stepper = Stepper.of_folder(out_dir, manifest)
        except EdgeRNNError:
            raise
        except Exception as exc:  # the interpreter refuses a damaged flatbuffer with assorted errors
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EdgeRNNError(f"the step model in {out_dir} is damaged ({first}): rebuild it with edgernn build") from None
        self.manifest = manifest
        self.y_dtype = _DTYPES[manifest.outputs[0]["dtype"]]
        self.state_entries = manifest.states

    def start(self) -> None:
        self.stepper.reset()

    def advance(self, xq: np.ndarray) -> ReferenceRun:
        ys, now = self.stepper.advance(xq)
        states = [np.ascontiguousarray(now[e["name"]].astype(_DTYPES[e["dtype"]])).view(np.uint8)
                  for e in self.state_entries]
        states = np.concatenate(states, axis=1) if states else np.zeros((len(xq), 0), np.uint8)
        return ReferenceRun(ys.astype(self.y_dtype), states)

    def head(self, y_last: np.ndarray) -> np.ndarray | None:
        return self.stepper.run_head(y_last[None])[0] if self.stepper.head is not None else None


class FloatTwin:
    """The float step model (float_step.tflite, or step.tflite of a float32 build) and its float head,
    stepped beside the device (``Stepper``): the quantization error per step, without TensorFlow."""

    against = "float step model"

    def __init__(self, out_dir: Path, manifest: Manifest):
        from edgernn.tflite.oracle import Stepper

        files = manifest.files or {}
        step = files.get("float_step") or (files.get("step") if manifest.quant == "float32" else None)
        if not step or not (out_dir / step).is_file():
            raise FileNotFoundError(step)
        source = manifest.source or {}
        what = {"onnx": f"the ONNX model {source.get('name')}", "torch": f"the torch module {source.get('name')}"}
        self.against = (f"the float step model ({step}), which matched {what.get(source.get('format'), 'the Keras model')} to "
                        f"{manifest.float_self_check_rel or 0:.1e} (relative) when converted")
        head = files.get("float_head") or ((manifest.head or {}).get("file") if manifest.quant == "float32" else None)
        # a fused model's states live in its variable tensors (indices of step.tflite, not of this model): not read
        states = [] if manifest.mode == "fused" else [s["name"] for s in manifest.states]
        self.stepper = Stepper(out_dir / step, states, head=out_dir / head if head else None)
        self.last = None

    def start(self, seq: int) -> None:
        self.stepper.reset()

    def advance(self, x: np.ndarray) -> np.ndarray:
        ys = self.stepper.advance(np.asarray(x).astype(np.float32))[0].astype(np.float32).reshape(len(x), -1)
        if len(ys):
            self.last = ys[-1]
        return ys

    def final(self) -> np.ndarray:
        if self.stepper.head is None:
            return self.last
        return self.stepper.head(self.last).astype(np.float32)


class KerasWhole:
    """Folders without a float twin: the Keras model over each whole sequence (memory grows with the
    sequence's length here, and the report says so)."""

    def __init__(self, manifest: Manifest, test: "TestSequences"):
        from edgernn.keras.reference import keras_reference
        from edgernn.keras.load import file_sha256
        from edgernn.pytorch.load import load_any

        path = manifest.model_file
        if not path:
            raise LookupError("the build folder does not record the model file")
        if not Path(path).exists():
            raise LookupError(f"the model file {path} is not there any more")
        if manifest.model_sha256 and file_sha256(path) != manifest.model_sha256:
            raise LookupError(f"{path} changed since the build (SHA-256 differs)")
        try:
            loaded = load_any(path)
        except Exception as exc:  # noqa: BLE001 - the float comparison is extra; never hide why it is absent
            raise LookupError(f"loading {path} failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        if loaded.source is not None:   # an ONNX file: the file itself is the reference, not its Keras twin
            self.model = None
            self.reference = lambda _model, sequences: loaded.source.reference(sequences)
        else:
            self.model = loaded.model
            self.reference = keras_reference
        self.test = test
        self.every_step = (manifest.sequence_output or "every_step") == "every_step"
        kind = "ONNX model" if loaded.source is not None else "Keras model"
        self.against = f"the {kind} {Path(path).name}, run over whole sequences"
        self.out = None
        self.at = 0

    def start(self, seq: int) -> None:
        out = self.reference(self.model, self.test.sequence(seq)[None])
        if out is None:
            raise LookupError("the model takes a fixed sequence length other than the test data's")
        self.out = np.asarray(out, np.float32)[0]
        self.at = 0

    def advance(self, x: np.ndarray) -> np.ndarray | None:
        if not self.every_step:
            return None
        part = self.out.reshape(self.test.steps, -1)[self.at:self.at + len(x)]
        self.at += len(x)
        return part

    def final(self) -> np.ndarray:
        return self.out.reshape(-1)


def _float_source(out: Path, manifest: Manifest, test: TestSequences):
    """The float model to compare with, or (None, why not)."""
    try:
        return FloatTwin(out, manifest), None
    except FileNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 - a damaged twin: fall back, and say so
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, f"the float step model is damaged ({first})"
    try:
        return KerasWhole(manifest, test), None
    except LookupError as exc:
        return None, str(exc)
    except ImportError as exc:
        return None, f"the Keras loader is not available ({exc})"


def firmware_model_sha256(out_dir: Path, manifest: Manifest) -> str:
    """The hash the firmware carries: that of step.tflite, which the C was generated from."""
    import hashlib

    step = out_dir / (manifest.files or {}).get("step", "step.tflite")
    if step.is_file():
        return hashlib.sha256(step.read_bytes()).hexdigest()
    return str(manifest.model_sha256)


def _check_device(info, manifest: Manifest, url: str, want: str) -> None:
    if info.model_sha256.lower() != str(want).lower():
        raise LinkError(f"device on {url} carries another model (SHA-256 {info.model_sha256[:12]}…) than "
                        f"this build folder ({str(want)[:12]}…): flash this folder's firmware first")
    x, y = manifest.inputs[0], manifest.outputs[0]
    state_bytes = sum(_size(s) * np.dtype(_DTYPES[s["dtype"]]).itemsize for s in manifest.states)
    layout = (info.input_size, info.output_size, info.state_bytes, info.input_dtype.itemsize,
              info.output_dtype.itemsize)
    expected = (_size(x), _size(y), state_bytes, np.dtype(_DTYPES[x["dtype"]]).itemsize,
                np.dtype(_DTYPES[y["dtype"]]).itemsize)
    if layout != expected:
        raise LinkError(f"device on {url} has layout (inputs, outputs, state bytes, in/out element bytes) "
                        f"{layout}, this build folder {expected}")


def _check_writable(path: Path, what: str, may_replace) -> None:
    """Refuse now, before the run, an output file that cannot be written or is somebody else's."""
    parent = path.parent
    if not parent.is_dir():
        raise EdgeRNNError(f"cannot write {what} {path}: the folder {parent} does not exist")
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise EdgeRNNError(f"cannot write {what} {path}: it is a folder")
        if not may_replace(path):
            raise EdgeRNNError(f"{path} exists and edgernn did not write it; choose another path for {what}")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        from edgernn.outdir import os_error_message

        raise EdgeRNNError(os_error_message(exc, f"write {what} into {parent}", show_file=False)
                           + (" (pass --json PATH to write the report elsewhere)" if what == "the report" else "")) from None


def _is_edgernn_report(path: Path) -> bool:
    try:
        if path.suffix == ".html":
            return path.read_text(errors="replace")[:400].startswith("<!DOCTYPE html>") and \
                "edgernn validate" in path.read_text(errors="replace")[:400]
        data = json.loads(path.read_text())
        return isinstance(data, dict) and {"pass", "model_sha256", "reference"} <= set(data)
    except (OSError, ValueError):
        return False


def validate(out_dir: str | os.PathLike, port: str | None = None, baud: int | None = None,
             data: Any = None, steps: int | None = None, sequences: int = 1,
             json_path: str | os.PathLike | None = None, html_path: str | os.PathLike | None = None,
             states: str = "every", timeout: float | None = None, view=None,
             reference=None, seed: int = 0, save: str | os.PathLike | None = None,
             chunk_steps: int = CHUNK_STEPS, profile: bool = False) -> dict:
    """Validate the firmware of ``out_dir`` on its board; returns the report (``report["pass"]``).

    ``port``: a pyserial URL; without one an emulated board is started and stopped here.
    ``data``: .npy path or array (sequences, steps, features), or (sequences, steps, H, W, C) for a model of
    frames, in the model's input units; else
    ``steps`` x ``sequences`` synthetic steps. ``save``: write the device's outputs to this .npz.
    ``reference`` replaces the interpreter (tests only): an object with ``start()`` and
    ``advance(xq_chunk) -> ReferenceRun``. ``profile``: also run a few steps of the first sequence with the
    board's instructions traced, and say where one step's cycles go, op by op and core by core (report
    ``profile``; a board that cannot trace is refused before the run). ``view`` shows the run (the command line's is
    ``edgernn.cli.render.ValidationView``): ``progress(total)`` is a context giving ``advance(n)`` or
    None, ``summary(report)`` shows the verdict. Without one, nothing is printed.

    The steps: read the build folder and its board, check the outputs can be written, set up the
    references, run the sequences on the device (started here when no port is given), tally, report.
    """
    out = Path(out_dir)
    manifest = read_build_folder(out)
    board = _manifest_board(manifest.board)
    if manifest.app:
        from edgernn.validate.app import validate_app

        if profile or save is not None or states != "every":
            raise EdgeRNNError(f"{out} holds a camera application: --profile and --save are for the validation "
                               "server's builds")
        return validate_app(out, manifest, board, port=port, data=data, steps=steps, json_path=json_path,
                            html_path=html_path, timeout=timeout, view=view)
    if port is None and board is not None and not board.emulated:
        raise EdgeRNNError(f"board {board.name} is hardware: flash it (`edgernn flash {out}`), then pass its "
                           "serial port, e.g. `--port /dev/ttyUSB0`")
    test = TestSequences(data, manifest, steps, sequences, seed)
    profiler = _profiler(out, board) if profile else None
    files = _ReportFiles.checked(out, json_path, html_path, save)
    if reference is None:
        reference = InterpreterReference(out, manifest)
    floats = _FloatSide(*_float_source(out, manifest, test))
    tally = _Tally(manifest, test, seed)
    run = _run_on_device(out, manifest, board, port, test, reference, floats, tally, files, view,
                         baud=baud, timeout=timeout, states=states, chunk_steps=chunk_steps)
    report = _report(manifest, test, tally, floats, run, files)
    if profiler is not None:
        try:
            report["profile"] = _profile(out, manifest, profiler, test, view)
        except EdgeRNNError as exc:
            # the verdict stands without the profile: say why it is missing rather than lose the run
            report["notes"].append(f"--profile: no profile, {exc}")
    # The verdict first: a report that cannot be written must not lose it.
    if view is not None:
        view.summary(report)
    _write_outputs(report, files.folder, files.default, files.json, files.html, tally.saver, tally.plot,
                   tally.every_step)
    return report


@dataclass
class _ReportFiles:
    """Where the report (and the device's outputs, with ``save``) go, checked before the run."""

    folder: Any
    default: bool
    json: Path
    html: Path
    save: Path | None

    @classmethod
    def checked(cls, out: Path, json_path, html_path, save) -> "_ReportFiles":
        from edgernn.outdir import BuildFolder

        folder = BuildFolder(out)
        default = json_path is None
        json_path = Path(json_path) if json_path else out / "report.json"
        html_path = Path(html_path) if html_path else json_path.with_suffix(".html")
        for path in (json_path, html_path):
            inside = default and path.parent == out
            _check_writable(path, "the report", (lambda p: folder.may_write(p.name) or _is_edgernn_report(p))
                            if inside else _is_edgernn_report)
        if save is not None:
            save = Path(save)
            if save.suffix != ".npz":
                raise EdgeRNNError(f"--save {save}: the device outputs are written as a .npz; name the file *.npz")
            _check_writable(save, "the device outputs", compare.is_edgernn_save)
        return cls(folder, default, json_path, html_path, save)


@dataclass
class _FloatSide:
    """The float model compared with, or why there is none (it may drop out at a sequence's start)."""

    source: Any
    note: str | None

    def start(self, seq: int) -> None:
        if self.source is None:
            return
        try:
            self.source.start(seq)
        except LookupError as why:
            self.source, self.note = None, str(why)


class _Tally:
    """The running statistics of a run: reference parity, float error, drift, cycles, the plot, the
    inputs' range, and (with ``save``) the device's outputs."""

    def __init__(self, manifest: Manifest, test: TestSequences, seed: int):
        self.x_entry, self.y_entry = manifest.inputs[0], manifest.outputs[0]
        self.every_step = (manifest.sequence_output or "every_step") == "every_step"
        windows = compare.drift_windows(test.steps)
        self.reference = compare.ReferenceStats(self.y_entry, windows)
        self.float_sums = compare.ErrorSums()
        self.drift = compare.DriftTable(windows)
        self.cycles = compare.CycleStats(seed)
        self.team_cycles = compare.CycleStats(seed)   # the team's own count, from a device that has one
        self.y_size = _size(self.y_entry)
        self.plot = compare.PlotBins(test.steps, min(self.y_size, 3))
        self.inputs = _InputRange(self.x_entry, manifest.calibration or {})
        self.saver = None
        self.frames = self.retries = 0

    def open_save(self, save: Path | None, test: TestSequences) -> None:
        if save is not None:
            self.saver = compare.DeviceSave(save, test.sequences, test.steps, self.y_size, _DTYPES[self.y_entry["dtype"]])

    def add(self, seq: int, offset: int, x: np.ndarray, ref: ReferenceRun, part, floats: _FloatSide,
            states: str) -> np.ndarray:
        """One streamed chunk: the device's answer against the reference and the float model."""
        device_y = part.outputs.astype(ref.y.dtype).reshape(len(x), -1)
        self.reference.update(seq, offset, device_y, ref.y, part.states if states == "every" else None, ref.states)
        device_float = dequantize(device_y, self.y_entry)
        want = floats.source.advance(x) if floats.source is not None else None
        if want is not None:
            self.drift.update(offset, device_float, want)
            if self.every_step:
                self.float_sums.update(device_float, want)
        self.plot.update(seq, offset, device_float, dequantize(ref.y, self.y_entry), want)
        self.cycles.update(part.cycles)
        if getattr(part, "team_cycles", None) is not None:
            self.team_cycles.update(part.team_cycles)
        if self.saver is not None:
            self.saver.append(device_y, device_float, part.cycles)
        self.frames += part.frames
        self.retries += part.retries
        return device_y


def link_transport(url: str, emulated: bool) -> str:
    """What carried the protocol, for people: the port's kind, and for an emulated board what stands in."""
    if url.startswith("cpx://"):
        return ("CPX over TCP through the simulated ESP32 (edgernn's model of the deck's, in GVSOC)" if emulated
                else "CPX over TCP through the AI-deck's ESP32 (WiFi)")
    if url.startswith("socket://"):
        return "TCP to the simulated UART" if emulated else "TCP (a serial port behind a socket)"
    return "the emulator's UART (a pseudo-terminal)" if emulated else "serial port"


@dataclass
class _Run:
    """What the device run leaves beside the tally."""

    board_name: str | None
    code_bytes: int | None
    port: str
    info: Any
    payload_bytes: int
    seconds: float
    emulated: bool = False          # the device is a simulator edgernn started


def _run_on_device(out: Path, manifest: Manifest, board, port: str | None, test: TestSequences, reference,
                   floats: _FloatSide, tally: _Tally, files: _ReportFiles, view, *, baud, timeout, states,
                   chunk_steps) -> _Run:
    """Open the link (starting the board first when no port is given), stream every sequence, and stop
    what was started; a fault discards the device outputs being saved."""
    from edgernn.link import LinkClient
    from edgernn.targets.device import adapter_for, flash

    device = None
    board_name = manifest.board
    code_bytes = manifest.code_bytes
    try:
        if port is None:
            device = flash(out)
            port = device.url
            board_name = device.board.name
        the_board = device.board if device else board
        adapter = adapter_for(the_board) if the_board is not None else None
        if device is not None:
            code_bytes = adapter.code_bytes(device.elf) or code_bytes
        if adapter is not None:
            settings = adapter.link_settings(started=device is not None, baud=baud, timeout=timeout)
        else:
            settings = LinkSettings(baud or Serial().baud, timeout or Serial().timeout_s)
        try:
            link = LinkClient.open(port, baud=settings.baud, timeout=settings.timeout_s,
                                   device_gone=_gone_check(device) if device is not None else None)
        except LinkError as exc:
            # a board edgernn started that ended before its port could be opened (an init that failed
            # at once): its status says more than the refused connection
            gone = _gone_check(device)() if device is not None else None
            if gone:
                raise LinkError(f"{exc}; {gone}") from None
            raise
        try:
            if settings.ready_timeout_s is not None:
                link.wait_ready(settings.ready_timeout_s)
            info = link.hello()
            _check_device(info, manifest, port, firmware_model_sha256(out, manifest))
            board_name = board_name or info.board
            tally.open_save(files.save, test)
            started = time.monotonic()
            with (view.progress(test.sequences * test.steps) if view else contextlib.nullcontext()) as advance:
                for s in range(test.sequences):
                    _stream_sequence(link, s, test, reference, floats, tally, states, chunk_steps, advance)
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
    except BaseException:
        if tally.saver is not None:
            tally.saver.discard()
        raise
    finally:
        if device is not None:
            device.stop()
    return _Run(board_name, code_bytes, port, info, int(link.payload_bytes), elapsed, device is not None)


def _stream_sequence(link, s: int, test: TestSequences, reference, floats: _FloatSide, tally: _Tally,
                     states: str, chunk_steps: int, advance) -> None:
    """One sequence through the device, chunk by chunk, each chunk also through the references."""
    reference.start()
    floats.start(s)
    x_entry = tally.x_entry
    pending: list[tuple[int, np.ndarray, np.ndarray]] = []

    def inputs_of_sequence():
        offset = 0
        for x in test.chunks(s, chunk_steps):
            tally.inputs.update(x)
            xq = quantize(x, x_entry)
            pending.append((offset, x, xq))
            offset += len(x)
            yield xq

    last_y = None
    for part in link.stream(inputs_of_sequence(), test.steps, states=states, progress=advance):
        offset, x, xq = pending.pop(0)
        device_y = tally.add(s, offset, x, reference.advance(xq), part, floats, states)
        if len(device_y):
            last_y = device_y[-1]
    if floats.source is not None and not tally.every_step and last_y is not None:
        mine = _final_output(reference, last_y, tally.y_entry)
        tally.float_sums.update(mine, floats.source.final())


def _report(manifest: Manifest, test: TestSequences, tally: _Tally, floats: _FloatSide, run: _Run,
            files: _ReportFiles) -> dict:
    """report.json's content (docs/report.md)."""
    reference_cmp = tally.reference.result()
    parity = reference_cmp["mismatches"] == 0 and reference_cmp.get("state_mismatches", 0) == 0
    float_cmp = tally.float_sums.result()
    if floats.source is None:
        float_cmp["skipped"] = floats.note
    else:
        float_cmp["against"] = floats.source.against
    notes = [f"float comparison skipped: {floats.note}"] if floats.source is None else []
    input_report, input_note = tally.inputs.result()
    if input_note:
        notes.append(input_note)
    n_seq, n_steps, elapsed = test.sequences, test.steps, run.seconds
    report = {
        "pass": bool(parity),
        "board": run.board_name,
        "quant": manifest.quant,
        "model_sha256": manifest.model_sha256,
        "steps": int(n_steps),
        "sequences": int(n_seq),
        "reference": reference_cmp,
        "float": float_cmp,
        "drift": tally.drift.rows(tally.reference.window_mismatches),
        "inputs": input_report,
        "device": {
            **tally.cycles.result(),
            "cycle_counter": _cycle_counter(run.board_name),
            "count_unit": _cycle_counter(run.board_name, "count_unit") or "cycles",
            "macs_per_step": manifest.macs_per_step,
            "arena_bytes": manifest.arena_bytes,
            "weight_bytes": manifest.weight_bytes,
            "code_bytes": run.code_bytes,
            # what each step reads from the board's stream memory (weights beyond L2 on GAP8; 0: none)
            "l3_bytes_per_step": int(((manifest.placement or {}).get("streaming") or {})
                                     .get("l3_bytes_per_step", 0)),
        },
        "link": {
            "port": run.port,
            "transport": link_transport(run.port, run.emulated),
            "firmware_link": manifest.link or "uart",
            "frames": int(tally.frames),
            "retries": int(tally.retries),
            "payload_bytes": run.payload_bytes,
            "seconds": round(elapsed, 3),
            "steps_per_second": round(n_seq * n_steps / elapsed, 1) if elapsed else None,
            "protocol_version": run.info.protocol_version,
            # the largest raw frames the device's HELLO announced: its STEP requests', its answers'
            "device_frames": {"receives": run.info.max_frame, "sends": run.info.answer_limit},
        },
        "notes": notes,
    }
    plan = precision_summary(manifest.precision)
    if plan is not None:
        # --quant auto: the precision plan beside the error this run reached (docs/report.md)
        report["precision"] = {**plan, "l2r_reached": float_cmp.get("l2r")}
    budget = (manifest.precision or {}).get("max_error")
    if budget is not None and float_cmp.get("l2r") is not None:
        # the budget --quant auto was held to, over the horizon it was judged on: a run longer than that horizon
        # that misses it is still a PASS for parity, and says so
        horizon = (manifest.calibration or {}).get("horizon")
        report["error_budget"] = {"max_error": budget, "l2r": float_cmp["l2r"], "met": float_cmp["l2r"] <= budget,
                                  "horizon": horizon, "beyond_horizon": bool(horizon) and n_steps > horizon}
    report["device"].update(run.info.describe_target())
    if tally.team_cycles.n:
        # the cluster's work alone, without the dispatch and wake-up that cycles_per_step includes
        team = tally.team_cycles.result()
        report["device"].update({"cluster_cycles_per_step": team["cycles_per_step"],
                                 "cluster_cycles_per_step_median": team["cycles_per_step_median"],
                                 "cluster_cycle_counter": _cycle_counter(run.board_name, "team_cycle_counter")})
    macs = manifest.macs_per_step
    if macs:
        report["device"]["cycles_per_mac"] = report["device"]["cycles_per_step"] / macs
        if report["device"]["cycles_per_step"]:
            report["device"]["macs_per_cycle"] = macs / report["device"]["cycles_per_step"]
    report["device"].update(_speed(report["device"]["cycles_per_step"], _manifest_board(run.board_name)))
    report.update(_what_ran(manifest))
    report["memory"] = memory_use(manifest, _manifest_board(run.board_name), run.code_bytes, run.info)
    report["files"] = {"json": str(files.json), "html": str(files.html),
                       **({"save": str(files.save)} if files.save else {})}
    return report


def _write_outputs(report, folder, default_report, json_path, html_path, saver, plot, every_step) -> None:
    from edgernn.validate import report as report_writer
    from edgernn.outdir import os_error_message

    target = json_path
    try:
        report_writer.write_json(report, json_path)
        target = html_path
        report_writer.write_html(report, html_path, plot=plot, every_step=every_step)
        if default_report:
            folder.record(json_path.name, html_path.name)
        if saver is not None:
            target = Path(report["files"]["save"])
            saver.finish()
    except OSError as exc:
        if saver is not None:
            saver.discard()
        err = ReportNotWritten(os_error_message(exc, f"write {target}", show_file=False)
                               + f" (the verdict above stands: {'PASS' if report['pass'] else 'FAIL'})")
        err.exit_code = 2 if report["pass"] else 1
        raise err from None


def _final_output(reference, last_y: np.ndarray, y_entry: dict) -> np.ndarray:
    head = getattr(reference, "head", None)
    out = head(last_y) if head is not None else None
    return out if out is not None else dequantize(last_y, y_entry)


class _InputRange:
    """Where the test inputs lie against the range the model was calibrated on (and can represent)."""

    def __init__(self, x_entry: dict, calibration: dict):
        self.entry = x_entry
        self.cal_min, self.cal_max = calibration.get("x_min"), calibration.get("x_max")
        self.min, self.max = math.inf, -math.inf
        self.clipped = self.count = self.outside = 0
        self.lo = self.hi = None
        if x_entry["dtype"] != "float32":
            info = np.iinfo(_DTYPES[x_entry["dtype"]])
            self.lo = (info.min - x_entry["zero_point"] - 0.5) * x_entry["scale"]
            self.hi = (info.max - x_entry["zero_point"] + 0.5) * x_entry["scale"]

    def update(self, x: np.ndarray) -> None:
        if not x.size:
            return
        self.min, self.max = min(self.min, float(x.min())), max(self.max, float(x.max()))
        self.count += x.size
        if self.lo is not None:
            self.clipped += int(np.count_nonzero((x < self.lo) | (x > self.hi)))
        if self.cal_min is not None and self.cal_max is not None:
            span = max(self.cal_max - self.cal_min, 1e-12)
            self.outside += int(np.count_nonzero((x < self.cal_min - 0.5 * span) | (x > self.cal_max + 0.5 * span)))

    def result(self) -> tuple[dict, str | None]:
        found = {"min": self.min if self.count else None, "max": self.max if self.count else None,
                 "calibrated_min": self.cal_min, "calibrated_max": self.cal_max,
                 "representable": [self.lo, self.hi] if self.lo is not None else None,
                 "clipped_values": self.clipped, "far_outside_calibration": self.outside, "values": self.count}
        note = None
        if self.clipped:
            note = (f"{self.clipped} of {self.count} test input values lie outside the input's quantized range "
                    f"[{self.lo:.4g}, {self.hi:.4g}] and are clipped (test inputs span [{self.min:.4g}, {self.max:.4g}]): "
                    "the device and the interpreter agree on them, but the error against the float model is then large")
        elif self.outside:
            note = (f"{self.outside} of {self.count} test input values lie far outside the calibrated range "
                    f"[{self.cal_min:.4g}, {self.cal_max:.4g}]: the error against the float model is then large")
        return found, note


def _gone_check(device):
    def gone() -> str | None:
        if device.process is None:
            return None
        code = device.process.poll()
        if code is None:
            return None
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        if code == INIT_FAILED_STATUS:
            how += ", the status of a firmware whose edgernn_init() failed"
        return f"its {device.board.name} firmware process ended ({how})"

    return gone


def exit_code(report: dict) -> int:
    return 0 if report.get("pass") else 1


def _manifest_board(board_name: str | None):
    """The build folder's board, or None when it names none or one this edgernn does not know."""
    if not board_name:
        return None
    try:
        from edgernn.targets.board import load_board

        return load_board(board_name)
    except EdgeRNNError:
        return None


def precision_summary(precision: dict | None) -> dict | None:
    """The manifest's ``--quant auto`` plan in brief: the budget, the error it reached on the calibration
    data against int8's and int16's, how many ops are int16, the dtypes of x, y and the states, and the int16
    ops per layer; None for a model of one quantization."""
    if not precision or not isinstance(precision.get("plan"), list):
        return None
    by_layer: dict[str, int] = {}
    for row in precision["plan"]:
        if row.get("dtype") == "int16":
            layer = (row.get("layer") or "(graph)").split("/")[0]     # the op's top-level layer
            by_layer[layer] = by_layer.get(layer, 0) + 1
    return {"max_error": precision.get("max_error"), "calibration_l2r": precision.get("error"),
            "int8_l2r": precision.get("int8_error"), "int16_l2r": precision.get("int16_error"),
            "met": precision.get("met"), "int16_ops": precision.get("int16_ops"),
            "int8_ops": precision.get("int8_ops"), "quantize_ops": precision.get("quantize_ops"),
            "x": precision.get("x"), "y": precision.get("y"), "states": precision.get("states"),
            "int16_ops_by_layer": by_layer, "weights": weights_summary(precision)}


def weights_summary(precision: dict) -> str:
    """How a --quant auto plan holds its FULLY_CONNECTED weights, in a few words."""
    rounding = (precision.get("weight_rounding") or {}).get("rounding")
    split = precision.get("two_part_weights") or []
    if split:
        return f"{len(split)} FULLY_CONNECTED in two int8 parts"
    if rounding == "compensated":
        return (f"{len(precision['weight_rounding'].get('ops') or [])} FULLY_CONNECTED in error-compensated "
                "rounding")
    return "TF's rounding"


def _speed(cycles: float, board) -> dict:
    """The step's speed at the clock the board's counter counts in (``cpu.clock_hz``; none: unknown)."""
    clock = board.cpu.clock_hz if board is not None and board.cpu.clock_hz else None
    if not clock or not cycles:
        return {"clock_hz": clock, "us_per_step": None, "steps_per_second": None}
    return {"clock_hz": clock, "us_per_step": cycles / clock * 1e6, "steps_per_second": clock / cycles}


def _what_ran(manifest: Manifest) -> dict:
    """The model's name, this edgernn's version and the time the report was made."""
    from datetime import datetime

    from edgernn._version import __version__

    source = manifest.source or {}
    name = source.get("name") or (Path(manifest.model_file).name if manifest.model_file else None)
    return {"model": name, "edgernn_version": __version__,
            "date": datetime.now().astimezone().isoformat(timespec="seconds")}


def memory_use(manifest: Manifest, board, code_bytes: int | None, info=None) -> list[dict]:
    """Each memory of the board: its size, the reserve its budget leaves out, and what is placed there (the
    manifest's placement items); the memory that holds the code also shows the code's bytes and the link's
    frame buffers (the frame being received, the last answer and its encoded copy, from the sizes HELLO
    announced)."""
    if board is None:
        return []
    placement = manifest.placement or {}
    items = placement.get("items") or {}
    budgets = placement.get("budgets") or {}
    code_memory = next((m.name for m in board.memories_typed if "code" in m.holds), None)
    if not items and code_memory:
        # a folder without placement (firmware generated, not built by `edgernn build`): its sizes, in the
        # board's main memory
        sizes = {"weights": manifest.weight_bytes, "state": manifest.state_bytes, "arena": manifest.arena_bytes}
        items = {item: {"memory": code_memory, "bytes": size} for item, size in sizes.items() if size is not None}
    link = None
    if info is not None and getattr(info, "max_frame", 0):
        sends = info.answer_limit
        link = info.max_frame + sends + sends + sends // 254 + 2
    rows = []
    for mem in board.memories_typed:
        placed = {name: int(item["bytes"]) for name, item in items.items() if item.get("memory") == mem.name}
        row = {"memory": mem.name, "size": mem.size, "reserved": mem.reserved,
               "budget": int(budgets.get(mem.name, mem.budget)), "items": placed,
               "placed_bytes": sum(placed.values())}
        if mem.name == code_memory:
            row["code_bytes"], row["link_bytes"] = code_bytes, link
        rows.append(row)
    return rows


PROFILE_STEP = 2       # the step profiled: the third of the first sequence, the first two warm the caches


def _profiler(out: Path, board):
    """The adapter that profiles OUT's board; a board that cannot is refused in one line, before the run."""
    from edgernn.targets.device import adapter_for, out_board

    adapter = adapter_for(board if board is not None else out_board(out))
    if not adapter.profiler:
        adapter.start_profiled(out, PROFILE_STEP)        # says why not
    return adapter


def _profile(out: Path, manifest: Manifest, adapter, test: TestSequences, view) -> dict:
    """One step of the first sequence profiled on the board (docs/report.md, ``profile``): each statement of
    the step's body with its ops, cycles, share, MACs and MAC/cycle, and its work and wait on each core,
    beside the firmware's own count of that step."""
    from edgernn.link import LinkClient
    from edgernn.tflite import model as tfl

    want = PROFILE_STEP + 2
    x = test.chunk(0, 0, min(want, test.steps))
    if len(x) < want:     # a short run: the profile steps on with the last input
        x = np.concatenate([x, np.repeat(x[-1:], want - len(x), axis=0)])
    step = min(PROFILE_STEP, test.steps - 1)
    if view is not None and hasattr(view, "note"):
        view.note(f"profiling step {step + 1} on {adapter.board.name} ({adapter.profiler})")
    settings = adapter.link_settings(started=True)
    traced = adapter.start_profiled(out, step)
    try:
        # a traced simulation runs many times slower than a plain one
        with LinkClient.open(traced.url, baud=settings.baud, timeout=settings.timeout_s * 10) as link:
            if settings.ready_timeout_s is not None:
                link.wait_ready(settings.ready_timeout_s * 10)
            link.hello()
            counted = link.run(quantize(x, manifest.inputs[0]), states="none")
            with contextlib.suppress(LinkError):
                link.bye()
        raw = traced.result()
    finally:
        traced.stop()
    step_file = out / (manifest.files or {}).get("step", "step.tflite")
    macs = tfl.op_macs(tfl.read(step_file.read_bytes())) if step_file.is_file() else []
    whole = int(counted.cycles[step])
    team = int(counted.team_cycles[step]) if counted.team_cycles is not None else None
    rows = [dict(row) for row in raw["statements"]] + outside_rows(raw, team, whole)
    total = sum(row["cycles"] for row in rows)
    ops = []
    for row in rows:
        op_macs = sum(macs[i] for i in row["ops"] if i < len(macs))
        ops.append({"label": row["label"], "ops": row["ops"], "cycles": row["cycles"],
                    "share": row["cycles"] / total if total else 0.0, "macs": op_macs,
                    "macs_per_cycle": op_macs / row["cycles"] if row["cycles"] and op_macs else None,
                    "work": row["work"], "wait": row["wait"], "outside": bool(row.get("outside"))})
    return {"source": raw["source"], "step": raw["step"], "cycles": total, "traced_cycles": raw["cycles"],
            "counted_cycles": team if team is not None else whole, "whole_step_cycles": whole,
            "cores": raw["cores"], "ops": ops,
            "work": [sum(r["work"][k] for r in rows) for k in range(len(raw["cores"]))],
            "wait": [sum(r["wait"][k] for r in rows) for k in range(len(raw["cores"]))]}


TEAM_ROW = "team: call into the body, counter"
FC_ROW = "fabric controller: dispatch, wake-up"
CALL_ROW = "call around the body"


def outside_rows(raw: dict, team: int | None, whole: int) -> list[dict]:
    """The step's cycles outside the traced window, as rows that make the profile's rows add up to the whole
    step as the application sees it (``whole``, the firmware's count of the step that was traced). With a
    team's own count (GAP8's cluster, ``team``): the master core's cycles around the body inside that count
    (TEAM_ROW: its call and its counter's reads; the other cores wait at their barrier), then the rest of the
    whole step (FC_ROW: the fabric controller's dispatch, the cluster's wake-up and the return, while every
    cluster core waits). Without one, the rest of the whole step is one row (CALL_ROW). A row of 0 cycles is
    left out; the figures are the firmware's and the trace's own, so a row can only be negative if they
    disagree, which it then shows."""
    cores, master = raw["cores"], 0
    traced = raw["cycles"]

    def row(label: str, cycles: int, master_works: bool) -> dict:
        work = [cycles if master_works and k == master else 0 for k in range(len(cores))]
        wait = [cycles - w for w in work]
        return {"label": label, "ops": [], "cycles": cycles, "work": work, "wait": wait, "outside": True}

    parts = [(TEAM_ROW, team - traced, True), (FC_ROW, whole - team, False)] if team is not None else \
        [(CALL_ROW, whole - traced, True)]
    return [row(label, cycles, works) for label, cycles, works in parts if cycles]


def _cycle_counter(board_name: str | None, field: str = "cycle_counter") -> str | None:
    """What the board's counter counts (``cpu.cycle_counter``, or ``cpu.team_cycle_counter``)."""
    board = _manifest_board(board_name)
    return getattr(board.cpu, field) or None if board is not None else None
