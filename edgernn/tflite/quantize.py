"""Quantization calibrated on trajectories, with every state output tied to its state input.

The float step model runs over the user's calibration sequences with its own states fed back, so
calibration sees the inputs and states the model really visits. Then each state's input and output
get one range (the union of both), so they end with identical scale and zero point and the device
loop copies state bytes back unchanged.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn.tflite import model as tfl
from edgernn.errors import EdgeRNNError

QUANT_MODES = ("float32", "int8", "int16")
MAX_CALIBRATION_SAMPLES = 4000
SYNTHETIC_SEQUENCES, SYNTHETIC_STEPS = 16, 64


# The horizon a recurrent model's quantization is judged over, by default: this many calibration windows
HORIZON_WINDOWS = 5


@dataclass
class Calibration:
    """The calibration sequences (windows, each from a zero state) and the horizon, in steps, over which a recurrent
    model's ranges are taken and its error judged (``streams``): users calibrate on short windows and run long
    streams, where a state can drift past anything a window reaches."""

    sequences: np.ndarray  # (sequences, steps, features) or (sequences, steps, H, W, C), float32
    source: str  # "file:<path>", "array" or "synthetic"
    horizon: int | None = None   # None: HORIZON_WINDOWS windows

    @property
    def horizon_steps(self) -> int:
        steps = int(self.sequences.shape[1])
        return int(self.horizon) if self.horizon is not None else HORIZON_WINDOWS * steps

    def streams(self) -> np.ndarray | None:
        """Sequences of ``horizon_steps`` steps: the windows chained end to end in their order, the state carried
        from one window into the next (the inputs are the calibration set's own), as many streams as the windows
        fill (at least one, the windows taken again from the first when there are too few). None when the
        horizon is no longer than a window."""
        n, steps = int(self.sequences.shape[0]), int(self.sequences.shape[1])
        horizon = self.horizon_steps
        if horizon <= steps:
            return None
        per_stream = -(-horizon // steps)
        count = max(1, n // per_stream)
        picks = np.arange(count * per_stream) % n
        chained = self.sequences[picks].reshape((count, per_stream * steps) + self.sequences.shape[2:])
        return np.ascontiguousarray(chained[:, :horizon])

    def describe(self) -> dict:
        streams = self.streams()
        return {"source": self.source, "sequences": int(self.sequences.shape[0]), "steps": int(self.sequences.shape[1]),
                "x_min": float(self.sequences.min()), "x_max": float(self.sequences.max()),
                "horizon": self.horizon_steps, "horizon_streams": 0 if streams is None else int(streams.shape[0])}


def calibration_for(calib: Any, step: tuple[int, ...], quant: str, warn: Callable[[str], None]) -> Calibration:
    """The calibration of ``calib`` (None: synthetic sequences, with a warning for a quantized model; a .npy path;
    an array) for a model of one step's shape ``step``: (features,) or a frame (H, W, C)."""
    if calib is None:
        if quant != "float32":
            warn(
                "WARNING: no --calib data given. Quantization ranges come from synthetic standard-normal "
                "sequences, which are not what your model sees; pass --calib FILE.npy with real sequences "
                f"{'(sequences, steps, H, W, C)' if len(step) > 1 else '(sequences, steps, features)'} "
                "for a trustworthy int8/int16 model."
            )
        return Calibration(synthetic_calibration(step), "synthetic")
    if isinstance(calib, (str, os.PathLike)):
        found = Calibration(load_sequences(calib, step), f"file:{Path(calib).name}")
    else:
        found = Calibration(check_sequences(calib, step, "calibration data"), "array")
    low, high = float(found.sequences.min()), float(found.sequences.max())
    if low == high:
        warn(f"WARNING: the calibration data holds one value only ({low:g} everywhere): the quantization ranges "
             "say nothing about real inputs; pass sequences the model really sees")
    return found


def calibration_sequences(calib: Any, step: tuple[int, ...]) -> np.ndarray:
    """The calibration sequences a conversion with ``calib`` used (its warnings were given then)."""
    return calibration_for(calib, tuple(step), "float32", lambda _: None).sequences


def horizon_widened(windows: list[dict], streams: list[dict], names: list[str]) -> dict[str, dict]:
    """The states whose range over the horizon's streams reaches past their range over the calibration windows by
    more than 1 % of it: name -> {"windows": [lo, hi], "horizon": [lo, hi]}. Their ranges are the horizon's (the
    streams' steps are calibration samples), where the windows' alone would have clipped them."""
    found = {}
    for name in names:
        w = np.concatenate([s[name].reshape(-1) for s in windows])
        h = np.concatenate([s[name].reshape(-1) for s in streams])
        (wl, wh), (hl, hh) = (float(w.min()), float(w.max())), (float(h.min()), float(h.max()))
        if hl < wl - 0.01 * (wh - wl) or hh > wh + 0.01 * (wh - wl):
            found[name] = {"windows": [wl, wh], "horizon": [min(wl, hl), max(wh, hh)]}
    return found


def check_horizon(value: Any) -> int | None:
    """--horizon: a whole number of steps, at least 1 (None: the default, HORIZON_WINDOWS windows)."""
    if value is None:
        return None
    try:
        steps = int(value)
        if steps != float(value):
            raise ValueError
    except (TypeError, ValueError):
        raise EdgeRNNError(f"--horizon {value!r} is not a whole number of steps") from None
    if steps < 1:
        raise EdgeRNNError(f"--horizon {steps} must be at least 1 step")
    return steps


def step_shape(step: int | tuple[int, ...]) -> tuple[int, ...]:
    """One step's shape: (features,) for a vector, (H, W, C) for a frame."""
    return (int(step),) if isinstance(step, (int, np.integer)) else tuple(int(d) for d in step)


def _expected(step: tuple[int, ...]) -> str:
    return f"(sequences, steps, {', '.join(str(d) for d in step)})"


def check_sequences(data: Any, step: int | tuple[int, ...], what: str) -> np.ndarray:
    """A (sequences, steps, *step) float32 array, or a one-line error naming what is wrong.

    ``step`` is one step's shape: the features of a vector, or a frame (H, W, C)."""
    step = step_shape(step)
    array = np.asarray(data)
    if array.dtype.kind not in "fiu":
        raise EdgeRNNError(f"{what} has dtype {array.dtype}; expected float32 numbers")
    if len(step) > 1 and array.ndim == 2 + len(step) and tuple(array.shape[2:]) != step:
        raise EdgeRNNError(f"{what} has frames of shape {tuple(array.shape[2:])}; the model takes frames of shape "
                           f"{step} (data shape {array.shape})")
    if array.ndim != 2 + len(step):
        raise EdgeRNNError(f"{what} has shape {array.shape}; expected {_expected(step)}")
    if len(step) == 1 and array.shape[2] != step[0]:
        raise EdgeRNNError(f"{what} has {array.shape[2]} features per step; the model takes {step[0]} (shape {array.shape})")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise EdgeRNNError(f"{what} is empty (shape {array.shape})")
    array = array.astype(np.float32)
    if not np.all(np.isfinite(array)):
        bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
        raise EdgeRNNError(f"{what} holds {bad} NaN or infinite values")
    return array


def read_npy(path: str | Path, what: str, mmap: bool = False) -> np.ndarray:
    """One array from a .npy file, or one line saying what the file is instead.

    ``mmap``: map the file rather than read it, so a long test sequence is read as it is used."""
    import stat
    import zipfile

    path = Path(path)
    if not path.exists():
        raise EdgeRNNError(f"{what} file {path} does not exist")
    if not stat.S_ISREG(path.stat().st_mode):
        kind = "a folder" if path.is_dir() else "not a regular file (a FIFO, socket or device)"
        raise EdgeRNNError(f"{what} {path} is {kind}; pass a .npy file written by numpy.save")
    try:
        with open(path, "rb") as handle:
            head = handle.read(6)
    except OSError as exc:
        raise EdgeRNNError(f"cannot read {what} file {path}: {exc.strerror}") from None
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = ", ".join(n.removesuffix(".npy") for n in archive.namelist()[:5])
        except zipfile.BadZipFile:
            names = "unreadable"
        raise EdgeRNNError(f"{what} {path} is a .npz archive (arrays: {names}), not one array; save the array "
                           "with numpy.save(path, array)")
    if head != b"\x93NUMPY":
        raise EdgeRNNError(f"{what} {path} is not a .npy file (it lacks NumPy's header); save the array with "
                           "numpy.save(path, array)")
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except ValueError as exc:
        if "pickle" in str(exc):
            raise EdgeRNNError(f"{what} {path} holds Python objects (pickled), not numbers; save a float32 "
                               "array") from None
        raise EdgeRNNError(f"{what} {path} is damaged or truncated ({str(exc).splitlines()[0]})") from None
    except (OSError, EOFError) as exc:
        raise EdgeRNNError(f"{what} {path} is damaged or truncated ({exc})") from None


def load_sequences(path: str | Path, step: int | tuple[int, ...], what: str = "calibration data") -> np.ndarray:
    path = Path(path)
    return check_sequences(read_npy(path, what), step, f"{what} {path.name}")


def synthetic_calibration(step: int | tuple[int, ...], seed: int = 0) -> np.ndarray:
    """The documented fallback: standard-normal sequences. Real trajectories are always better."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((SYNTHETIC_SEQUENCES, SYNTHETIC_STEPS, *step_shape(step))).astype(np.float32)


def run_step_sequences(tflite: bytes, sequences: np.ndarray, state_keys: list[str], x_key: str = "x",
                       y_key: str = "y", what: str = "calibration sequence") -> tuple[list[dict[str, np.ndarray]],
                                                                                    np.ndarray]:
    """Run a float step model over sequences, feeding its states back.

    Returns the per-step input samples (signature key -> array) and the outputs (seq, steps, out). A step whose
    output or state is not finite (a model that diverges on these inputs) is a one-line error naming it
    (``what`` and the sequence's index): no range, and so no quantization, can be made from it.
    """
    from edgernn.tflite.oracle import Stepper

    trace = Stepper(tflite, state_keys, x_key=x_key, y_key=y_key).run(np.asarray(sequences), keep_feeds=True)
    steps = trace.y.shape[:2]
    bounded = np.all(np.abs(trace.y.reshape(*steps, -1)) <= DIVERGED, axis=-1)
    for values in trace.states.values():
        bounded &= np.all(np.abs(values.reshape(*steps, -1)) <= DIVERGED, axis=-1)
    if not bounded.all():
        index, step = np.argwhere(~bounded)[0]
        raise EdgeRNNError(_diverged(int(index), int(step), what))
    return trace.feeds, np.asarray(trace.y, np.float32)


# a value beyond this is a model that diverges: far above any signal a model carries, far enough below float32's
# largest (3.4e38) that TF's quantizer can still make a scale of it (it aborts the process on a range at that end)
DIVERGED = 1e30


def _bounded(values: np.ndarray) -> bool:
    return bool(np.all(np.abs(values) <= DIVERGED))  # False for nan too


def _diverged(sequence: int, step: int, what: str) -> str:
    return (f"the float model's output or state is not finite or beyond {DIVERGED:g} at step {step} of {what} "
            f"{sequence}: the model diverges on these inputs; check its weights, or give inputs it runs on")


def check_finite_ranges(calibrated: bytes) -> bytes:
    """``calibrated`` unchanged where every recorded range is within DIVERGED; else a one-line error naming the
    first tensor whose is not (an overflow inside the model on the calibration data: TF's quantizer would abort
    the process on it)."""
    model = tfl.read(calibrated)
    for index, tensor in enumerate(model.subgraphs[0].tensors):
        r = tfl.get_min_max(model, index)
        if r is not None and not _bounded(np.asarray(r)):
            name = tfl._text(tensor.name).split(";")[0]
            raise EdgeRNNError(f"the float model's tensor {name} goes beyond {DIVERGED:g} (range [{r[0]:g}, {r[1]:g}]) "
                               "on the calibration data: it overflows on these inputs; check its weights, or give "
                               "inputs it runs on")
    return calibrated


def calibration_subset(samples: list[dict[str, np.ndarray]], limit: int = MAX_CALIBRATION_SAMPLES) -> list[dict]:
    """At most ``limit`` samples, evenly spaced, always keeping each input's extremes."""
    if len(samples) <= limit:
        return samples
    keep = set(np.linspace(0, len(samples) - 1, limit - 2 * len(samples[0])).astype(int).tolist())
    for key in samples[0]:
        values = np.array([s[key].max() for s in samples]), np.array([s[key].min() for s in samples])
        keep.add(int(values[0].argmax()))
        keep.add(int(values[1].argmin()))
    return [samples[i] for i in sorted(keep)]


# Ops whose integer kernels copy bytes, so the quantizer gives all their activations one scale.
SAME_SCALE_OPS = {"CONCATENATION", "RESHAPE", "STRIDED_SLICE", "SLICE", "SPLIT", "SPLIT_V", "SQUEEZE",
                  "EXPAND_DIMS", "GATHER", "PACK", "UNPACK", "TRANSPOSE"}


def same_scale_groups(model) -> dict[int, set[int]]:
    """Tensor index -> the set of activation tensors that must share its quantization."""
    graph = model.subgraphs[0]
    parent: dict[int, int] = {}

    def find(i: int) -> int:
        while parent.setdefault(i, i) != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def is_activation(i: int) -> bool:
        if i < 0:
            return False
        buf = model.buffers[graph.tensors[i].buffer]
        return buf.data is None or len(buf.data) == 0

    for op in graph.operators or []:
        if tfl.op_name(model, op.opcodeIndex) not in SAME_SCALE_OPS:
            continue
        members = [i for i in [*op.inputs, *op.outputs] if is_activation(int(i))]
        for i in members[1:]:
            parent[find(int(i))] = find(int(members[0]))
    groups: dict[int, set[int]] = {}
    for i in list(parent):
        groups.setdefault(find(i), set()).add(i)
    return {i: group for group in groups.values() for i in group}


def tie_state_quantization(calibrated: bytes, ties: list[tuple[str, str]],
                           widen: dict[str, tuple[float, float]] | None = None,
                           exact: dict[str, tuple[float, float]] | None = None) -> bytes:
    """Give each (input key, output key) pair of the signature one range: the union of their ranges.

    A state that enters a concatenation shares its scale with every operand of it, so the whole
    same-scale group of both tensors gets the union. ``widen`` adds ranges per input key: those the
    quantizer imposed on the input side in a previous attempt. ``exact`` sets the range outright:
    for a state produced by an op whose output quantization TFLite fixes (TANH, LOGISTIC), the
    input takes that range, which holds every value the state can take.
    """
    widen, exact = widen or {}, exact or {}
    model = tfl.read(calibrated)
    inputs, outputs = tfl.signature(model)
    groups = same_scale_groups(model)
    for in_key, out_key in ties:
        members = groups.get(inputs[in_key], {inputs[in_key]}) | groups.get(outputs[out_key], {outputs[out_key]})
        ranges = [r for r in (tfl.get_min_max(model, i) for i in members) if r is not None]
        if not ranges:
            raise EdgeRNNError(f"calibration recorded no range for state {in_key}")
        if in_key in exact:
            lo, hi = exact[in_key]
        else:
            extra = widen.get(in_key, (0.0, 0.0))
            lo = min(min(r[0] for r in ranges), extra[0], 0.0)
            hi = max(max(r[1] for r in ranges), extra[1], 0.0)
        for index in members:
            if tfl.get_min_max(model, index) is not None:
                tfl.set_min_max(model, index, lo, hi)
    return tfl.write(model)


def fit_int16_sums(calibrated: bytes) -> bytes:
    """The calibrated model with each SUM's input range widened to hold the SUM's output range too.

    TF's 16x8 quantizer gives a SUM its input's quantization, and LiteRT's int16 SUM adds the raw values
    and saturates the total to int16, with no rescale. A sum of many terms (an LTC's synapses: 16 of
    them per neuron) then saturates wherever it leaves the range of one term. With the input's range
    widened to the recorded range of the sum, the sum fits, at the cost of a coarser input scale. (The
    int8 quantizer rescales a SUM's output on its own range: this is for 16x8 only.)"""
    model = tfl.read(calibrated)
    graph = model.subgraphs[0]
    groups = same_scale_groups(model)
    changed = False
    for op in graph.operators or []:
        if tfl.op_name(model, op.opcodeIndex) != "SUM":
            continue
        source, total = int(op.inputs[0]), int(op.outputs[0])
        have, want = tfl.get_min_max(model, source), tfl.get_min_max(model, total)
        if have is None or want is None or (want[0] >= have[0] and want[1] <= have[1]):
            continue
        lo, hi = min(have[0], want[0]), max(have[1], want[1])
        for index in groups.get(source, {source}):
            r = tfl.get_min_max(model, index)
            if r is not None:
                tfl.set_min_max(model, index, min(r[0], lo), max(r[1], hi))
        changed = True
    return tfl.write(model) if changed else calibrated


# The 16x8 activations' ranges: the calibrated ones, times this. Calibration sees a few sequences; on others a
# recurrent state or a pre-activation may leave its recorded range and saturate, and the error of the step then
# jumps (a trained CfC on AutoNCP(16, 2), int16: l2r 0.0071 on its 32 calibration sequences, 0.018 on 8 others of
# the same task, one of them 0.025 with a largest error of 0.32; with the ranges 1.5 times as wide, 0.0071 and
# 0.0065, largest 0.03). 16 bits can spare the resolution (0.6 bit); 8 bits cannot, and int8 keeps its ranges.
INT16_HEADROOM = 1.5


def widen_int16_ranges(calibrated: bytes, factor: float | None = None) -> bytes:
    """The calibrated model with every recorded activation range (inputs, states and outputs included)
    ``factor`` (INT16_HEADROOM by default) times as wide about zero, for the 16x8 quantizer."""
    factor = INT16_HEADROOM if factor is None else factor
    model = tfl.read(calibrated)
    for index in range(len(model.subgraphs[0].tensors)):
        r = tfl.get_min_max(model, index)
        if r is not None:
            tfl.set_min_max(model, index, r[0] * factor, r[1] * factor)
    return tfl.write(model)


# Ops whose integer output quantization TFLite fixes, whatever the calibration says.
FIXED_OUTPUT_OPS = {"TANH", "LOGISTIC"}


def _producer(model, tensor: int) -> str | None:
    for op in model.subgraphs[0].operators or []:
        if tensor in [int(i) for i in op.outputs]:
            return tfl.op_name(model, op.opcodeIndex)
    return None


def _represented_range(entry: dict) -> tuple[float, float]:
    """The real interval a quantized tensor's scale and zero point cover."""
    bits = {"int8": (-128, 127), "int16": (-32767, 32767)}[entry["dtype"]]
    return (bits[0] - entry["zero_point"]) * entry["scale"], (bits[1] - entry["zero_point"]) * entry["scale"]


def _untied(quantized: bytes, ties: list[tuple[str, str]], form=None) -> dict[str, tuple[str, tuple[float, float]]]:
    """States whose input and output quantization differ: ("exact", the fixed output's range) when the
    output comes from an op with fixed output quantization, else ("union", what both cover). ``form(model)``,
    when given, maps each signature tensor to the tensor whose quantization counts (None: there is none)."""
    model = tfl.read(quantized)
    inputs, outputs = tfl.signature(model)
    pick = form(model) if form is not None else (lambda index: index)
    found = {}
    for in_key, out_key in ties:
        a_index, b_index = pick(inputs[in_key]), pick(outputs[out_key])
        if a_index is None or b_index is None:
            raise EdgeRNNError(f"the quantized model has no integer form of state {in_key}")
        a, b = tfl.tensor_quant(model, a_index), tfl.tensor_quant(model, b_index)
        if (a["scale"], a["zero_point"]) != (b["scale"], b["zero_point"]):
            ra, rb = _represented_range(a), _represented_range(b)
            if _producer(model, b_index) in FIXED_OUTPUT_OPS:
                found[in_key] = ("exact", rb)
            else:
                found[in_key] = ("union", (min(ra[0], rb[0]), max(ra[1], rb[1])))
    return found


def quantize_with_tied_states(calibrated: bytes, ties: list[tuple[str, str]], quant: str,
                              quantize=None, form=None) -> tuple[bytes, bytes]:
    """Quantize so that every state output has its input's exact scale and zero point.

    Ops such as CONCATENATION make the quantizer give all their operands one scale, so a state that
    enters a concatenation takes the concatenation's range. The loop widens the tied range to what
    the quantizer imposed and quantizes again, until input and output agree (two rounds in practice).
    ``quantize(tied)`` replaces ``quantize_calibrated(tied, quant)`` and ``form`` is _untied's (a 16x8
    model with float fallback: edgernn/tflite/mixed.py).
    Returns (quantized model, calibrated model with the final ranges).
    """
    quantize = quantize or (lambda tied: quantize_calibrated(tied, quant))
    if quant == "int16":
        calibrated = widen_int16_ranges(fit_int16_sums(calibrated))
    widen: dict[str, tuple[float, float]] = {}
    exact: dict[str, tuple[float, float]] = {}
    for _ in range(6):
        tied = tie_state_quantization(calibrated, ties, widen, exact)
        quantized = quantize(tied)
        untied = _untied(quantized, ties, form)
        if not untied:
            return quantized, tied
        for key, (how, (lo, hi)) in untied.items():
            if how == "exact":
                exact[key] = (lo, hi)
                continue
            old = widen.get(key, (0.0, 0.0))
            widen[key] = (min(old[0], lo), max(old[1], hi))
    raise EdgeRNNError(f"could not give states {', '.join(sorted(untied))} one quantization at input and output")


def _unsupported_op(message: str) -> str | None:
    match = re.search(r"not yet supported for op:\s*'?([A-Z_0-9]+)'?", message)
    return match.group(1) if match else None


def quantize_calibrated(calibrated: bytes, quant: str) -> bytes:
    """Quantize a calibrated float model exactly as TFLiteConverter would after its own calibration."""
    from edgernn import tfenv

    tf = tfenv.tensorflow()
    from tensorflow.lite.python.convert import mlir_quantize
    from tensorflow.lite.python.optimize import calibrator
    from tensorflow.lite.python.util import modify_model_io_type

    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        if quant == "int8":
            return bytes(mlir_quantize(calibrated, False, input_data_type=tf.int8, output_data_type=tf.int8))
        # 16x8 goes through TFLite's own quantizer, as the converter does. With no new samples fed,
        # it quantizes from the (tied) ranges already stored in the model.
        wrapper = calibrator.Calibrator(calibrated)
        wrapper._calibrator.Prepare()
        quantized = wrapper._calibrator.QuantizeModel(
            np.dtype(np.int16).num, np.dtype(np.int16).num, False,
            np.dtype(np.int16).num, np.dtype(np.int64).num, False, False,
        )
        return bytes(modify_model_io_type(quantized, tf.int16, tf.int16))


def calibrate(converter: Any, samples: list[dict[str, np.ndarray]]) -> bytes:
    """The float model with min/max statistics, from TFLiteConverter's own calibration pass."""
    import tensorflow as tf

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: iter(samples)
    converter._experimental_calibrate_only = True
    return check_finite_ranges(bytes(converter.convert()))


def explain_quantization_failure(exc: BaseException, quant: str, layers_by_op: dict[str, list[str]]) -> EdgeRNNError:
    text = str(exc)
    op = _unsupported_op(text)
    if op:
        users = layers_by_op.get(op) or []
        where = f" (used by {', '.join(users)})" if users else ""
        return EdgeRNNError(
            f"--quant {quant} is not available for this model: TensorFlow cannot quantize op {op}{where} "
            f"in {'16x8' if quant == 'int16' else quant} mode; use "
            + ("--quant int8 or float32, or --quant auto (int16 where the error budget needs it, the op then in "
               "float32 between int16 tensors)" if quant == "int16" else "--quant float32")
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return EdgeRNNError(f"quantization to {quant} failed: {first}")
