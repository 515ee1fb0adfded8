"""Run a converted step model over whole sequences with the TFLite interpreter.

This is the oracle the device is held against: the interpreter's own bytes, state fed back step by
step, and the same values dequantized for comparison with the float Keras model. No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgernn import outdir
from edgernn.tflite.interpreter import load_interpreter

_NP_TYPES = {"float32": np.float32, "int8": np.int8, "int16": np.int16}


def quantize(values: np.ndarray, entry: dict) -> np.ndarray:
    kind = _NP_TYPES[entry["dtype"]]
    if entry["dtype"] == "float32":
        return values.astype(np.float32)
    info = np.iinfo(kind)
    q = np.round(values / entry["scale"]) + entry["zero_point"]
    return np.clip(q, info.min, info.max).astype(kind)


def dequantize(values: np.ndarray, entry: dict) -> np.ndarray:
    if entry["dtype"] == "float32":
        return values.astype(np.float32)
    return ((values.astype(np.float32) - entry["zero_point"]) * entry["scale"]).astype(np.float32)


@dataclass
class Trace:
    """What the step model produced over sequences, raw (device types) and dequantized."""

    x: np.ndarray  # (sequences, steps, features) in the model's input type
    y: np.ndarray  # (sequences, steps, outputs) raw
    states: dict[str, np.ndarray]  # name -> (sequences, steps, size) raw, after each step
    y_float: np.ndarray  # y dequantized
    final: np.ndarray | None = None  # the head's output per sequence (dequantized), when there is a head


class FusedStepper:
    """A fused step model: one invoke per time step, the LSTM states in the interpreter's variable tensors.

    ``reset_all_variables()`` zeroes them (each at its zero point) for a new sequence; ``get_tensor`` with
    the manifest's tensor index reads them after each invoke.
    """

    def __init__(self, model, state_tensors: dict[str, int]):
        self.interp = load_interpreter(model)
        details = self.interp.get_signature_runner()
        self.x_index = details.get_input_details()["x"]["index"]
        self.y_index = details.get_output_details()["y"]["index"]
        self.x_shape = details.get_input_details()["x"]["shape"]
        self.state_tensors = state_tensors

    def reset(self) -> None:
        self.interp.reset_all_variables()

    def step(self, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        self.interp.set_tensor(self.x_index, x.reshape(self.x_shape))
        self.interp.invoke()
        y = np.array(self.interp.get_tensor(self.y_index))
        return y, {name: np.array(self.interp.get_tensor(index)) for name, index in self.state_tensors.items()}

    def run(self, sequences: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(y (sequences, steps, outputs), states name -> (sequences, steps, size)), raw values."""
        ys, states = [], {name: [] for name in self.state_tensors}
        for seq in sequences:
            self.reset()
            seq_y, seq_states = [], {name: [] for name in self.state_tensors}
            for x in seq:
                y, now = self.step(x)
                seq_y.append(y.reshape(-1))
                for name, value in now.items():
                    seq_states[name].append(value.reshape(-1))
            ys.append(seq_y)
            for name in states:
                states[name].append(seq_states[name])
        return np.asarray(ys), {k: np.asarray(v) for k, v in states.items()}


class StepRunner:
    """The step model (and its head) of an output folder, on the reference kernels."""

    def __init__(self, out_dir: str | Path, manifest: outdir.Manifest | None = None):
        self.out_dir = Path(out_dir)
        self.manifest = manifest or outdir.read_manifest(out_dir)
        step_file = self.out_dir / self.manifest.files["step"]
        self.fused = None
        if self.manifest.mode == "fused":
            self.fused = FusedStepper(step_file, {s["name"]: s["tensor"] for s in self.manifest.states})
        else:
            self.runner = load_interpreter(step_file).get_signature_runner()
        head = self.manifest.head
        self.head = load_interpreter(self.out_dir / head["file"]).get_signature_runner() if head else None
        self.x_entry = self.manifest.inputs[0]
        self.y_entry = self.manifest.outputs[0]

    def zero_state(self) -> dict[str, np.ndarray]:
        return {s["name"]: quantize(np.zeros(s["shape"], np.float32), s) for s in self.manifest.states}

    def run(self, sequences: np.ndarray, quantized_input: bool = False) -> Trace:
        sequences = np.asarray(sequences)
        xq = sequences if quantized_input else quantize(sequences.astype(np.float32), self.x_entry)
        shape = self.x_entry["shape"]
        if self.fused is not None:
            y, states = self.fused.run(xq)
            trace = Trace(x=xq, y=y, states=states, y_float=dequantize(y, self.y_entry))
            if self.head is not None:
                trace.final = self.run_head(y[:, -1, :])
            return trace
        ys, states = [], {s["name"]: [] for s in self.manifest.states}
        for seq in xq:
            state = self.zero_state()
            seq_y = []
            seq_states = {name: [] for name in states}
            for x in seq:
                result = self.runner(x=x.reshape(shape), **state)
                seq_y.append(np.array(result["y"]).reshape(-1))
                state = {name: np.array(result[name]) for name in state}
                for name in state:
                    seq_states[name].append(state[name].reshape(-1))
            ys.append(seq_y)
            for name in states:
                states[name].append(seq_states[name])
        y = np.asarray(ys)
        trace = Trace(x=xq, y=y, states={k: np.asarray(v) for k, v in states.items()},
                      y_float=dequantize(y, self.y_entry))
        if self.head is not None:
            trace.final = self.run_head(y[:, -1, :])
        return trace

    def run_head(self, last_y: np.ndarray) -> np.ndarray:
        entry = self.manifest.head
        outs = []
        for h in last_y:
            result = self.head(h=h.reshape(entry["input"]["shape"]).astype(_NP_TYPES[entry["input"]["dtype"]]))
            outs.append(dequantize(np.array(result["y"]).reshape(-1), entry["output"]))
        return np.asarray(outs)

    def model_output(self, trace: Trace) -> np.ndarray:
        """What the Keras model outputs for the same sequences: per step, or once at the end."""
        if self.manifest.sequence_output == "every_step":
            return trace.y_float
        return trace.final if trace.final is not None else trace.y_float[:, -1, :]


def run_float_head(head: bytes, hs: np.ndarray, key_in: str = "h") -> np.ndarray:
    """A float head over the step outputs ``hs``, one at a time: its outputs."""
    runner = load_interpreter(head).get_signature_runner()
    details = runner.get_input_details()
    out = []
    for h in hs:
        result = runner(**{key_in: h.reshape(details[key_in]["shape"]).astype(np.float32)})
        out.append(np.asarray(next(iter(result.values()))).reshape(-1))
    return np.asarray(out, np.float32)


def run_quantized_head(head: bytes, hs: np.ndarray) -> np.ndarray:
    """A quantized head over the step outputs ``hs`` (their integer codes): its dequantized outputs."""
    from edgernn.tflite import model as tfl

    model = tfl.read(head)
    _, outputs = tfl.signature(model)
    out_entry = tfl.tensor_quant(model, outputs["y"])
    runner = load_interpreter(head).get_signature_runner()
    shape = runner.get_input_details()["h"]["shape"]
    return np.asarray([dequantize(np.asarray(runner(h=h.reshape(shape))["y"]).reshape(-1), out_entry) for h in hs])


def step_records(step_file: str | Path, xq: np.ndarray, states: list[dict]) -> tuple[np.ndarray, np.dtype]:
    """One sequence through the step model, as the device's trace records it: per step, the bytes of
    y then of every state in ``states`` (manifest entries) order; and y's dtype.

    States that are inputs and outputs of the step model start at their zero point and are fed back;
    states in variable tensors (a fused op's, ``"variable": true``) live in the interpreter between
    invokes and are read back by their tensor index.
    """
    interp = load_interpreter(step_file)
    runner = interp.get_signature_runner("serving_default")
    details = runner.get_input_details()
    shape = details["x"]["shape"]
    fed = [s["name"] for s in states if not s.get("variable")]
    state = {}
    for name in fed:
        zp = details[name]["quantization_parameters"]["zero_points"]
        state[name] = np.full(details[name]["shape"], int(zp[0]) if len(zp) else 0, dtype=details[name]["dtype"])
    records = []
    y_dtype = None
    for t in range(xq.shape[0]):
        out = runner(x=xq[t].reshape(shape), **state)
        y_dtype = out["y"].dtype
        parts = [out["y"].reshape(-1)]
        for s in states:
            if s.get("variable"):
                parts.append(interp.get_tensor(int(s["tensor"])).reshape(-1))
            else:
                state[s["name"]] = out[s["name"]].copy()
                parts.append(state[s["name"]].reshape(-1))
        records.append(np.concatenate([p.view(np.uint8) for p in parts]))
    return np.stack(records), y_dtype
