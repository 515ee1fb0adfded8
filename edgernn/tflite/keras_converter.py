"""Keras models through TF's TFLite converter: the float step model and head, the quantized head, and the checks
that the flatbuffers are what edgernn can run (plain ops, the Keras model's own outputs).

The step model's strategies (edgernn/pipeline/convert.py) and ``--quant auto`` (edgernn/tflite/auto_quant.py)
convert through these; a failure of TF's quantizer becomes one line naming the layers that may cause it.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import numpy as np

from edgernn import tfenv
from edgernn.errors import EdgeRNNError
from edgernn.keras.decompose import Plan
from edgernn.keras.reference import keras_reference
from edgernn.keras.stepmodel import build_head_model
from edgernn.tflite import model as tfl
from edgernn.tflite.interpreter import load_interpreter
from edgernn.tflite.oracle import Head
from edgernn.tflite.quantize import calibrate, explain_quantization_failure, quantize_calibrated

# Ops that TFLite emits for layers, to name the layer when an op cannot be quantized.
OPS_OF_KIND = {"LTC": ["DIV", "SUM"], "CfC": ["EXP", "DIV"],
               "LayerNormalization": ["NEG", "RSQRT", "MEAN", "SQUARED_DIFFERENCE"]}
# ops TF's 16x8 quantizer takes but LiteRT has no int16 kernel of, which TF's quantizer may abort the process on
NO_INT16_KERNEL = ("SQUARED_DIFFERENCE",)


def converter(keras_model: Any):
    tf = tfenv.tensorflow()
    return tf.lite.TFLiteConverter.from_keras_model(keras_model)


def convert_float(keras_model: Any) -> bytes:
    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        return bytes(converter(keras_model).convert())


def check_plain_ops(model: "tfl.schema.ModelT", what: str) -> list[str]:
    """The op names of ``model`` (read), refused in one line when it holds control flow or a custom op."""
    names = tfl.op_names(model)
    banned = sorted({n for n in names if n in tfl.CONTROL_FLOW_OPS or n.startswith("CUSTOM")})
    if banned:
        raise EdgeRNNError(f"{what} still holds {', '.join(banned)}; edgernn needs a graph of plain ops")
    return names


def match_outputs(data: bytes, keras_model: Any, keras_input_names: list[str]) -> list[str]:
    """Signature output key for each Keras output, found by running both on the same random input."""
    runner = load_interpreter(data).get_signature_runner()
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


def layers_by_op(plan: Plan) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for _, layer in plan.order:
        kind = type(layer).__name__
        for op in OPS_OF_KIND.get(kind, []):
            found.setdefault(op, []).append(f"{kind} layer '{layer.name}'")
    return found


def check_16x8_ops(step_float: bytes, quant: str, plan: Plan) -> None:
    """A one-line refusal, before TF's 16x8 quantizer runs, of a step model holding an op LiteRT cannot run in
    int16 (a tf_keras LayerNormalization's SQUARED_DIFFERENCE; Keras 3's is rewritten without it)."""
    names = set(tfl.op_names(tfl.read(step_float)))
    for op in NO_INT16_KERNEL:
        if op in names:
            users = layers_by_op(plan).get(op) or []
            where = f" (used by {', '.join(users)})" if users else ""
            raise EdgeRNNError(f"--quant {quant} is not available for this model: LiteRT has no int16 {op}{where}; "
                               "use --quant int8 or float32")


def quantization_failure(quant: str, plan: Plan):
    """A context in which an unexpected quantizer failure becomes one line naming the layers that may cause it."""
    @contextlib.contextmanager
    def explained():
        try:
            yield
        except EdgeRNNError:
            raise
        except Exception as exc:
            raise explain_quantization_failure(exc, quant, layers_by_op(plan)) from None
    return explained()


# ---------------------------------------------------------------- the head

def name_head_output(data: bytes) -> bytes:
    model = tfl.read(data)
    _, outs = tfl.signature(model)
    tfl.rename_signature(model, inputs={}, outputs={next(iter(outs)): "y"})
    return tfl.write(model)


def float_head(plan: Plan, keras_module: Any) -> tuple[Any, bytes | None]:
    """(Keras head model, its TFLite form in float32 with its output named ``y``): the layers of ``plan`` that run on
    the step output, built with ``keras_module``; (None, None) for a model without a head."""
    head_model = build_head_model(plan, keras_module)
    if head_model is None:
        return None, None
    head = name_head_output(convert_float(head_model))
    check_plain_ops(tfl.read(head), "the head model")
    return head_model, head


def quantize_head(head_model: Any, ys: np.ndarray, y_range: tuple[float, float] | None, quant: str,
                  plan: Plan) -> bytes:
    """The head quantized on the step outputs it will really see, its input tied to the step output."""
    flat = ys.reshape(-1, ys.shape[-1])
    picks = np.linspace(0, len(flat) - 1, min(len(flat), 2000)).astype(int)
    samples = [{"h": flat[i : i + 1]} for i in picks]
    try:
        with warnings.catch_warnings(), tfenv.native_stderr_captured():
            warnings.simplefilter("ignore")
            calibrated = calibrate(converter(head_model), samples)
        model = tfl.read(calibrated)
        inputs, outputs = tfl.signature(model)
        if y_range is not None:
            tfl.set_min_max(model, inputs["h"], *y_range)
        quantized = quantize_calibrated(tfl.write(model), quant)
    except EdgeRNNError:
        raise
    except Exception as exc:
        raise explain_quantization_failure(exc, quant, layers_by_op(plan)) from None
    return name_head_output(quantized)


# ---------------------------------------------------------------- reference check

def float_self_check(plan: Plan, run: Callable[[bytes, np.ndarray], np.ndarray], step_float: bytes,
                     head_float: bytes | None, sequences: np.ndarray, source: Any = None) -> float | None:
    """Largest relative error of the float step model (run over sequences by ``run``) against the source
    model on a few sequences: the Keras model, or the ONNX file or torch module it was mapped from."""
    probe = sequences[: min(4, len(sequences)), : min(64, sequences.shape[1])]
    want = source.reference(probe) if source is not None else keras_reference(plan.model, probe)
    if want is None:
        return None
    ys = run(step_float, probe)
    if plan.head_per_step or not head_float:
        got = ys if plan.head_per_step else ys[:, -1, :]
    else:
        got = np.asarray(Head(head_float).run(ys[:, -1, :]), np.float32)
    got = got.reshape(want.shape)
    scale = max(float(np.max(np.abs(want))), 1e-6)
    return float(np.max(np.abs(got - want)) / scale)
