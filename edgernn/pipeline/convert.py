"""``edgernn convert``: a Keras RNN model to a stateful single-step TFLite model and its manifest.

Everything is built in a temporary folder beside OUT and renamed into place at the end, so a
failure leaves OUT as it was. One pipeline makes the step model for both paths: single-step cells
(``StepStrategy``) and the fused LSTM op (``FusedStrategy``); ``--quant auto``'s search is
edgernn/tflite/auto_quant.py's.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn import tfenv
from edgernn._version import __version__
from edgernn.errors import EdgeRNNError
from edgernn.keras import fused_rebuild
from edgernn.keras.decompose import Plan, decompose
from edgernn.keras.describe import layer_rows
from edgernn.keras.fused_rebuild import diagnose
from edgernn.keras.load import LoadedModel
from edgernn.keras.stepmodel import build_step_model, sixteen_bit_forms
from edgernn.outdir import BuildFolder, Manifest
from edgernn.pytorch.load import load_any
from edgernn.tflite import model as tfl
from edgernn.tflite import sequence_lstm
from edgernn.tflite.auto_quant import AutoSearch, StepKeys, choose_head
from edgernn.tflite.keras_converter import (
    check_16x8_ops, check_plain_ops, convert_float, converter, float_head, float_self_check, match_outputs,
    quantization_failure, quantize_head,
)
from edgernn.tflite.mixed import DEFAULT_MAX_ERROR, budget_error_of, check_max_error, quantization_error
from edgernn.tflite.oracle import Stepper
from edgernn.tflite.quantize import (
    QUANT_MODES, Calibration, calibrate, calibration_for, calibration_subset, check_horizon, horizon_widened,
    quantize_calibrated, quantize_with_tied_states, run_step_sequences,
)

MODES = ("step", "fused", "auto")
# --quant auto: int8 and 16x8 per op, the plan of least estimated cost that keeps l2r within --max-error
QUANTS = (*QUANT_MODES, "auto")

Log = Callable[[str], None]
QUANT_WARN_L2R = 0.1
# The float twins of a quantized build: the same step model (and head) in float32, which validate runs
# beside the device to measure the quantization error step by step, in constant memory.
FLOAT_STEP, FLOAT_HEAD = "float_step.tflite", "float_head.tflite"


def _quiet(_: str) -> None:
    pass


@dataclass
class Settings:
    """What a conversion was asked for, beyond the model and its calibration."""

    quant: str
    max_error: float = DEFAULT_MAX_ERROR
    board: str | None = None     # the board a build is for: the cost --quant auto weighs plans by
    log: Log = _quiet
    warn: Log = _quiet


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
    settings = Settings(quant, max_error, board, log, warn)
    folder = BuildFolder(out)
    with folder.staged() as staging:
        log("loading model")
        loaded = load_any(model, unsafe=unsafe, roll=roll)
        plan = decompose(loaded.model, loaded.flavour)
        diagnosis = diagnose(plan, "int8" if quant == "auto" else quant, mode)
        for line in diagnosis.lines():
            log(f"plan: {line}")
        calibration = calibration_for(calib, plan.input_shape, quant, warn)
        calibration.horizon = horizon
        manifest = _staged_manifest(staging, loaded, plan, diagnosis, calibration, mode, settings)
        return folder.commit(staging, manifest)


def _staged_manifest(staging: Path, loaded: LoadedModel, plan: Plan, diagnosis, calibration: Calibration, mode: str,
                     settings: Settings) -> Manifest:
    """The step model of ``diagnosis``'s path in ``staging``, with its head and float twins, and its manifest."""
    quant, max_error, log = settings.quant, settings.max_error, settings.log
    while True:
        manifest = _run_strategy(_strategy(diagnosis, loaded, plan, settings), calibration, staging)
        # what --max-error bounds, on the calibration windows and the horizon's streams
        reached = budget_error_of(manifest.quantization_error) if quant != "float32" else 0.0
        if not (quant == "auto" and mode == "auto" and diagnosis.fused and reached > max_error):
            break
        # the fused LSTM has no 16x8 form: an int8 fused model that misses the budget gives way to step
        # cells, where the plan can take ops into int16
        log(f"auto: the fused int8 model misses the budget ({reached:.4f} > {max_error:g}); "
            "building step cells for a per-op int8/int16 plan")
        BuildFolder.clear(staging)
        diagnosis = diagnose(plan, "int8", "step")
        why = (f"--quant auto: the fused op has no 16x8 form, and its int8 model misses the budget "
               f"({reached:.4f} > {max_error:g})")
        diagnosis.mode = mode
        diagnosis.paths = [dataclasses.replace(p, why=why) for p in diagnosis.paths]
    manifest.board = settings.board
    manifest.mode_requested = mode
    manifest.rnn_paths = [p.as_dict() for p in diagnosis.paths]
    if quant != "float32":
        l2r = manifest.quantization_error["l2r"]
        if manifest.precision is not None and "error" not in manifest.precision:
            manifest.precision["error"] = reached
            manifest.precision["met"] = reached <= max_error
        if l2r > QUANT_WARN_L2R:
            settings.warn(f"WARNING: the {quant} step model is far from the float model on the calibration sequences "
                          f"(l2r {l2r:.3f}); check the calibration data, or use a wider --quant")
    if quant == "float32":
        (staging / FLOAT_STEP).unlink(missing_ok=True)  # step.tflite is the float model itself
    else:
        manifest.files["float_step"] = FLOAT_STEP
        if (staging / FLOAT_HEAD).is_file():
            manifest.files["float_head"] = FLOAT_HEAD
    manifest.layers = layer_rows(plan, diagnosis)
    return manifest


def _strategy(diagnosis, loaded: LoadedModel, plan: Plan, settings: Settings) -> "StepStrategy | FusedStrategy":
    return (FusedStrategy if diagnosis.fused else StepStrategy)(loaded, plan, settings)


def _run_strategy(strategy: "StepStrategy | FusedStrategy", calibration: Calibration, staging: Path) -> Manifest:
    """The step model of ``strategy`` in ``staging``, and its manifest, with its precision and, quantized, its error
    against the float model on the calibration sequences (and the horizon's streams)."""
    manifest = _run_pipeline(strategy, calibration, staging)
    manifest.precision = strategy.precision
    if strategy.quant != "float32":
        manifest.quantization_error = quantization_error(staging, manifest, FLOAT_STEP, calibration.sequences)
        if strategy.streams is not None:
            manifest.quantization_error["horizon"] = quantization_error(staging, manifest, FLOAT_STEP,
                                                                        strategy.streams, "streams")
    return manifest


# ---------------------------------------------------------------- one pipeline, two strategies

def _run_pipeline(strategy: "StepStrategy | FusedStrategy", calibration: Calibration, staging: Path) -> Manifest:
    """Build float, self-check, calibrate, quantize, describe: the strategy makes the step model, the
    head (the layers that run on the step output) and the manifest are the same for both."""
    loaded, plan, quant, log = strategy.loaded, strategy.plan, strategy.quant, strategy.log
    step_float = strategy.build_float()
    head_model, head_float = float_head(plan, loaded.keras)

    sequences = calibration.sequences
    # the horizon's streams, for a model that carries a state (a stateless one has nothing to drift)
    strategy.streams = calibration.streams() if strategy.has_state else None
    calibration_facts = strategy.trajectories(step_float, sequences)
    self_check = float_self_check(plan, strategy.run_float, step_float, head_float, sequences, loaded.source)
    if self_check is not None and self_check > 1e-4:
        raise EdgeRNNError(strategy.self_check_refusal(self_check))

    (staging / FLOAT_STEP).write_bytes(step_float)
    if head_float is not None and quant != "float32":
        (staging / FLOAT_HEAD).write_bytes(head_float)
    if quant == "float32":
        step_final, head_final = step_float, head_float
    else:
        step_final, head_ys, y_range = strategy.quantize(step_float, head_float is not None)
        head_final = None
        if head_float is not None:
            head_final = quantize_head(head_model, head_ys, y_range, strategy.head_quant or quant, plan)
            if (quant == "auto" and strategy.mode == "step" and strategy.precision is not None
                    and strategy.head_quant == "int8"):
                head_final, strategy.precision["head"] = choose_head(
                    step_float, head_float, step_final, head_final,
                    lambda: quantize_head(head_model, head_ys, y_range, "int16", plan),
                    strategy.step.state_names, sequences, strategy.streams, log)

    model = tfl.read(step_final)   # the step model, read once: what the manifest describes
    strategy.check_final(step_final, model)
    inputs, outputs = tfl.signature(model)
    x_entry, y_entry = tfl.io_entry(model, "x", inputs["x"]), tfl.io_entry(model, "y", outputs["y"])
    states = strategy.states(step_final, model)
    (staging / "step.tflite").write_bytes(step_final)
    files = {"step": "step.tflite", **strategy.extra_files(step_final, x_entry, states, sequences, staging)}
    head_entry, head_macs = None, 0
    if head_final is not None:
        (staging / "head.tflite").write_bytes(head_final)
        head_entry, head_macs = tfl.head_entry(head_final, y_entry, tied=(strategy.head_quant or quant) != "float32")
        files["head"] = "head.tflite"
    return Manifest(
        edgernn_version=__version__,
        tool_versions=tfenv.versions(),
        model_file=str(loaded.path) if loaded.path else None,
        model_sha256=loaded.sha256,
        keras=loaded.flavour,
        source=loaded.source_entry(),
        quant=quant,
        mode=strategy.mode,
        sequence_output="every_step" if plan.head_per_step else "last_step",
        inputs=[x_entry],
        outputs=[y_entry],
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


class StepStrategy:
    """Single-step cells: the states are inputs and outputs of the step model, fed back by the caller."""

    mode = "step"
    fused_states_io = None

    def __init__(self, loaded: LoadedModel, plan: Plan, settings: Settings):
        self.loaded, self.plan = loaded, plan
        self.quant, self.max_error, self.board = settings.quant, settings.max_error, settings.board
        self.log, self.warn = settings.log, settings.warn
        self.precision: dict | None = None
        self.head_quant: str | None = None  # the head's quantization when it is not --quant (auto: the step output's)
        self.streams: np.ndarray | None = None   # the calibration windows chained to the horizon

    @property
    def has_state(self) -> bool:
        return bool(self.step.state_names)

    def without_division(self):
        """At int16 and auto, the step model's forms that TF's 16x8 quantizer can take (an LTC without division,
        a LayerNormalization without NEG): active while the step model is traced, converted and calibrated."""
        return sixteen_bit_forms(self.plan, active=self.quant in ("int16", "auto"))

    def build_float(self) -> bytes:
        self.log("building the step model")
        with self.without_division():
            self.step = build_step_model(self.plan, self.loaded.keras)
            keras_inputs = [k for k, _ in self.step.input_names]
            self.log("converting to TFLite (float32)")
            step_float = convert_float(self.step.keras_model)
        check_plain_ops(tfl.read(step_float), "the step model")
        output_keys = match_outputs(step_float, self.step.keras_model, keras_inputs)
        self.keys = StepKeys(inputs=list(self.step.input_names), outputs=output_keys,
                             state_names=list(self.step.state_names), public=self._public)
        return self._public(step_float)

    def _public(self, data: bytes) -> bytes:
        """Signature keys renamed to the public names (x, y, <layer>.<state>)."""
        return tfl.with_signature_keys(data, dict(self.step.input_names),
                                       list(zip(self.keys.outputs, self.step.output_names)))

    def trajectories(self, step_float: bytes, sequences: np.ndarray) -> dict:
        """Run the float step model over the calibration sequences, and over the horizon's streams: the real
        trajectories, whose steps give the ranges (the windows' first, then the streams') and the outputs the
        head is quantized on."""
        self.log("running the float step model over the calibration sequences")
        self.samples, self.ys = run_step_sequences(step_float, sequences, self.step.state_names)
        self.sequences = sequences
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

    def quantize(self, step_float: bytes, with_head: bool) -> tuple[bytes, np.ndarray, tuple[float, float] | None]:
        """The quantized step model, its states' ranges tied, and the step outputs and y range the head
        is quantized on."""
        quant = self.quant
        if quant in ("int16", "auto"):
            check_16x8_ops(step_float, quant, self.plan)
        self.log(f"calibrating on {len(self.samples)} recorded steps and quantizing to {quant}")
        keyed = self.keys.feed(calibration_subset(self.samples))
        with quantization_failure(quant, self.plan):
            with warnings.catch_warnings(), tfenv.native_stderr_captured():
                warnings.simplefilter("ignore")
                with self.without_division():
                    calibrated = calibrate(converter(self.step.keras_model), keyed)
            if quant == "auto":
                search = AutoSearch(step_float, calibrated, self.keys, self.sequences, self.samples, self.streams,
                                    max_error=self.max_error, cost=_plan_cost(self.board), log=self.log,
                                    warn=self.warn)
                chosen = search.run(keyed)
                self.precision, self.head_quant = chosen.precision, chosen.y_dtype
                return chosen.model, self.ys, chosen.y_range
            quantized, tied = quantize_with_tied_states(calibrated, self.keys.ties, quant)
        tied_model = tfl.read(tied)
        y_range = tfl.get_min_max(tied_model, tfl.signature(tied_model)[1][self.keys.outputs[0]])
        return self._public(quantized), self.ys, y_range

    @staticmethod
    def check_final(step_final: bytes, model) -> None:
        check_plain_ops(model, "the step model")

    def states(self, step_final: bytes, model) -> list[dict]:
        inputs, outputs = tfl.signature(model)
        states = []
        for (name, size, rnn) in self.plan.state_specs:
            entry_in, entry_out = tfl.io_entry(model, name, inputs[name]), tfl.io_entry(model, name, outputs[name])
            if (entry_in["scale"], entry_in["zero_point"]) != (entry_out["scale"], entry_out["zero_point"]):
                raise EdgeRNNError(f"state {name} ended with different quantization at input and output")
            states.append({**entry_in, "layer": rnn.name, "size": size})
        return states

    @staticmethod
    def state_feedback(states: list[dict]) -> dict:
        return {s["name"]: s["name"] for s in states}

    @staticmethod
    def extra_files(step_final: bytes, x_entry: dict, states: list[dict], sequences: np.ndarray,
                    staging: Path) -> dict:
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
    has_state = True

    def __init__(self, loaded: LoadedModel, plan: Plan, settings: Settings):
        self.loaded, self.plan = loaded, plan
        self.quant, self.max_error = settings.quant, settings.max_error
        self.log, self.warn = settings.log, settings.warn
        self.fused_states_io = None
        self.precision: dict | None = None
        self.head_quant: str | None = None
        self.streams: np.ndarray | None = None   # the calibration windows chained to the horizon

    def build_float(self) -> bytes:
        self.log("rebuilding the model in tf_keras for the fused LSTM op")
        with warnings.catch_warnings(), tfenv.native_stderr_captured():
            warnings.simplefilter("ignore")
            self.fused_keras = fused_rebuild.build_fused_keras(self.plan, self.plan.features)
        self.log("converting to TFLite (float32)")
        fused_float = convert_float(self.fused_keras)
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
        return Stepper(step_float).run(probe).y

    @staticmethod
    def self_check_refusal(rel: float) -> str:
        return f"the fused float model differs from the Keras model by {rel:.2e} (relative); use --mode step"

    def quantize(self, step_float: bytes,
                 with_head: bool) -> tuple[bytes, np.ndarray | None, tuple[float, float] | None]:
        quant = self.quant
        if quant == "auto":
            # TFLite's fused LSTM has no 16x8 form: auto is int8 here
            self.precision = {"max_error": self.max_error, "plan": "int8",
                              "note": "fused LSTM: TFLite has no 16x8 form of the fused op, so auto is int8; "
                                      "use --mode step for a per-op int8/int16 plan"}
            quant = self.head_quant = "int8"
        self.log(f"calibrating on {len(self.picked)} whole sequences and quantizing to {quant}")
        with quantization_failure(quant, self.plan):
            calibrated = sequence_lstm.calibrate_on_trajectories(converter(self.fused_keras),
                                                                 [*self.picked, *self.picked_streams])
            quantized = quantize_calibrated(calibrated, quant)
        sequence_lstm.check_fused_ops(quantized, len(self.plan.recurrent))
        ys = y_range = None
        if with_head:
            ys = Stepper(step_float).run(self.picked).y
            if len(self.picked_streams):
                more = Stepper(step_float).run(self.picked_streams).y
                ys = np.concatenate([ys.reshape(-1, ys.shape[-1]), more.reshape(-1, more.shape[-1])])
            calibrated_model = tfl.read(calibrated)
            y_range = tfl.get_min_max(calibrated_model, tfl.signature(calibrated_model)[1]["y"])
        return quantized, ys, y_range

    def check_final(self, step_final: bytes, model) -> None:
        sequence_lstm.check_fused_ops(step_final, len(self.plan.recurrent))

    def states(self, step_final: bytes, model) -> list[dict]:
        self.found = sequence_lstm.state_tensors(step_final, [rnn.name for rnn in self.plan.recurrent])
        states = []
        for name, index, layer in self.found:
            entry = tfl.io_entry(model, name, index)
            states.append({**entry, "layer": layer, "size": int(np.prod(entry["shape"])), "variable": True,
                           "tensor": index})
        return states

    @staticmethod
    def state_feedback(states: list[dict]) -> dict:
        return {}  # the op updates its variable tensors in place

    def extra_files(self, step_final: bytes, x_entry: dict, states: list[dict], sequences: np.ndarray,
                    staging: Path) -> dict:
        """fused_states_io.tflite, when it gives step.tflite's exact bytes."""
        states_io = sequence_lstm.states_as_io(step_final, self.found)
        why_not_io = sequence_lstm.check_states_io(step_final, x_entry, states_io, states, sequences[:2, :32])
        if why_not_io is not None:
            self.log(f"fused_states_io.tflite not written: {why_not_io}")
            self.fused_states_io = {"written": False, "why": why_not_io}
            return {}
        (staging / "fused_states_io.tflite").write_bytes(states_io)
        return {"fused_states_io": "fused_states_io.tflite"}
