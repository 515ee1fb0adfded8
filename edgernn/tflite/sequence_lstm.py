"""The fused model's flatbuffer: its UNIDIRECTIONAL_SEQUENCE_LSTM ops, their state tensors, and their calibration.

``edgernn.keras.fused_rebuild`` builds the tf_keras model that TensorFlow converts into one fused op per LSTM; this
module reads and edits what comes out, and calibrates it on whole sequences.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.tflite import model as tfl

FUSED_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
# UNIDIRECTIONAL_SEQUENCE_LSTM inputs 18 and 19: the variable tensors holding h and c between invokes.
ACTIVATION_STATE_INPUT, CELL_STATE_INPUT = 18, 19
# Steps the int8 calibration runs at most; whole sequences are always kept.
MAX_CALIBRATION_STEPS = 20000


def lstm_ops(model) -> list:
    graph = model.subgraphs[0]
    return [op for op in graph.operators or [] if tfl.op_name(model, op.opcodeIndex) == FUSED_OP]


def check_fused_ops(data: bytes, lstm_layers: int) -> None:
    """One fused op per LSTM layer, and no loop left."""
    model = tfl.read(data)
    names = tfl.op_names(model)
    loops = sorted({n for n in names if n in tfl.CONTROL_FLOW_OPS or n.startswith("CUSTOM")})
    count = names.count(FUSED_OP)
    if loops or count != lstm_layers:
        raise EdgeRNNError(
            f"TensorFlow did not fuse the LSTMs: {count} {FUSED_OP} op(s) for {lstm_layers} LSTM layer(s)"
            + (f", and {', '.join(loops)}" if loops else "") + "; use --mode step"
        )


def keras_lstm_options(data: bytes, activations: list[str]) -> bytes:
    """Each LSTM op's LSTMOptions as Keras computes: its cell activation (``activations``, one
    ActivationFunctionType name per op), and no cell clip.

    tf_keras fused every cell as tanh. TensorFlow's converter also sets ``cell_clip`` 10, which Keras
    does not have: a cell state that grows past 10 and comes back then follows another path (measured:
    1.86 relative error in y over 300 steps; 4e-6 without the clip).
    """
    from ai_edge_litert import schema_py_generated as schema

    model = tfl.read(data)
    for op, wanted in zip(lstm_ops(model), activations):
        op.builtinOptions.fusedActivationFunction = getattr(schema.ActivationFunctionType, wanted)
        op.builtinOptions.cellClip = 0.0
    return tfl.write(model)


def _without_cell_clip(model) -> None:
    for op in lstm_ops(model):
        op.builtinOptions.cellClip = 0.0


def state_tensors(data: bytes, layers: list[str]) -> list[tuple[str, int, str]]:
    """(public state name, tensor index, layer name) of every LSTM's h and c variable tensors, in layer order."""
    model = tfl.read(data)
    graph = model.subgraphs[0]
    found = []
    for op, layer in zip(lstm_ops(model), layers):
        for name, slot in (("h", ACTIVATION_STATE_INPUT), ("c", CELL_STATE_INPUT)):
            index = int(op.inputs[slot])
            if index < 0 or not graph.tensors[index].isVariable:
                raise EdgeRNNError(f"the fused op of '{layer}' keeps its {name} state in no variable tensor")
            found.append((f"{layer}.{name}", index, layer))
    return found


def states_as_io(data: bytes, states: list[tuple[str, int, Any]]) -> bytes:
    """The same model with each variable state tensor also a graph input and output, named in the signature.

    The op still updates the tensor in place; setting it before an invoke and reading it after makes the
    state explicit, which is what tools that want the states as inputs and outputs need.
    """
    model = tfl.read(data)
    graph = model.subgraphs[0]
    sig = model.signatureDefs[0]
    entry_type = type(sig.inputs[0])
    for name, index, _ in states:
        graph.inputs = [*graph.inputs, index]
        graph.outputs = [*graph.outputs, index]
        for side in ("inputs", "outputs"):
            entry = entry_type()
            entry.name = name
            entry.tensorIndex = index
            setattr(sig, side, [*getattr(sig, side), entry])
    return tfl.write(model)


# ---------------------------------------------------------------- int8 calibration on whole sequences

def calibration_sequences(sequences: np.ndarray, limit: int = MAX_CALIBRATION_STEPS) -> np.ndarray:
    """Whole sequences, evenly spaced, at most ``limit`` steps in all (always at least one)."""
    keep = max(1, min(len(sequences), limit // max(1, sequences.shape[1])))
    picks = np.linspace(0, len(sequences) - 1, keep).astype(int)
    return sequences[np.unique(picks)]


def calibrate_on_trajectories(converter: Any, sequences: np.ndarray) -> bytes:
    """Min/max of every tensor over whole sequences, each started from a zero state.

    TFLite's calibrator keeps variable tensors from one invoke to the next and never resets them, so
    feeding the steps of one sequence in order lets the state visit what it visits on the device. A fresh
    calibrator per sequence starts each from zero; the ranges are the union over all sequences. Then the
    cell and hidden ranges are fixed up for the integer kernel (``widen_cell_states``, ``tie_hidden_ranges``).
    """
    from tensorflow.lite.python.optimize import calibrator

    from edgernn import tfenv
    from edgernn.tflite.quantize import calibrate, check_finite_ranges

    def steps(sequence):
        return [{"x": x.reshape(1, -1).astype(np.float32)} for x in sequence]

    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        # The converter's own pass only yields the model with the LSTM's intermediate tensors; its cell
        # clip (10) goes before the ranges are recorded, so every sequence is calibrated again without it.
        model = tfl.read(calibrate(converter, steps(sequences[0][:1])))
        _without_cell_clip(model)
        first = tfl.write(model)
        ranges = {i: None for i in range(len(model.subgraphs[0].tensors))}
        for sequence in sequences:
            wrapper = calibrator.Calibrator(first)
            data = wrapper.calibrate(lambda s=sequence: iter([[x.reshape(1, -1).astype(np.float32)] for x in s]))
            other = tfl.read(bytes(data))
            for i in ranges:
                r = tfl.get_min_max(other, i)
                if r is not None:
                    old = ranges[i]
                    ranges[i] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))
    for i, r in ranges.items():
        if r is not None:
            tfl.set_min_max(model, i, *r)
    widen_cell_states(model)
    tie_hidden_ranges(model)
    return check_finite_ranges(tfl.write(model))


# The op's fifth intermediate tensor: the hidden state o * tanh(c) before it is written to the output.
HIDDEN_INTERMEDIATE = 4


def tie_hidden_ranges(model) -> None:
    """Give each LSTM's h state, output and hidden intermediate one range that includes 0.

    The quantizer nudges the output's range to include 0 but not the hidden intermediate's, and the
    integer kernel computes h at the intermediate's scale and writes it at the output's. When h stays
    on one side of 0 the two differ and every output is off (measured: l2r 0.38 on an LSTM whose h stays
    within [0.25, 0.8]; 0.002 once tied).
    """
    for op in lstm_ops(model):
        members = [int(op.inputs[ACTIVATION_STATE_INPUT]), int(op.outputs[0])]
        if op.intermediates is not None and len(op.intermediates) > HIDDEN_INTERMEDIATE:
            members.append(int(op.intermediates[HIDDEN_INTERMEDIATE]))
        ranges = [r for r in (tfl.get_min_max(model, i) for i in members) if r is not None]
        if not ranges:
            continue
        lo = min(0.0, *(r[0] for r in ranges))
        hi = max(0.0, *(r[1] for r in ranges))
        for index in members:
            if tfl.get_min_max(model, index) is not None:
                tfl.set_min_max(model, index, lo, hi)


# The widest cell state range the integer kernel's tanh handles: 6 integer bits.
MAX_CELL_RANGE = 64.0


def widen_cell_states(model) -> None:
    """Give every LSTM cell state a range of at least [-1, 1] and at most [-64, 64].

    The quantizer gives the int16 cell state a power-of-two scale from its range, and the integer kernel
    takes tanh of it with a fixed-point routine that handles 0 to 6 integer bits only. A cell state that
    stays within ±0.5 gets scale 2^-16 (-1 integer bits), and the kernel's output is then garbage
    (saturated from the first step; TensorFlow's own converter makes the same model). Measured on a
    stacked LSTM whose second cell state stays within ±0.3: l2r 3.0, and 0.015 once widened. A cell state
    beyond ±64 would need 7 integer bits: the int8 model then clips it at 64 (cell_clip), where tanh is 1.
    """
    for op in lstm_ops(model):
        index = int(op.inputs[CELL_STATE_INPUT])
        found = tfl.get_min_max(model, index)
        if found is None:
            continue
        lo, hi = min(found[0], -1.0), max(found[1], 1.0)
        if max(-lo, hi) > MAX_CELL_RANGE:
            lo, hi = max(lo, -MAX_CELL_RANGE), min(hi, MAX_CELL_RANGE)
            op.builtinOptions.cellClip = MAX_CELL_RANGE
        tfl.set_min_max(model, index, lo, hi)


def check_states_io(stepwise: bytes, x_entry: dict, states_io: bytes, states: list[dict],
                    probe: np.ndarray) -> str | None:
    """None when the states-as-I/O form gives the stepwise form's exact bytes over probe, else why not
    (``x_entry``: the stepwise form's input, as the manifest describes it)."""
    from edgernn.tflite.oracle import State, Stepper, quantize

    xq = quantize(probe.astype(np.float32), x_entry)
    want = Stepper(stepwise, [State(s["name"], tensor=int(s["tensor"])) for s in states]).run(xq)
    try:
        got = Stepper(states_io, [s["name"] for s in states]).run(xq)
    except Exception as exc:  # the interpreter refusing the edited graph is an answer, not a bug
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"the interpreter refuses it ({first})"
    pairs = [(got.y, want.y)] + [(got.states[name], want.states[name]) for name in want.states]
    if any(a.shape != b.shape for a, b in pairs):
        return "it differs from step.tflite at sequence 0, step 0"
    differs = np.any([np.any(a != b, axis=-1) for a, b in pairs], axis=0)
    if differs.any():
        i, t = np.argwhere(differs)[0]
        return f"it differs from step.tflite at sequence {i}, step {t}"
    return None
