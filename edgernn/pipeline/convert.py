"""``edgernn convert``: a Keras RNN model to a stateful single-step TFLite model and its manifest.

Everything is built in a temporary folder beside OUT and renamed into place at the end, so a
failure leaves OUT as it was.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn import tfenv
from edgernn._version import __version__
from edgernn.tflite import model as tfl
from edgernn.outdir import MANIFEST, BuildFolder
from edgernn.keras.decompose import Plan, decompose
from edgernn.errors import EdgeRNNError
from edgernn.keras.fused import diagnose
from edgernn.pipeline.inspect import layer_rows
from edgernn.keras.load import LoadedModel, load_model
from edgernn.tflite.quantize import (
    QUANT_MODES, Calibration, calibrate, calibration_subset, check_sequences, explain_quantization_failure,
    load_sequences, quantize_calibrated, quantize_with_tied_states, run_step_sequences, synthetic_calibration,
)
from edgernn.keras.stepmodel import StepModel, build_head_model, build_step_model

MODES = ("step", "fused", "auto")
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

def keras_reference(model: Any, sequences: np.ndarray) -> np.ndarray | None:
    """The original model's own output on sequences, or None when its input length is fixed otherwise."""
    batch, steps = model.inputs[0].shape[0], model.inputs[0].shape[1]
    if steps is not None and int(steps) != sequences.shape[1]:
        return None
    stateful = [layer for layer in model.layers if getattr(layer, "stateful", False)]
    if batch is not None and int(batch) != 1 and (stateful or int(batch) != len(sequences)):
        return None
    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        if not stateful and (batch is None or int(batch) == len(sequences)):
            return np.asarray(model(sequences, training=False), np.float32)
        # a fixed batch of one (a stateful model): one sequence at a time, each from zero state
        outputs = []
        for sequence in sequences:
            for layer in stateful:
                layer.reset_states()
            outputs.append(np.asarray(model(sequence[None], training=False), np.float32))
        for layer in stateful:
            layer.reset_states()
        return np.concatenate(outputs)


def _float_self_check(plan: Plan, step_float: bytes, head_float: bytes | None, step_keys: list[str] | None,
                      sequences: np.ndarray) -> float | None:
    """Largest relative error of the float step model against the Keras model on a few sequences.

    ``step_keys`` None means a fused step model (its states in variable tensors)."""
    probe = sequences[: min(4, len(sequences)), : min(64, sequences.shape[1])]
    want = keras_reference(plan.model, probe)
    if want is None:
        return None
    if step_keys is None:
        from edgernn.tflite.oracle import FusedStepper

        ys, _ = FusedStepper(step_float, {}).run(probe)
    else:
        _, ys = run_step_sequences(step_float, probe, step_keys)
    got = ys if plan.head_per_step else _run_head(head_float, ys[:, -1, :]) if head_float else ys[:, -1, :]
    got = got.reshape(want.shape)
    scale = max(float(np.max(np.abs(want))), 1e-6)
    return float(np.max(np.abs(got - want)) / scale)


def _run_head(head: bytes, hs: np.ndarray, key_in: str = "h", key_out: str | None = None) -> np.ndarray:
    runner = _interp(head).get_signature_runner()
    details = runner.get_input_details()
    out = []
    for h in hs:
        result = runner(**{key_in: h.reshape(details[key_in]["shape"]).astype(np.float32)})
        out.append(np.asarray(next(iter(result.values())) if key_out is None else result[key_out]).reshape(-1))
    return np.asarray(out, np.float32)


def quantization_error(folder: Path, manifest: dict, sequences: np.ndarray) -> dict:
    """The quantized step model against the float one, over (up to 8 of) the calibration sequences."""
    from edgernn.tflite.oracle import StepRunner

    probe = sequences[:8]
    runner = StepRunner(folder, manifest)
    got = runner.run(probe).y_float
    float_runner = _FloatTwin(folder, manifest)
    want = float_runner.y(probe)
    err = got - want
    norm = float(np.linalg.norm(want))
    return {
        "on": f"{len(probe)} calibration sequences of {probe.shape[1]} steps, per-step output y",
        "l2r": float(np.linalg.norm(err) / norm) if norm > 0 else 0.0,
        "rmse": float(np.sqrt(np.mean(err ** 2))),
        "max_abs": float(np.max(np.abs(err))),
    }


class _FloatTwin:
    """The float step model kept beside a quantized one while converting (float.tflite in staging)."""

    def __init__(self, folder: Path, manifest: dict):
        self.data = (folder / FLOAT_STEP).read_bytes()
        self.states = [s["name"] for s in manifest["states"]]
        self.fused = manifest.get("mode") == "fused"

    def y(self, sequences: np.ndarray) -> np.ndarray:
        if self.fused:
            from edgernn.tflite.oracle import FusedStepper

            ys, _ = FusedStepper(self.data, {}).run(sequences)
            return ys.astype(np.float32)
        _, ys = run_step_sequences(self.data, sequences, self.states)
        return ys


# ---------------------------------------------------------------- the command

def convert_model(
    model: Any,
    out: str | os.PathLike,
    *,
    quant: str = "int8",
    calib: Any = None,
    mode: str = "auto",
    unsafe: bool = False,
    board: str | None = None,
    log: Log | None = None,
    warn: Log | None = None,
) -> dict:
    """Convert ``model`` (a path or a Keras model) into ``out``/step.tflite and ``out``/manifest.json.

    ``calib`` is a (sequences, steps, features) array or the path of a .npy file holding one.
    ``mode``: ``step`` (single-step cells), ``fused`` (one UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM, refused
    with the reasons when the model does not allow it) or ``auto`` (fused where every RNN layer allows
    it, else step).
    Returns the manifest.
    """
    log = log or _quiet
    warn = warn or log
    if quant not in QUANT_MODES:
        raise EdgeRNNError(f"unknown --quant {quant!r}; choose one of {', '.join(QUANT_MODES)}")
    if mode not in MODES:
        raise EdgeRNNError(f"unknown --mode {mode!r}; choose one of {', '.join(MODES)}")
    folder = BuildFolder(out)
    with folder.staged() as staging:
        log("loading model")
        loaded = load_model(model, unsafe=unsafe)
        plan = decompose(loaded.model, loaded.flavour)
        diagnosis = diagnose(plan, quant, mode)
        for line in diagnosis.lines():
            log(f"plan: {line}")
        calibration = _calibration(calib, plan.features, quant, warn)
        if diagnosis.fused:
            manifest = _convert_fused_into(loaded, plan, calibration, quant, staging, log)
        else:
            manifest = _convert_into(loaded, plan, calibration, quant, staging, log)
        manifest["board"] = board
        manifest["mode_requested"] = mode
        manifest["rnn_paths"] = [p.as_dict() for p in diagnosis.paths]
        manifest["layers"] = layer_rows(plan, diagnosis)
        if quant != "float32":
            manifest["quantization_error"] = quantization_error(staging, manifest, calibration.sequences)
            l2r = manifest["quantization_error"]["l2r"]
            if l2r > QUANT_WARN_L2R:
                warn(f"WARNING: the {quant} step model is far from the float model on the calibration sequences "
                     f"(l2r {l2r:.3f}); check the calibration data, or use a wider --quant")
        if quant == "float32":
            (staging / FLOAT_STEP).unlink(missing_ok=True)  # step.tflite is the float model itself
        else:
            manifest["files"]["float_step"] = FLOAT_STEP
            if (staging / FLOAT_HEAD).is_file():
                manifest["files"]["float_head"] = FLOAT_HEAD
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return folder.commit(staging)


def _calibration(calib: Any, features: int, quant: str, warn: Log) -> Calibration:
    if calib is None:
        if quant != "float32":
            warn(
                "WARNING: no --calib data given. Quantization ranges come from synthetic standard-normal "
                "sequences, which are not what your model sees; pass --calib FILE.npy with real sequences "
                "(sequences, steps, features) for a trustworthy int8/int16 model."
            )
        return Calibration(synthetic_calibration(features), "synthetic")
    if isinstance(calib, (str, os.PathLike)):
        found = Calibration(load_sequences(calib, features), f"file:{Path(calib).name}")
    else:
        found = Calibration(check_sequences(calib, features, "calibration data"), "array")
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


def _convert_into(loaded: LoadedModel, plan: Plan, calibration: Calibration, quant: str, staging: Path,
                  log: Log) -> dict:
    K = loaded.keras
    log("building the step model")
    step = build_step_model(plan, K)
    keras_inputs = [k for k, _ in step.input_names]
    state_keys = keras_inputs[1:]

    log("converting to TFLite (float32)")
    step_float = _convert_float(step.keras_model)
    _check_ops(step_float, "the step model")
    output_keys = _match_outputs(step_float, step.keras_model, keras_inputs)
    y_key, state_out_keys = output_keys[0], output_keys[1:]

    head_model = build_head_model(plan, K)
    head_float = None
    if head_model is not None:
        head_float = _name_head_output(_convert_float(head_model))
        _check_ops(head_float, "the head model")

    # Run the float step model over the calibration sequences: the real trajectories.
    log("running the float step model over the calibration sequences")
    sequences = calibration.sequences
    renamed_float = _rename_for_run(step_float, step, output_keys)
    samples, ys = run_step_sequences(renamed_float, sequences, step.state_names)
    self_check = _float_self_check(plan, renamed_float, head_float, step.state_names, sequences)
    if self_check is not None and self_check > 1e-4:
        raise EdgeRNNError(
            f"the float step model differs from the Keras model by {self_check:.2e} (relative); "
            "this model is not supported"
        )

    (staging / FLOAT_STEP).write_bytes(renamed_float)
    if head_float is not None and quant != "float32":
        (staging / FLOAT_HEAD).write_bytes(head_float)
    if quant == "float32":
        step_final = renamed_float
        head_final = head_float
    else:
        log(f"calibrating on {len(samples)} recorded steps and quantizing to {quant}")
        keyed = [{k: s[p] for k, p in step.input_names} for s in calibration_subset(samples)]
        try:
            with warnings.catch_warnings(), tfenv.native_stderr_captured():
                warnings.simplefilter("ignore")
                calibrated = calibrate(_converter(step.keras_model), keyed)
            quantized, tied = quantize_with_tied_states(calibrated, list(zip(state_keys, state_out_keys)), quant)
        except EdgeRNNError:
            raise
        except Exception as exc:
            raise explain_quantization_failure(exc, quant, _layers_by_op(plan)) from None
        step_final = _rename_for_run(quantized, step, output_keys)
        head_final = None
        if head_float is not None:
            y_range = tfl.get_min_max(tfl.read(tied), tfl.signature(tfl.read(tied))[1][y_key])
            head_final = _quantize_head(head_model, ys, y_range, quant, plan)

    names = _check_ops(step_final, "the step model")
    model = tfl.read(step_final)
    inputs, outputs = tfl.signature(model)
    states = []
    for (name, size, rnn) in plan.state_specs:
        entry_in, entry_out = _io_entry(model, name, inputs[name]), _io_entry(model, name, outputs[name])
        if (entry_in["scale"], entry_in["zero_point"]) != (entry_out["scale"], entry_out["zero_point"]):
            raise EdgeRNNError(f"state {name} ended with different quantization at input and output")
        states.append({**entry_in, "layer": rnn.name, "size": size})
    (staging / "step.tflite").write_bytes(step_final)

    head_entry, head_macs = _head_entry(staging, head_final, model, outputs, quant)
    manifest = _manifest_common(loaded, plan, quant, model, head_final, head_entry, head_macs)
    manifest.update({
        "mode": "step",
        "inputs": [_io_entry(model, "x", inputs["x"])],
        "outputs": [_io_entry(model, "y", outputs["y"])],
        "states": states,
        "state_feedback": {s["name"]: s["name"] for s in states},
        "files": {"step": "step.tflite", **({"head": "head.tflite"} if head_entry else {})},
        "ops": sorted(set(names)),
        "calibration": {**calibration.describe(), "samples": len(samples)},
        "float_self_check_rel": self_check,
    })
    return manifest


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


def _manifest_common(loaded: LoadedModel, plan: Plan, quant: str, model, head_final: bytes | None,
                     head_entry: dict | None, head_macs: int) -> dict:
    return {
        "format": 1,
        "edgernn_version": __version__,
        "tool_versions": tfenv.versions(),
        "model_file": str(loaded.path) if loaded.path else None,
        "model_sha256": loaded.sha256,
        "keras": loaded.flavour,
        "quant": quant,
        "mode": None,
        "sequence_output": "every_step" if plan.head_per_step else "last_step",
        "inputs": None,
        "outputs": None,
        "states": None,
        "state_feedback": None,
        "head": head_entry,
        "files": None,
        "ops": None,
        "macs_per_step": tfl.macs(model),
        "head_macs": head_macs,
        "weight_bytes": tfl.constant_bytes(model) + (tfl.constant_bytes(tfl.read(head_final)) if head_final else 0),
        "arena_bytes": None,
        "code_bytes": None,
        "calibration": None,
        "float_self_check_rel": None,
        "layers": layer_rows(plan),
    }


def _convert_fused_into(loaded: LoadedModel, plan: Plan, calibration: Calibration, quant: str, staging: Path,
                        log: Log) -> dict:
    """OUT/step.tflite with one UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM, one invoke per time step."""
    from edgernn.keras import fused
    from edgernn.tflite.oracle import FusedStepper

    log("rebuilding the model in tf_keras for the fused LSTM op")
    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        fused_keras = fused.build_fused_keras(plan, plan.features)
    log("converting to TFLite (float32)")
    fused_float = _convert_float(fused_keras)
    fused.check_fused_ops(fused_float, plan)
    fused_float = fused.keras_lstm_options(fused_float, plan)

    head_model = build_head_model(plan, loaded.keras)
    head_float = None
    if head_model is not None:
        head_float = _name_head_output(_convert_float(head_model))
        _check_ops(head_float, "the head model")

    sequences = calibration.sequences
    self_check = _float_self_check(plan, fused_float, head_float, None, sequences)
    if self_check is not None and self_check > 1e-4:
        raise EdgeRNNError(
            f"the fused float model differs from the Keras model by {self_check:.2e} (relative); use --mode step"
        )
    (staging / FLOAT_STEP).write_bytes(fused_float)
    if head_float is not None and quant != "float32":
        (staging / FLOAT_HEAD).write_bytes(head_float)
    picked = fused.calibration_sequences(sequences)
    if quant == "float32":
        step_final, head_final = fused_float, head_float
    else:
        log(f"calibrating on {len(picked)} whole sequences and quantizing to {quant}")
        try:
            calibrated = fused.calibrate_on_trajectories(_converter(fused_keras), picked)
            quantized = quantize_calibrated(calibrated, quant)
        except EdgeRNNError:
            raise
        except Exception as exc:
            raise explain_quantization_failure(exc, quant, _layers_by_op(plan)) from None
        fused.check_fused_ops(quantized, plan)
        step_final, head_final = quantized, None
        if head_float is not None:
            ys, _ = FusedStepper(fused_float, {}).run(picked)
            calibrated_model = tfl.read(calibrated)
            y_range = tfl.get_min_max(calibrated_model, tfl.signature(calibrated_model)[1]["y"])
            head_final = _quantize_head(head_model, ys, y_range, quant, plan)

    model = tfl.read(step_final)
    inputs, outputs = tfl.signature(model)
    found = fused.state_tensors(step_final, plan)
    states = []
    for name, index, rnn in found:
        entry = _io_entry(model, name, index)
        states.append({**entry, "layer": rnn.name, "size": int(np.prod(entry["shape"])), "variable": True,
                       "tensor": index})
    (staging / "step.tflite").write_bytes(step_final)
    files = {"step": "step.tflite"}
    states_io = fused.states_as_io(step_final, found)
    why_not_io = _check_states_io(step_final, states_io, states, sequences[:2, :32])
    if why_not_io is None:
        (staging / "fused_states_io.tflite").write_bytes(states_io)
        files["fused_states_io"] = "fused_states_io.tflite"
    else:
        log(f"fused_states_io.tflite not written: {why_not_io}")

    head_entry, head_macs = _head_entry(staging, head_final, model, outputs, quant)
    if head_entry:
        files["head"] = "head.tflite"
    manifest = _manifest_common(loaded, plan, quant, model, head_final, head_entry, head_macs)
    manifest.update({
        "mode": "fused",
        "inputs": [_io_entry(model, "x", inputs["x"])],
        "outputs": [_io_entry(model, "y", outputs["y"])],
        "states": states,
        "state_feedback": {},
        "files": files,
        "ops": sorted(set(tfl.op_names(model))),
        "calibration": {**calibration.describe(), "samples": int(picked.shape[0] * picked.shape[1]),
                        "whole_sequences": int(picked.shape[0])},
        "float_self_check_rel": self_check,
    })
    if why_not_io is not None:
        manifest["fused_states_io"] = {"written": False, "why": why_not_io}
    return manifest


def _check_states_io(stepwise: bytes, states_io: bytes, states: list[dict], probe: np.ndarray) -> str | None:
    """None when the states-as-I/O form gives the stepwise form's exact bytes over probe, else why not."""
    from edgernn.tflite.oracle import FusedStepper, quantize

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


def _name_head_output(data: bytes) -> bytes:
    model = tfl.read(data)
    _, outs = tfl.signature(model)
    tfl.rename_signature(model, inputs={}, outputs={next(iter(outs)): "y"})
    return tfl.write(model)
