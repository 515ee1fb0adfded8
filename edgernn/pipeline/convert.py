"""``edgernn convert``: a Keras RNN model to a stateful single-step TFLite model and its manifest.

Everything is built in a temporary folder beside OUT and renamed into place at the end, so a
failure leaves OUT as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn import tfenv
from edgernn._version import __version__
from edgernn.tflite import model as tfl
from edgernn.outdir import BuildFolder, Manifest
from edgernn.keras.decompose import Plan, decompose, layer_norm_without_neg
from edgernn.errors import EdgeRNNError
from edgernn.keras import fused_rebuild
from edgernn.keras.fused_rebuild import diagnose
from edgernn.tflite import sequence_lstm
from edgernn.tflite.oracle import FusedStepper
from edgernn.keras.describe import layer_rows
from edgernn.keras.load import LoadedModel
from edgernn.pytorch.load import load_any
from edgernn.keras.reference import keras_reference
from edgernn.tflite.quantize import (
    QUANT_MODES, Calibration, calibrate, calibration_subset, check_horizon, check_sequences, explain_quantization_failure,
    load_sequences, quantize_calibrated, quantize_with_tied_states, run_step_sequences, synthetic_calibration,
)
from edgernn.keras.stepmodel import StepModel, build_head_model, build_step_model, ltc_without_division
from edgernn.tflite.mixed import DEFAULT_MAX_ERROR, check_max_error

MODES = ("step", "fused", "auto")
# --quant auto: int8 and 16x8 per op, the plan of least estimated cost that keeps l2r within --max-error
QUANTS = (*QUANT_MODES, "auto")
# Ops that TFLite emits for layers, to name the layer when an op cannot be quantized.
OPS_OF_KIND = {"LTC": ["DIV", "SUM"], "CfC": ["EXP", "DIV"],
               "LayerNormalization": ["NEG", "RSQRT", "MEAN", "SQUARED_DIFFERENCE"]}

Log = Callable[[str], None]
QUANT_WARN_L2R = 0.1
# The float twins of a quantized build: the same step model (and head) in float32, which validate runs
# beside the device to measure the quantization error step by step, in constant memory.
FLOAT_STEP, FLOAT_HEAD = "float_step.tflite", "float_head.tflite"


def _quiet(_: str) -> None:
    pass


# ---------------------------------------------------------------- TFLite conversion

def _converter(keras_model: Any):
    tf = tfenv.tensorflow()
    return tf.lite.TFLiteConverter.from_keras_model(keras_model)


def _convert_float(keras_model: Any) -> bytes:
    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        return bytes(_converter(keras_model).convert())


def _check_ops(data: bytes, what: str) -> list[str]:
    names = tfl.op_names(tfl.read(data))
    banned = sorted({n for n in names if n in tfl.CONTROL_FLOW_OPS or n.startswith("CUSTOM")})
    if banned:
        raise EdgeRNNError(f"{what} still holds {', '.join(banned)}; edgernn needs a graph of plain ops")
    return names


def _match_outputs(data: bytes, keras_model: Any, keras_input_names: list[str]) -> list[str]:
    """Signature output key for each Keras output, found by running both on the same random input."""
    interp = _interp(data)
    runner = interp.get_signature_runner()
    details = runner.get_input_details()
    if set(details) != set(keras_input_names):
        raise EdgeRNNError(f"converted step model has inputs {sorted(details)}, expected {sorted(keras_input_names)}")
    rng = np.random.default_rng(1)
    feed = {k: rng.uniform(-0.9, 0.9, details[k]["shape"]).astype(np.float32) for k in keras_input_names}
    got = runner(**feed)
    expected = keras_model([feed[k] for k in keras_input_names], training=False)
    expected = [np.asarray(e) for e in (expected if isinstance(expected, (list, tuple)) else [expected])]
    keys = []
    for index, want in enumerate(expected):
        candidates = [k for k, v in got.items() if np.shape(v) == want.shape
                      and np.allclose(v, want, rtol=1e-4, atol=1e-5)]
        default = f"output_{index}"
        pick = default if default in candidates else next((c for c in candidates if c not in keys), None)
        if pick is None:
            raise EdgeRNNError(f"converted step model disagrees with the Keras step model on output {index}")
        keys.append(pick)
    return keys


def _interp(data: bytes):
    from edgernn.tflite.interpreter import load_interpreter

    return load_interpreter(data)


def _io_entry(model, name: str, index: int) -> dict:
    return {"name": name, **tfl.tensor_quant(model, index)}


# ---------------------------------------------------------------- reference check

def _float_self_check(plan: Plan, run: Callable[[bytes, np.ndarray], np.ndarray], step_float: bytes,
                      head_float: bytes | None, sequences: np.ndarray, source: Any = None) -> float | None:
    """Largest relative error of the float step model (run over sequences by ``run``) against the source
    model on a few sequences: the Keras model, or the ONNX file or torch module it was mapped from."""
    probe = sequences[: min(4, len(sequences)), : min(64, sequences.shape[1])]
    want = source.reference(probe) if source is not None else keras_reference(plan.model, probe)
    if want is None:
        return None
    ys = run(step_float, probe)
    got = ys if plan.head_per_step else _run_head(head_float, ys[:, -1, :]) if head_float else ys[:, -1, :]
    got = got.reshape(want.shape)
    scale = max(float(np.max(np.abs(want))), 1e-6)
    return float(np.max(np.abs(got - want)) / scale)


def source_entry(loaded: LoadedModel) -> dict:
    """manifest ``source``: what the model came as (keras, onnx or torch) and its name."""
    if loaded.source is not None:
        return {"format": loaded.source.kind, "name": loaded.source.name}
    return {"format": "keras", "name": loaded.path.name if loaded.path else str(loaded.model.name)}


def _run_head(head: bytes, hs: np.ndarray, key_in: str = "h", key_out: str | None = None) -> np.ndarray:
    runner = _interp(head).get_signature_runner()
    details = runner.get_input_details()
    out = []
    for h in hs:
        result = runner(**{key_in: h.reshape(details[key_in]["shape"]).astype(np.float32)})
        out.append(np.asarray(next(iter(result.values())) if key_out is None else result[key_out]).reshape(-1))
    return np.asarray(out, np.float32)


def _budget_error(manifest) -> float:
    """The error --max-error bounds (edgernn.tflite.mixed.budget_error) from ``quantization_error``: on the
    calibration windows and on the streams of the horizon."""
    error = manifest.quantization_error
    return max(error["l2r"], error.get("sequence_l2r", 0.0),
               *(error["horizon"][k] for k in ("l2r", "sequence_l2r") if "horizon" in error))


def quantization_error(folder: Path, manifest: Manifest, sequences: np.ndarray, what: str = "calibration sequences") -> dict:
    """The quantized step model against the float one, over (up to 8 of) ``sequences``: the calibration windows, or
    the streams of the horizon (``what``)."""
    from edgernn.tflite.mixed import sequence_l2r
    from edgernn.tflite.oracle import StepRunner

    probe = sequences[:8]
    runner = StepRunner(folder, manifest)
    got = runner.run(probe).y_float
    float_runner = _FloatTwin(folder, manifest)
    want = float_runner.y(probe)
    err = got - want
    norm = float(np.linalg.norm(want))
    shape = (len(probe), probe.shape[1], -1)
    return {
        "on": f"{len(probe)} {what} of {probe.shape[1]} steps, per-step output y",
        "l2r": float(np.linalg.norm(err) / norm) if norm > 0 else 0.0,
        "sequence_l2r": sequence_l2r(np.reshape(got, shape), np.reshape(want, shape)),
        "rmse": float(np.sqrt(np.mean(err ** 2))),
        "max_abs": float(np.max(np.abs(err))),
    }


class _FloatTwin:
    """The float step model kept beside a quantized one while converting (float.tflite in staging)."""

    def __init__(self, folder: Path, manifest: Manifest):
        self.data = (folder / FLOAT_STEP).read_bytes()
        self.states = [s["name"] for s in manifest.states]
        self.fused = manifest.mode == "fused"

    def y(self, sequences: np.ndarray) -> np.ndarray:
        if self.fused:
            ys, _ = FusedStepper(self.data, {}).run(sequences)
            return ys.astype(np.float32)
        _, ys = run_step_sequences(self.data, sequences, self.states, what="sequence")
        return ys


# ---------------------------------------------------------------- the command

def convert(model: Any, out: str | os.PathLike, *, quant: str = "int8", calib: Any = None, mode: str = "auto",
            unsafe: bool = False, roll: bool = False, board: str | None = None, max_error: float = DEFAULT_MAX_ERROR,
            horizon: int | None = None, log: Log | None = None, warn: Log | None = None) -> Manifest:
    """Convert ``model`` (a path or a Keras model) into ``out``/step.tflite and ``out``/manifest.json.

    ``calib`` is a (sequences, steps, features) array, (sequences, steps, H, W, C) for a model of frames, or
    the path of a .npy file holding one.
    ``mode``: ``step`` (single-step cells), ``fused`` (one UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM, refused
    with the reasons when the model does not allow it) or ``auto`` (fused where every RNN layer allows
    it, else step).
    ``quant="auto"``: each op of the step model in int8 or 16x8, the plan of least estimated cost (for ``board``,
    else one core) that keeps the l2r against the float model on the calibration sequences within ``max_error``
    (manifest ``precision``).
    ``horizon``: the steps over which a recurrent model's ranges are taken and its error judged, the calibration
    windows chained into streams that long (None: five windows; ``Calibration.streams``).
    Returns the manifest as written.
    """
    log = log or _quiet
    warn = warn or log
    if quant not in QUANTS:
        raise EdgeRNNError(f"unknown --quant {quant!r}; choose one of {', '.join(QUANTS)}")
    if quant == "auto":
        max_error = check_max_error(max_error)
    if mode not in MODES:
        raise EdgeRNNError(f"unknown --mode {mode!r}; choose one of {', '.join(MODES)}")
    horizon = check_horizon(horizon)
    folder = BuildFolder(out)
    with folder.staged() as staging:
        log("loading model")
        loaded = load_any(model, unsafe=unsafe, roll=roll)
        plan = decompose(loaded.model, loaded.flavour)
        diagnosis = diagnose(plan, "int8" if quant == "auto" else quant, mode)
        for line in diagnosis.lines():
            log(f"plan: {line}")
        calibration = _calibration(calib, plan.input_shape, quant, warn)
        calibration.horizon = horizon
        manifest = _run_strategy(diagnosis, loaded, plan, calibration, quant, staging, log, warn, max_error, board)
        if quant == "auto" and mode == "auto" and diagnosis.fused and _budget_error(manifest) > max_error:
            # the fused LSTM has no 16x8 form: an int8 fused model that misses the budget gives way to step
            # cells, where the plan can take ops into int16
            l2r = _budget_error(manifest)
            log(f"auto: the fused int8 model misses the budget ({l2r:.4f} > {max_error:g}); "
                "building step cells for a per-op int8/int16 plan")
            _empty(staging)
            diagnosis = diagnose(plan, "int8", "step")
            why = (f"--quant auto: the fused op has no 16x8 form, and its int8 model misses the budget "
                   f"({l2r:.4f} > {max_error:g})")
            diagnosis.mode = mode
            diagnosis.paths = [dataclasses.replace(p, why=why) for p in diagnosis.paths]
            manifest = _run_strategy(diagnosis, loaded, plan, calibration, quant, staging, log, warn, max_error,
                                     board)
        manifest.board = board
        manifest.mode_requested = mode
        manifest.rnn_paths = [p.as_dict() for p in diagnosis.paths]
        manifest.layers = layer_rows(plan, diagnosis)
        if quant != "float32":
            l2r = manifest.quantization_error["l2r"]
            if manifest.precision is not None and "error" not in manifest.precision:
                manifest.precision["error"] = _budget_error(manifest)
                manifest.precision["met"] = _budget_error(manifest) <= max_error
            if l2r > QUANT_WARN_L2R:
                warn(f"WARNING: the {quant} step model is far from the float model on the calibration sequences "
                     f"(l2r {l2r:.3f}); check the calibration data, or use a wider --quant")
        if quant == "float32":
            (staging / FLOAT_STEP).unlink(missing_ok=True)  # step.tflite is the float model itself
        else:
            manifest.files["float_step"] = FLOAT_STEP
            if (staging / FLOAT_HEAD).is_file():
                manifest.files["float_head"] = FLOAT_HEAD
        return folder.commit(staging, manifest)


def _run_strategy(diagnosis, loaded, plan, calibration, quant: str, staging: Path, log: Log, warn: Log,
                  max_error: float, board: str | None) -> Manifest:
    """The step model of ``diagnosis``'s path in ``staging``, and its manifest, with its precision and,
    quantized, its error against the float model on the calibration sequences."""
    strategy = (FusedStrategy if diagnosis.fused else StepStrategy)(loaded, plan, log)
    strategy.max_error, strategy.warn, strategy.board, strategy.quant = max_error, warn, board, quant
    manifest = _run_pipeline(strategy, loaded, plan, calibration, quant, staging, log)
    manifest.precision = strategy.precision
    if quant != "float32":
        manifest.quantization_error = quantization_error(staging, manifest, calibration.sequences)
        if strategy.streams is not None:
            manifest.quantization_error["horizon"] = quantization_error(staging, manifest, strategy.streams,
                                                                        "streams")
    return manifest


def _empty(staging: Path) -> None:
    """The staging folder (edgernn's own, not yet in place) emptied for another attempt."""
    for entry in staging.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def calibration_sequences(calib: Any, step: tuple[int, ...]) -> np.ndarray:
    """The calibration sequences a conversion with ``calib`` used (its warnings were given then)."""
    return _calibration(calib, tuple(step), "float32", lambda _: None).sequences


def _calibration(calib: Any, step: tuple[int, ...], quant: str, warn: Log) -> Calibration:
    """``step``: one step's shape, (features,) or a frame (H, W, C)."""
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


def _layers_by_op(plan: Plan) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for _, layer in plan.order:
        kind = type(layer).__name__
        for op in OPS_OF_KIND.get(kind, []):
            found.setdefault(op, []).append(f"{kind} layer '{layer.name}'")
    return found


# ops TF's 16x8 quantizer takes but LiteRT has no int16 kernel of, which TF's quantizer may abort the process on
NO_INT16_KERNEL = ("SQUARED_DIFFERENCE",)


def _check_16x8_ops(step_float: bytes, quant: str, plan: Plan) -> None:
    """A one-line refusal, before TF's 16x8 quantizer runs, of a step model holding an op LiteRT cannot run in
    int16 (a tf_keras LayerNormalization's SQUARED_DIFFERENCE; Keras 3's is rewritten without it)."""
    names = set(tfl.op_names(tfl.read(step_float)))
    for op in NO_INT16_KERNEL:
        if op in names:
            users = _layers_by_op(plan).get(op) or []
            where = f" (used by {', '.join(users)})" if users else ""
            raise EdgeRNNError(f"--quant {quant} is not available for this model: LiteRT has no int16 {op}{where}; "
                               "use --quant int8 or float32")


def _quantization_failure(quant: str, plan: Plan):
    """A context in which an unexpected quantizer failure becomes one line naming the layers that may cause it."""
    @contextlib.contextmanager
    def explained():
        try:
            yield
        except EdgeRNNError:
            raise
        except Exception as exc:
            raise explain_quantization_failure(exc, quant, _layers_by_op(plan)) from None
    return explained()


# ---------------------------------------------------------------- one pipeline, two strategies

def _run_pipeline(strategy: "StepStrategy | FusedStrategy", loaded: LoadedModel, plan: Plan,
                  calibration: Calibration, quant: str, staging: Path, log: Log) -> Manifest:
    """Build float, self-check, calibrate, quantize, describe: the strategy makes the step model, the
    head (the layers that run on the step output) and the manifest are the same for both."""
    step_float = strategy.build_float()
    head_model = build_head_model(plan, loaded.keras)
    head_float = None
    if head_model is not None:
        head_float = _name_head_output(_convert_float(head_model))
        _check_ops(head_float, "the head model")

    sequences = calibration.sequences
    # the horizon's streams, for a model that carries a state (a stateless one has nothing to drift)
    strategy.streams = calibration.streams() if strategy.has_state else None
    calibration_facts = strategy.trajectories(step_float, sequences)
    self_check = _float_self_check(plan, strategy.run_float, step_float, head_float, sequences, loaded.source)
    if self_check is not None and self_check > 1e-4:
        raise EdgeRNNError(strategy.self_check_refusal(self_check))

    (staging / FLOAT_STEP).write_bytes(step_float)
    if head_float is not None and quant != "float32":
        (staging / FLOAT_HEAD).write_bytes(head_float)
    if quant == "float32":
        step_final, head_final = step_float, head_float
    else:
        step_final, head_ys, y_range = strategy.quantize(step_float, quant, head_float is not None)
        head_final = None
        if head_float is not None:
            head_final = _quantize_head(head_model, head_ys, y_range, strategy.head_quant or quant, plan)
            if (quant == "auto" and strategy.mode == "step" and strategy.precision is not None
                    and strategy.head_quant == "int8"):
                head_final = _auto_head(strategy, head_model, head_ys, y_range, plan, step_float, head_float,
                                        step_final, head_final, calibration.sequences, log)

    strategy.check_final(step_final)
    model = tfl.read(step_final)
    inputs, outputs = tfl.signature(model)
    states = strategy.states(step_final, model)
    (staging / "step.tflite").write_bytes(step_final)
    files = {"step": "step.tflite", **strategy.extra_files(step_final, states, sequences, staging)}
    head_entry, head_macs = _head_entry(staging, head_final, model, outputs, strategy.head_quant or quant)
    if head_entry:
        files["head"] = "head.tflite"
    return Manifest(
        edgernn_version=__version__,
        tool_versions=tfenv.versions(),
        model_file=str(loaded.path) if loaded.path else None,
        model_sha256=loaded.sha256,
        keras=loaded.flavour,
        source=source_entry(loaded),
        quant=quant,
        mode=strategy.mode,
        sequence_output="every_step" if plan.head_per_step else "last_step",
        inputs=[_io_entry(model, "x", inputs["x"])],
        outputs=[_io_entry(model, "y", outputs["y"])],
        states=states,
        state_feedback=strategy.state_feedback(states),
        head=head_entry,
        files=files,
        ops=sorted(set(tfl.op_names(model))),
        macs_per_step=tfl.macs(model),
        head_macs=head_macs,
        weight_bytes=tfl.constant_bytes(model) + (tfl.constant_bytes(tfl.read(head_final)) if head_final else 0),
        calibration={**calibration.describe(), **calibration_facts},
        float_self_check_rel=self_check,
        layers=layer_rows(plan),
        fused_states_io=strategy.fused_states_io,
    )


# --quant auto: the plan is made on the first PLAN_SEQUENCES calibration sequences, and checked on up to
# HELD_OUT_SEQUENCES more; a plan that misses the budget there is made again, at most HELD_OUT_RETRIES times
PLAN_SEQUENCES = 8
HELD_OUT_SEQUENCES = 24
HELD_OUT_RETRIES = 2
# where even int16 misses: the FULLY_CONNECTEDs whose weights' int8 rounding alone gives at least this share of
# the budget are put in two parts first (edgernn/tflite/two_part.py), then, if that misses, all of them
TWO_PART_SHARE = 0.25


def _plan_met(plan, checks: list[dict], max_error: float) -> bool:
    """Whether a plan meets the budget on its own sequences and, where it was checked, on the held-out ones."""
    return plan.error <= max_error and (not checks or checks[-1]["held_out_l2r"] <= max_error)


def _plan_error(plan, checks: list[dict]) -> float:
    """The larger of a plan's errors on its own sequences and on the held-out ones."""
    return max(plan.error, checks[-1]["held_out_l2r"] if checks else 0.0)


@contextlib.contextmanager
def _sixteen_bit_forms(plan: Plan, active: bool):
    """The step model's forms that TF's 16x8 quantizer can take (StepStrategy.without_division)."""
    with ltc_without_division(plan, active=active), layer_norm_without_neg(active=active):
        yield


class StepStrategy:
    """Single-step cells: the states are inputs and outputs of the step model, fed back by the caller."""

    mode = "step"
    fused_states_io = None
    precision = None
    head_quant = None  # the head's quantization when it is not --quant (auto: the step output's dtype)
    max_error = DEFAULT_MAX_ERROR
    board: str | None = None     # the board a build is for: the cost --quant auto weighs plans by
    quant = "int8"
    streams: np.ndarray | None = None   # the calibration windows chained to the horizon (Calibration.streams)

    def __init__(self, loaded: LoadedModel, plan: Plan, log: Log):
        self.loaded, self.plan, self.log = loaded, plan, log
        self.warn = log

    @property
    def has_state(self) -> bool:
        return bool(self.step.state_names)

    def without_division(self):
        """At int16 and auto, an LTC's step model divides by multiplying with rsqrt(d)^2 (TF's 16x8 has no
        DIV), and a LayerNormalization has no NEG (TF's 16x8 has none; docs/quantization.md): active while the
        step model is traced, converted and calibrated."""
        return _sixteen_bit_forms(self.plan, active=self.quant in ("int16", "auto"))

    def build_float(self) -> bytes:
        self.log("building the step model")
        with self.without_division():
            self.step = build_step_model(self.plan, self.loaded.keras)
            keras_inputs = [k for k, _ in self.step.input_names]
            self.log("converting to TFLite (float32)")
            step_float = _convert_float(self.step.keras_model)
        _check_ops(step_float, "the step model")
        self.output_keys = _match_outputs(step_float, self.step.keras_model, keras_inputs)
        return _rename_for_run(step_float, self.step, self.output_keys)

    def trajectories(self, step_float: bytes, sequences: np.ndarray) -> dict:
        """Run the float step model over the calibration sequences, and over the horizon's streams: the real
        trajectories, whose steps give the ranges (the windows' first, then the streams') and the outputs the
        head is quantized on."""
        self.log("running the float step model over the calibration sequences")
        self.samples, self.ys = run_step_sequences(step_float, sequences, self.step.state_names)
        self.samples_sequences = sequences
        facts = {"horizon_streams": 0}
        if self.streams is not None:
            self.log(f"running it over {len(self.streams)} streams of {self.streams.shape[1]} steps (the horizon)")
            more, ys = run_step_sequences(step_float, self.streams, self.step.state_names, what="horizon stream")
            facts = {"horizon_streams": len(self.streams),
                     "horizon_widened": horizon_widened(self.samples, more, self.step.state_names)}
            self.samples += more
            self.ys = np.concatenate([self.ys.reshape(-1, self.ys.shape[-1]), ys.reshape(-1, ys.shape[-1])])
        return {"samples": len(self.samples), **facts}

    def run_float(self, step_float: bytes, probe: np.ndarray) -> np.ndarray:
        _, ys = run_step_sequences(step_float, probe, self.step.state_names)
        return ys

    @staticmethod
    def self_check_refusal(rel: float) -> str:
        return f"the float step model differs from the Keras model by {rel:.2e} (relative); this model is not supported"

    def quantize(self, step_float: bytes, quant: str,
                 with_head: bool) -> tuple[bytes, np.ndarray, tuple[float, float] | None]:
        """The quantized step model, its states' ranges tied, and the step outputs and y range the head
        is quantized on."""
        keras_inputs = [k for k, _ in self.step.input_names]
        y_key, state_out_keys = self.output_keys[0], self.output_keys[1:]
        if quant in ("int16", "auto"):
            _check_16x8_ops(step_float, quant, self.plan)
        self.log(f"calibrating on {len(self.samples)} recorded steps and quantizing to {quant}")
        keyed = [{k: s[p] for k, p in self.step.input_names} for s in calibration_subset(self.samples)]
        with _quantization_failure(quant, self.plan):
            with warnings.catch_warnings(), tfenv.native_stderr_captured():
                warnings.simplefilter("ignore")
                with self.without_division():
                    calibrated = calibrate(_converter(self.step.keras_model), keyed)
            if quant == "auto":
                return self._quantize_auto(step_float, calibrated, list(zip(keras_inputs[1:], state_out_keys)),
                                           keyed)
            quantized, tied = quantize_with_tied_states(calibrated, list(zip(keras_inputs[1:], state_out_keys)), quant)
        tied_model = tfl.read(tied)
        y_range = tfl.get_min_max(tied_model, tfl.signature(tied_model)[1][y_key])
        return _rename_for_run(quantized, self.step, self.output_keys), self.ys, y_range

    def _quantize_auto(self, step_float: bytes, calibrated: bytes, ties: list[tuple[str, str]],
                       keyed: list[dict[str, np.ndarray]]) -> tuple[bytes, np.ndarray, tuple[float, float] | None]:
        """The mixed int8/16x8 step model that meets ``max_error`` at the least estimated cost. Where even the
        16x8 model misses it, its FULLY_CONNECTED weights are tried in two int8 parts (edgernn/tflite/two_part.py)."""
        from edgernn.tflite import mixed, two_part

        probe = self.samples_sequences[:PLAN_SEQUENCES]
        # the plan is checked where the model will run: on the horizon's streams, else the other windows
        held = (self.streams[:HELD_OUT_SEQUENCES] if self.streams is not None else
                self.samples_sequences[PLAN_SEQUENCES:PLAN_SEQUENCES + HELD_OUT_SEQUENCES])
        self.held_what = (f"streams of {held.shape[1]} steps" if self.streams is not None else
                          "other calibration sequences")
        public_ties = [(s, s) for s in self.step.state_names]
        want = mixed.run_quantized(step_float, probe, public_ties)
        want_held = mixed.run_quantized(step_float, held, public_ties) if len(held) else None
        try:
            pair = self._pair(calibrated, ties)
        except mixed.MixedUnavailable as why:
            return self._auto_uniform(why, public_ties, probe, held, want, want_held)
        # the rounding is fitted on the planning sequences' steps alone: the held-out ones check it
        steps = self.samples_sequences.shape[1]
        fit = [{k: s[p] for k, p in self.step.input_names} for s in self.samples[:len(probe) * steps]]
        pair, rounding = self._weight_rounding(pair, calibrated, ties, fit, (probe, want), (held, want_held))
        self.log(f"auto: choosing int8 or 16x8 per op for an error <= {self.max_error:g} on {len(probe)} sequences")
        plan, mixed_model, checks, budget = self._plan(pair, probe, held, want, want_held)
        split: list[str] = []
        # where all int16 missed: on the planning sequences, or (when held-out ones exist) on those
        whole_int16 = (f"l2r {plan.int16_error:.4f}, {checks[-1]['held_out_l2r']:.4f} on {len(held)} "
                       f"{self.held_what}" if checks else f"l2r {plan.int16_error:.4f}")
        if not _plan_met(plan, checks, self.max_error) and plan.int16_ops == pair.can_int16():
            # the ops whose weights' rounding alone costs the most (a share of the budget) first, then all
            x_key, y_key = self.step.input_names[0][0], self.output_keys[0]
            base = mixed.run_quantized(calibrated, probe, ties, x_key, y_key)
            errors = two_part.weight_errors(
                calibrated, lambda m: mixed.l2r(mixed.run_quantized(m, probe, ties, x_key, y_key), base))
            first = {n for n, e in errors.items() if e >= TWO_PART_SHARE * self.max_error} or set(list(errors)[:1])
            for only in [first] + ([set(errors)] if first != set(errors) else []):
                with warnings.catch_warnings(), tfenv.native_stderr_captured():
                    warnings.simplefilter("ignore")
                    parted, names = two_part.split(calibrated, keyed, only)
                if not names:
                    break
                self.log(f"auto: even int16 misses the budget; trying the weights of {len(names)} of "
                         f"{len(errors)} FULLY_CONNECTED op(s) in two int8 parts")
                try:
                    pair2 = self._pair(parted, ties)
                except mixed.MixedUnavailable:
                    break
                again = self._plan(pair2, probe, held, want, want_held)
                if _plan_error(again[0], again[2]) < _plan_error(plan, checks):
                    pair, (plan, mixed_model, checks, budget), split = pair2, again, names
                    rounding = None  # two parts start from TF's rounding
                if _plan_met(plan, checks, self.max_error):
                    break
        self.precision = mixed.precision_entry(pair, plan, mixed_model, self.max_error, probe)
        if checks:
            held_error = checks[-1]["held_out_l2r"]
            self.precision["held_out"] = {"sequences": len(held), "steps": int(held.shape[1]),
                                          "horizon": self.streams is not None, "l2r": held_error, "plans": checks}
            self.precision["met"] = _plan_met(plan, checks, self.max_error)
            if len(checks) > 1:
                self.precision["note"] = (f"planned again for l2r <= {budget:.4g}: the first plan reached "
                                          f"{checks[0]['held_out_l2r']:.4f} on {len(held)} "
                                          f"{self.held_what}")
            if not self.precision["met"] and plan.int16_ops == pair.can_int16():
                self.precision["note"] = (f"even int16 misses the budget {self.max_error:g} on {len(held)} "
                                          f"{self.held_what} (l2r {held_error:.4f})")
        self.precision["two_part_weights"] = split
        self.precision["weight_rounding"] = rounding or {"rounding": "nearest", "ops": []}
        if split:
            self.precision["note"] = "; ".join(filter(None, [
                f"even int16 missed the budget ({whole_int16}), so the weights of {len(split)} "
                f"FULLY_CONNECTED op(s) are in two int8 parts (int16 then {plan.int16_error:.4f})",
                self.precision.get("note")]))
        if not self.precision["met"]:
            reached = f"; l2r {checks[-1]['held_out_l2r']:.4f} on the {self.held_what}" if checks else ""
            self.warn(f"WARNING: --quant auto: {plan.note or 'the budget is missed'}{reached}; the step model "
                      "keeps the plan of least error found")
        for line in mixed.plan_lines(pair, plan):
            self.log(f"auto: {line}")
        model = tfl.read(mixed_model)
        y_dtype = tfl.tensor_quant(model, tfl.signature(model)[1]["y"])["dtype"]
        self.head_quant = y_dtype
        tied_model = tfl.read(pair.tied[y_dtype])
        y_range = tfl.get_min_max(tied_model, tfl.signature(tied_model)[1][self.output_keys[0]])
        return mixed_model, self.ys, y_range

    def _weight_rounding(self, pair, calibrated: bytes, ties: list[tuple[str, str]],
                         fit: list[dict[str, np.ndarray]], planning: tuple, held_out: tuple):
        """(pair, rounding): the pair of ``calibrated`` with its FULLY_CONNECTED weights in error-compensated
        rounding and their biases corrected (edgernn/tflite/rounding.py, fitted on the steps ``fit``), where
        all-int16 meets the budget with TF's rounding (on the planning sequences and the held-out ones, each a
        pair of sequences and the float model's outputs) and the compensated rounding lowers the error that
        matters there: all-int8's where either rounding lets int8 meet the budget (the plan is then int8), else
        all-int16's (the floor a mixed plan builds on). Else ``pair`` (TF's rounding) and None."""
        from edgernn.tflite import mixed, rounding

        def errors(p, sequences, want) -> tuple[float, float]:
            return tuple(mixed.budget_error(mixed.run_quantized(mixed.splice(p, ops), sequences, p.ties, p.x_key,
                                                                p.y_key), want) for ops in ([], p.can_int16()))

        (e8, e16), held = errors(pair, *planning), (errors(pair, *held_out) if len(held_out[0]) else None)
        if max(e16, held[1] if held else 0.0) > self.max_error:
            # a fitted correction is no remedy where the weights' rounding holds the error above the budget:
            # it holds less well on other sequences (docs/quantization.md); the two-part weights are
            return pair, None
        with warnings.catch_warnings(), tfenv.native_stderr_captured():
            warnings.simplefilter("ignore")
            compensated, names = rounding.compensate(calibrated, fit)
            if not names:
                return pair, None
            try:
                other = self._pair(compensated, ties)
            except mixed.MixedUnavailable:
                return pair, None

        c8, c16 = errors(other, *planning)
        dtype = 0 if min(e8, c8) <= self.max_error else 1
        better = (c8, c16)[dtype] < (e8, e16)[dtype]
        checked = ""
        if better and held:
            before, after = held[dtype], errors(other, *held_out)[dtype]
            better = after < before
            checked = f" ({('int8', 'int16')[dtype]} {before:.4f} -> {after:.4f} on {len(held_out[0])} other sequences)"
        self.log(f"auto: weights of {len(names)} FULLY_CONNECTED op(s) in error-compensated rounding: int8 "
                 f"{e8:.4f} -> {c8:.4f}, int16 {e16:.4f} -> {c16:.4f}{checked}: " + ("kept" if better else "not kept"))
        if not better:
            return pair, None
        return other, {"rounding": "compensated", "ops": names,
                       "nearest": {"int8": e8, "int16": e16}, "compensated": {"int8": c8, "int16": c16}}

    def _auto_uniform(self, why, ties, probe: np.ndarray, held: np.ndarray, want: np.ndarray,
                      want_held: np.ndarray | None) -> tuple[bytes, np.ndarray, tuple[float, float] | None]:
        """--quant auto where no mixed model can be made (``why``, a mixed.MixedUnavailable): the uniform model,
        int8 where it meets the budget (on the planning and the held-out sequences), else int16 where that does,
        else the one of least error, with a warning."""
        from edgernn.tflite import mixed

        errors, worst = {}, {}
        for dtype, (data, _) in why.models.items():
            errors[dtype] = mixed.budget_error(mixed.run_quantized(data, probe, ties), want)
            worst[dtype] = errors[dtype]
            if want_held is not None:
                worst[dtype] = max(worst[dtype],
                                   mixed.budget_error(mixed.run_quantized(data, held, ties), want_held))
        meets = [d for d in ("int8", "int16") if d in worst and worst[d] <= self.max_error]
        chosen = meets[0] if meets else min(worst, key=worst.get)
        reach = f"error {errors[chosen]:.4f}" + (f", {worst[chosen]:.4f} with {len(held)} {self.held_what}"
                                                if want_held is not None else "")
        note = (f"{why}; the uniform {chosen} model ({reach}) " +
                ("meets the budget" if meets else f"misses the budget {self.max_error:g}, the least error of the two"))
        self.log(f"auto: {note}")
        if not meets:
            self.warn(f"WARNING: --quant auto: {note}")
        self.precision = mixed.uniform_entry({d: m for d, (m, _) in why.models.items()}, chosen, errors,
                                             self.max_error, bool(meets), probe, ties, note)
        self.precision["two_part_weights"] = []
        self.precision["weight_rounding"] = {"rounding": "nearest", "ops": []}
        self.head_quant = chosen
        tied_model = tfl.read(why.models[chosen][1])
        y_range = tfl.get_min_max(tied_model, tfl.signature(tied_model)[1][self.output_keys[0]])
        return why.models[chosen][0], self.ys, y_range

    def _pair(self, calibrated: bytes, ties: list[tuple[str, str]]):
        from edgernn.tflite import mixed

        keras_inputs = [k for k, _ in self.step.input_names]
        states = [name for name in self.step.state_names]
        return mixed.quantize_pair(calibrated, ties, keras_inputs[0], self.output_keys[0],
                                   rename=lambda data: _rename_for_run(data, self.step, self.output_keys),
                                   public=([(s, s) for s in states], "x", "y"))

    def _plan(self, pair, probe: np.ndarray, held: np.ndarray, want: np.ndarray, want_held: np.ndarray | None):
        """(plan, mixed model, held-out checks, last budget): the plan of least estimated cost for ``max_error``
        on ``probe``, checked on ``held`` and made again where it misses there."""
        from edgernn.tflite import mixed

        budget, checks = self.max_error, []
        while True:
            plan, mixed_model = mixed.plan_precision(pair, probe, want, budget, self.log,
                                                     cost=_plan_cost(self.board))
            if not len(held) or (not plan.met and not checks):
                break
            # the plan meets the budget on the sequences it was made on; the calibration's other sequences
            # check that it holds beyond them, and a plan that misses there is made again to a tighter budget
            held_error = mixed.budget_error(mixed.run_quantized(mixed_model, held, pair.ties), want_held)
            checks.append({"budget": budget, "l2r": plan.error, "held_out_l2r": held_error})
            if held_error <= self.max_error or not plan.met or len(checks) > HELD_OUT_RETRIES:
                break
            # tighter than what the plan reached where it was made: a budget above that would give the
            # same plan again
            budget = min(budget, plan.error) * self.max_error / held_error * 0.95
            self.log(f"auto: the plan reaches {held_error:.4f} on {len(held)} {self.held_what}, "
                     f"above {self.max_error:g}: planning again for {budget:.4g} on the first {len(probe)}")
        return plan, mixed_model, checks, budget

    @staticmethod
    def check_final(step_final: bytes) -> None:
        _check_ops(step_final, "the step model")

    def states(self, step_final: bytes, model) -> list[dict]:
        inputs, outputs = tfl.signature(model)
        states = []
        for (name, size, rnn) in self.plan.state_specs:
            entry_in, entry_out = _io_entry(model, name, inputs[name]), _io_entry(model, name, outputs[name])
            if (entry_in["scale"], entry_in["zero_point"]) != (entry_out["scale"], entry_out["zero_point"]):
                raise EdgeRNNError(f"state {name} ended with different quantization at input and output")
            states.append({**entry_in, "layer": rnn.name, "size": size})
        return states

    @staticmethod
    def state_feedback(states: list[dict]) -> dict:
        return {s["name"]: s["name"] for s in states}

    @staticmethod
    def extra_files(step_final: bytes, states: list[dict], sequences: np.ndarray, staging: Path) -> dict:
        return {}


def _plan_cost(board_name: str | None):
    """What --quant auto weighs a plan by: a mixed step model's estimated (cycles per step, weight and arena
    bytes), from the C backend's lowering (edgernn/backend/cost.py) with the team of ``board_name``'s board
    (one core without a board); None for a model the backend cannot lower."""
    from edgernn.backend.cost import estimate_step_cost

    board = None
    if board_name is not None:
        from edgernn.targets.board import load_board

        board = load_board(board_name)

    def cost(step: bytes) -> tuple[int, int] | None:
        try:
            c = estimate_step_cost(step, board=board)
        except EdgeRNNError:
            return None
        return c.cycles_per_step, c.bytes
    return cost


class FusedStrategy:
    """One UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM, one invoke per time step, the states in its variable tensors."""

    mode = "fused"
    head_quant = None
    max_error = DEFAULT_MAX_ERROR
    board: str | None = None     # the board a build is for: the cost --quant auto weighs plans by

    streams: np.ndarray | None = None   # the calibration windows chained to the horizon (Calibration.streams)
    has_state = True

    def __init__(self, loaded: LoadedModel, plan: Plan, log: Log):
        self.loaded, self.plan, self.log = loaded, plan, log
        self.fused_states_io = None
        self.precision = None
        self.warn = log

    def build_float(self) -> bytes:
        self.log("rebuilding the model in tf_keras for the fused LSTM op")
        with warnings.catch_warnings(), tfenv.native_stderr_captured():
            warnings.simplefilter("ignore")
            self.fused_keras = fused_rebuild.build_fused_keras(self.plan, self.plan.features)
        self.log("converting to TFLite (float32)")
        fused_float = _convert_float(self.fused_keras)
        sequence_lstm.check_fused_ops(fused_float, len(self.plan.recurrent))
        return sequence_lstm.keras_lstm_options(fused_float, fused_rebuild.lstm_activations(self.plan))

    def trajectories(self, step_float: bytes, sequences: np.ndarray) -> dict:
        """Whole sequences, each from a zero state: the op's state stays inside it. The horizon's streams too."""
        self.picked = sequence_lstm.calibration_sequences(sequences)
        self.picked_streams = (sequence_lstm.calibration_sequences(self.streams) if self.streams is not None
                               else sequences[:0])
        whole = [*self.picked, *self.picked_streams]
        return {"samples": int(sum(len(s) for s in whole)), "whole_sequences": len(whole),
                "horizon_streams": len(self.picked_streams)}

    @staticmethod
    def run_float(step_float: bytes, probe: np.ndarray) -> np.ndarray:
        ys, _ = FusedStepper(step_float, {}).run(probe)
        return ys

    @staticmethod
    def self_check_refusal(rel: float) -> str:
        return f"the fused float model differs from the Keras model by {rel:.2e} (relative); use --mode step"

    def quantize(self, step_float: bytes, quant: str,
                 with_head: bool) -> tuple[bytes, np.ndarray | None, tuple[float, float] | None]:
        if quant == "auto":
            # TFLite's fused LSTM has no 16x8 form: auto is int8 here
            self.precision = {"max_error": self.max_error, "plan": "int8",
                              "note": "fused LSTM: TFLite has no 16x8 form of the fused op, so auto is int8; "
                                      "use --mode step for a per-op int8/int16 plan"}
            quant = self.head_quant = "int8"
        self.log(f"calibrating on {len(self.picked)} whole sequences and quantizing to {quant}")
        with _quantization_failure(quant, self.plan):
            calibrated = sequence_lstm.calibrate_on_trajectories(_converter(self.fused_keras),
                                                                 [*self.picked, *self.picked_streams])
            quantized = quantize_calibrated(calibrated, quant)
        sequence_lstm.check_fused_ops(quantized, len(self.plan.recurrent))
        ys = y_range = None
        if with_head:
            ys, _ = FusedStepper(step_float, {}).run(self.picked)
            if len(self.picked_streams):
                more, _ = FusedStepper(step_float, {}).run(self.picked_streams)
                ys = np.concatenate([ys.reshape(-1, ys.shape[-1]), more.reshape(-1, more.shape[-1])])
            calibrated_model = tfl.read(calibrated)
            y_range = tfl.get_min_max(calibrated_model, tfl.signature(calibrated_model)[1]["y"])
        return quantized, ys, y_range

    def check_final(self, step_final: bytes) -> None:
        sequence_lstm.check_fused_ops(step_final, len(self.plan.recurrent))

    def states(self, step_final: bytes, model) -> list[dict]:
        self.found = sequence_lstm.state_tensors(step_final, [rnn.name for rnn in self.plan.recurrent])
        states = []
        for name, index, layer in self.found:
            entry = _io_entry(model, name, index)
            states.append({**entry, "layer": layer, "size": int(np.prod(entry["shape"])), "variable": True,
                           "tensor": index})
        return states

    @staticmethod
    def state_feedback(states: list[dict]) -> dict:
        return {}  # the op updates its variable tensors in place

    def extra_files(self, step_final: bytes, states: list[dict], sequences: np.ndarray, staging: Path) -> dict:
        """fused_states_io.tflite, when it gives step.tflite's exact bytes."""
        states_io = sequence_lstm.states_as_io(step_final, self.found)
        why_not_io = _check_states_io(step_final, states_io, states, sequences[:2, :32])
        if why_not_io is not None:
            self.log(f"fused_states_io.tflite not written: {why_not_io}")
            self.fused_states_io = {"written": False, "why": why_not_io}
            return {}
        (staging / "fused_states_io.tflite").write_bytes(states_io)
        return {"fused_states_io": "fused_states_io.tflite"}


def _head_entry(staging: Path, head_final: bytes | None, model, outputs: dict, quant: str) -> tuple[dict | None, int]:
    """Write head.tflite and describe it; its input must carry the step output's quantization."""
    if head_final is None:
        return None, 0
    (staging / "head.tflite").write_bytes(head_final)
    hmodel = tfl.read(head_final)
    hin, hout = tfl.signature(hmodel)
    head_entry = {
        "file": "head.tflite",
        "input": _io_entry(hmodel, "h", hin["h"]),
        "output": _io_entry(hmodel, "y", next(iter(hout.values()))),
        "ops": sorted(set(tfl.op_names(hmodel))),
    }
    y_entry = _io_entry(model, "y", outputs["y"])
    if quant != "float32" and (head_entry["input"]["scale"], head_entry["input"]["zero_point"]) != (
            y_entry["scale"], y_entry["zero_point"]):
        raise EdgeRNNError("the head model's input did not get the step output's quantization")
    return head_entry, tfl.macs(hmodel)


def _check_states_io(stepwise: bytes, states_io: bytes, states: list[dict], probe: np.ndarray) -> str | None:
    """None when the states-as-I/O form gives the stepwise form's exact bytes over probe, else why not."""
    from edgernn.tflite.oracle import quantize

    x_entry = tfl.tensor_quant(tfl.read(stepwise), tfl.signature(tfl.read(stepwise))[0]["x"])
    xq = quantize(probe.astype(np.float32), x_entry)
    want_y, want_states = FusedStepper(stepwise, {s["name"]: s["tensor"] for s in states}).run(xq)
    try:
        runner = _interp(states_io).get_signature_runner()
        for i, seq in enumerate(xq):
            state = {s["name"]: quantize(np.zeros(s["shape"], np.float32), s) for s in states}
            for t, x in enumerate(seq):
                result = runner(x=x.reshape(x_entry["shape"]), **state)
                state = {name: np.array(result[name]) for name in state}
                if not np.array_equal(np.array(result["y"]).reshape(-1), want_y[i, t]) or any(
                        not np.array_equal(state[n].reshape(-1), want_states[n][i, t]) for n in state):
                    return f"it differs from step.tflite at sequence {i}, step {t}"
    except Exception as exc:  # the interpreter refusing the edited graph is an answer, not a bug
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"the interpreter refuses it ({first})"
    return None


def _rename_for_run(data: bytes, step: StepModel, output_keys: list[str]) -> bytes:
    """Signature keys renamed to the public names (x, y, <layer>.<state>)."""
    model = tfl.read(data)
    sig = model.signatureDefs[0]
    by_key = {tfl._text(t.name): t for t in sig.outputs}
    new_outputs = []
    for key, public in zip(output_keys, step.output_names):
        entry = type(by_key[key])()
        entry.name = public
        entry.tensorIndex = by_key[key].tensorIndex
        new_outputs.append(entry)
    sig.outputs = new_outputs
    for entry in sig.inputs:
        entry.name = dict(step.input_names).get(tfl._text(entry.name), tfl._text(entry.name))
    return tfl.write(model)


def _quantize_head(head_model: Any, ys: np.ndarray, y_range: tuple[float, float] | None, quant: str,
                   plan: Plan) -> bytes:
    """The head quantized on the step outputs it will really see, its input tied to the step output."""
    flat = ys.reshape(-1, ys.shape[-1])
    picks = np.linspace(0, len(flat) - 1, min(len(flat), 2000)).astype(int)
    samples = [{"h": flat[i : i + 1]} for i in picks]
    try:
        with warnings.catch_warnings(), tfenv.native_stderr_captured():
            warnings.simplefilter("ignore")
            calibrated = calibrate(_converter(head_model), samples)
        model = tfl.read(calibrated)
        inputs, outputs = tfl.signature(model)
        if y_range is not None:
            tfl.set_min_max(model, inputs["h"], *y_range)
        quantized = quantize_calibrated(tfl.write(model), quant)
    except EdgeRNNError:
        raise
    except Exception as exc:
        raise explain_quantization_failure(exc, quant, _layers_by_op(plan)) from None
    return _name_head_output(quantized)


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


def _run_head_quantized(head: bytes, hs: np.ndarray) -> np.ndarray:
    """A quantized head over the step outputs ``hs`` (their integer codes): its dequantized outputs."""
    from edgernn.tflite.oracle import dequantize

    model = tfl.read(head)
    inputs, outputs = tfl.signature(model)
    out_entry = tfl.tensor_quant(model, outputs["y"])
    runner = _interp(head).get_signature_runner()
    shape = runner.get_input_details()["h"]["shape"]
    return np.asarray([dequantize(np.asarray(runner(h=h.reshape(shape))["y"]).reshape(-1), out_entry) for h in hs])


def _auto_head(strategy, head_model, head_ys, y_range, plan: Plan, step_float: bytes, head_float: bytes,
               step_final: bytes, head8: bytes, sequences: np.ndarray, log: Log) -> bytes:
    """--quant auto with a last-step head behind an int8 step output: the head in 16x8 behind a QUANTIZE from the
    step's int8 output, unless the int8 head gives the model's output (on the horizon's streams, else the
    calibration windows) less error. The head runs once a sequence, so its 16 bits cost next to nothing; an int8
    output is one part in 256 of its range, which alone can be a budget's worth. precision["head"] says which."""
    from edgernn.tflite import mixed
    from edgernn.tflite.oracle import quantize

    judged = (strategy.streams[:HELD_OUT_SEQUENCES] if strategy.streams is not None else
              sequences[:PLAN_SEQUENCES + HELD_OUT_SEQUENCES])
    # the model's output as validate compares it: the head on the last step's output, float against quantized
    ties = [(n, n) for n in strategy.step.state_names]
    want = _run_head(head_float, mixed.run_quantized(step_float, judged, ties)[:, -1])[:, None, :]
    model = tfl.read(step_final)
    y_codes = quantize(mixed.run_quantized(step_final, judged, ties)[:, -1],
                       tfl.tensor_quant(model, tfl.signature(model)[1]["y"]))

    def error(head: bytes) -> float:
        return mixed.budget_error(_run_head_quantized(head, y_codes)[:, None, :], want)

    e8 = error(head8)
    head16 = _head_behind_seam(_quantize_head(head_model, head_ys, y_range, "int16", plan), step_final)
    e16 = error(head16)
    log(f"auto: the model's output (the head on the last step) has an error of {e8:.4f} with an int8 head, "
        f"{e16:.4f} with a 16x8 one behind a seam")
    on = f"the last step of {len(judged)} {'streams' if strategy.streams is not None else 'calibration sequences'}"
    if e16 <= e8:
        strategy.precision["head"] = {"dtype": "int16", "input": "int8", "error": e16, "int8_error": e8, "on": on}
        return head16
    strategy.precision["head"] = {"dtype": "int8", "error": e8, "int16_error": e16, "on": on}
    return head8


def _head_behind_seam(head16: bytes, step_final: bytes) -> bytes:
    """The 16x8 head taking the step's int8 output: a QUANTIZE int8 -> int16 before its first op, the int8 input
    tensor at the step output's quantization (the device hands the head the step's y bytes as they are)."""
    from edgernn.tflite.model import schema as S

    step = tfl.read(step_final)
    y = step.subgraphs[0].tensors[tfl.signature(step)[1]["y"]]
    model = tfl.read(head16)
    graph = model.subgraphs[0]
    inputs, _ = tfl.signature(model)
    old = inputs["h"]
    t = S.TensorT()
    t.name, t.type = b"h.int8", S.TensorType.INT8
    t.shape = np.array(graph.tensors[old].shape, dtype=np.int32)
    buf = S.BufferT()
    model.buffers.append(buf)
    t.buffer = len(model.buffers) - 1
    q = S.QuantizationParametersT()
    q.scale = np.array(y.quantization.scale, dtype=np.float32)
    q.zeroPoint = np.array(y.quantization.zeroPoint, dtype=np.int64)
    t.quantization = q
    graph.tensors.append(t)
    new = len(graph.tensors) - 1
    op = S.OperatorT()
    op.opcodeIndex = tfl.opcode(model, S.BuiltinOperator.QUANTIZE, 3)
    op.inputs = np.array([new], dtype=np.int32)
    op.outputs = np.array([old], dtype=np.int32)
    graph.operators.insert(0, op)
    graph.inputs = np.array([new if int(i) == old else int(i) for i in graph.inputs], dtype=np.int32)
    for item in model.signatureDefs[0].inputs:
        if int(item.tensorIndex) == old:
            item.tensorIndex = new
    return tfl.write(model)


def _name_head_output(data: bytes) -> bytes:
    model = tfl.read(data)
    _, outs = tfl.signature(model)
    tfl.rename_signature(model, inputs={}, outputs={next(iter(outs)): "y"})
    return tfl.write(model)
