"""Step a converted step model with the TFLite interpreter: the one stepping loop of the package.

This is the oracle the device is held against: the interpreter's own bytes, state fed back step by
step (or held in a fused op's variable tensors), and the same values dequantized for comparison with
the float model. Calibration, the quantization search and validate step models through ``Stepper`` too.
No TensorFlow.
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
    y_float: np.ndarray | None  # y dequantized (None: a quantized model whose output quantization is not known)
    final: np.ndarray | None = None  # the head's output per sequence (dequantized), when there is a head
    feeds: list[dict[str, np.ndarray]] | None = None  # per step, what the model was fed (x and the states before it)


@dataclass(frozen=True)
class State:
    """One state of a step model.

    Fed through the signature (``tensor`` None): input ``name``, back on output ``output`` (``name`` when empty),
    zero-point at the start of each sequence. Held in a variable tensor (a fused LSTM's): ``tensor`` is its index,
    read after each invoke; the interpreter resets it."""

    name: str
    output: str = ""
    tensor: int | None = None

    @classmethod
    def of(cls, spec: "State | str | tuple[str, str] | dict") -> "State":
        """A signature key, an (input key, output key) pair, or a manifest state entry."""
        if isinstance(spec, State):
            return spec
        if isinstance(spec, str):
            return cls(spec)
        if isinstance(spec, dict):
            return cls(spec["name"], tensor=int(spec["tensor"]) if spec.get("variable") else None)
        name, output = spec
        return cls(name, output)


class Head:
    """A head model (input ``h``, output ``y``), invoked once per row of step outputs: its raw outputs."""

    def __init__(self, model):
        self.interp = load_interpreter(model)
        signature = self.interp.get_signature_runner()
        h = signature.get_input_details()["h"]
        self.h_index, self.h_shape, self.h_dtype = h["index"], h["shape"], h["dtype"]
        self.y_index = signature.get_output_details()["y"]["index"]

    def __call__(self, h: np.ndarray) -> np.ndarray:
        self.interp.set_tensor(self.h_index, np.asarray(h).reshape(self.h_shape).astype(self.h_dtype))
        self.interp.invoke()
        return self.interp.get_tensor(self.y_index).reshape(-1)

    def run(self, hs: np.ndarray) -> np.ndarray:
        """(rows, outputs) raw, for ``hs`` (rows, step outputs)."""
        return np.asarray([self(h) for h in hs])


class Stepper:
    """A step model ``(x_t, state) -> (y_t, state')`` on the interpreter: the one stepping loop of the package.

    ``model``: a .tflite path or its bytes. ``states`` (``State.of`` each): fed through the signature, or held in
    variable tensors and read by index. ``reset()`` starts a sequence from the zero-point state; ``step`` and
    ``advance`` go on from where the last left off; ``run`` takes whole sequences, each from a reset. Values in and
    out are raw (the model's own types). ``head``: the head model run once on a sequence's last output.
    ``x_entry``/``y_entry``/``head_entry`` (manifest entries) say how to quantize and dequantize, where known.
    """

    def __init__(self, model, states=(), *, head=None, x_key: str = "x", y_key: str = "y",
                 x_entry: dict | None = None, y_entry: dict | None = None, head_entry: dict | None = None):
        self.interp = load_interpreter(model)
        signature = self.interp.get_signature_runner()
        inputs, outputs = signature.get_input_details(), signature.get_output_details()
        self.x_key = x_key
        self.x_index, self.x_shape, self.x_dtype = (inputs[x_key][k] for k in ("index", "shape", "dtype"))
        self.y_index = outputs[y_key]["index"]
        self.y_size = int(np.prod(outputs[y_key]["shape"]))
        self.states = [State.of(s) for s in states]
        self.fed = [s for s in self.states if s.tensor is None]
        self._fed_io = {s.name: (inputs[s.name]["index"], outputs[s.output or s.name]["index"]) for s in self.fed}
        self.zero = {}
        for s in self.fed:
            d = inputs[s.name]
            zp = d["quantization_parameters"]["zero_points"]
            self.zero[s.name] = np.full(d["shape"], int(zp[0]) if len(zp) else 0, dtype=d["dtype"])
        self.head = Head(head) if head is not None else None
        self.x_entry, self.y_entry, self.head_entry = x_entry, y_entry, head_entry
        self.manifest = None
        self.state: dict[str, np.ndarray] = {}
        self._feeds: list | None = None
        self.reset()

    @classmethod
    def of_folder(cls, out_dir: str | Path, manifest: outdir.Manifest | None = None) -> "Stepper":
        """The step model (and its head) of an output folder, as its manifest describes them."""
        out_dir = Path(out_dir)
        manifest = manifest or outdir.read_manifest(out_dir)
        if manifest.mode == "fused":
            states = [State(s["name"], tensor=int(s["tensor"])) for s in manifest.states]
        else:
            states = [State(s["name"]) for s in manifest.states]
        head = manifest.head
        stepper = cls(out_dir / manifest.files["step"], states, head=out_dir / head["file"] if head else None,
                      x_entry=manifest.inputs[0], y_entry=manifest.outputs[0], head_entry=head)
        stepper.manifest = manifest
        return stepper

    def reset(self) -> None:
        """The zero-point state: fed states at their zero points, variable tensors reset by the interpreter."""
        self.interp.reset_all_variables()
        self.state = dict(self.zero)

    def step(self, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One step: y, and every state after it (name -> value), raw."""
        x = np.asarray(x).reshape(self.x_shape)
        if x.dtype != self.x_dtype:
            if np.issubdtype(self.x_dtype, np.integer) and not np.issubdtype(x.dtype, np.integer):
                raise TypeError(f"the step model takes {np.dtype(self.x_dtype).name} codes, not {x.dtype.name} values")
            x = x.astype(self.x_dtype)
        if self._feeds is not None:
            self._feeds.append({self.x_key: x, **self.state})
        # tensors by index, not the signature runner: one path for states fed back and for states held in
        # variable tensors, which are read between invokes
        self.interp.set_tensor(self.x_index, x)
        for name, (index, _) in self._fed_io.items():
            self.interp.set_tensor(index, self.state[name])
        self.interp.invoke()
        y = self.interp.get_tensor(self.y_index)
        self.state = {name: self.interp.get_tensor(out).reshape(self.zero[name].shape)
                      for name, (_, out) in self._fed_io.items()}
        return y, self._now()

    def _now(self) -> dict[str, np.ndarray]:
        """Every state as it is now (name -> value): fed ones as kept, variable tensors read back."""
        return {s.name: self.state[s.name] if s.tensor is None else self.interp.get_tensor(s.tensor)
                for s in self.states}

    def advance(self, xs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Steps over ``xs`` (steps, ...) from the current state: y (steps, outputs) and each state (steps, size)."""
        ys, states = [], {s.name: [] for s in self.states}
        for x in xs:
            y, now = self.step(x)
            ys.append(y.reshape(-1))
            for name, value in now.items():
                states[name].append(value.reshape(-1))
        if not ys:
            now = self._now()
            return (np.zeros((0, self.y_size), self.interp.get_tensor(self.y_index).dtype),
                    {name: np.zeros((0, value.size), value.dtype) for name, value in now.items()})
        return np.stack(ys), {name: np.stack(values) for name, values in states.items()}

    def run(self, sequences: np.ndarray, quantize_input: bool = False, keep_feeds: bool = False) -> Trace:
        """Each sequence from a reset. ``sequences`` (sequences, steps, ...) raw, or values that ``quantize_input``
        quantizes with x_entry. ``keep_feeds``: the trace keeps what each step was fed."""
        sequences = np.asarray(sequences)
        xq = quantize(sequences.astype(np.float32), self.x_entry) if quantize_input else sequences
        self._feeds = [] if keep_feeds else None
        ys, states = [], {s.name: [] for s in self.states}
        try:
            for seq in xq:
                self.reset()
                y, now = self.advance(seq)
                ys.append(y)
                for name, value in now.items():
                    states[name].append(value)
            feeds = self._feeds
        finally:
            self._feeds = None
        y = np.asarray(ys)
        if self.y_entry is not None:
            y_float = dequantize(y, self.y_entry)
        else:
            y_float = y if y.dtype == np.float32 else None
        trace = Trace(x=xq, y=y, states={k: np.asarray(v) for k, v in states.items()}, y_float=y_float, feeds=feeds)
        if self.head is not None:
            trace.final = self.run_head(y[:, -1, :])
        return trace

    def records(self, xq: np.ndarray) -> tuple[np.ndarray, np.dtype]:
        """One sequence (steps, ...) from a reset, as the device's trace records it: per step, the bytes of y then
        of every state in order; and y's dtype."""
        self.reset()
        ys, states = self.advance(xq)
        parts = [ys] + [states[s.name] for s in self.states]
        return np.concatenate([np.ascontiguousarray(p).view(np.uint8) for p in parts], axis=1), ys.dtype

    def run_head(self, last_y: np.ndarray) -> np.ndarray:
        """The head over each row of ``last_y`` (raw step outputs): its outputs, dequantized by head_entry."""
        out = self.head.run(last_y)
        if self.head_entry is None:
            return out
        return np.asarray([dequantize(row, self.head_entry["output"]) for row in out])

    def model_output(self, trace: Trace) -> np.ndarray:
        """What the Keras model outputs for the same sequences: per step, or once at the end."""
        if self.manifest.sequence_output == "every_step":
            return trace.y_float
        return trace.final if trace.final is not None else trace.y_float[:, -1, :]
