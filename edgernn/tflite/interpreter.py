"""The one TFLite interpreter loader of the package.

LiteRT (``ai-edge-litert``) first: it is the maintained successor of ``tflite-runtime`` and imports in
a tenth of a second. ``tflite-runtime`` next, for hosts that still carry it, and TensorFlow's own
deprecated ``tf.lite.Interpreter`` last.
"""

from __future__ import annotations

import os
import warnings

from edgernn.errors import EdgeRNNError


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter
    except ImportError:
        pass
    try:
        from tflite_runtime.interpreter import Interpreter

        return Interpreter
    except ImportError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import tensorflow as tf
        return tf.lite.Interpreter
    except ImportError:
        raise EdgeRNNError(
            "no TFLite interpreter found: install one with `pip install ai-edge-litert`"
        ) from None


REFERENCE = "reference"
BUILTIN = "builtin"


def oracle_kernels(ops) -> str:
    """Which of LiteRT's kernels the oracle runs a graph on: ``"builtin"`` or ``"reference"``.

    ``ops`` holds one (op name, dtype name of its first input) per operator. A graph with a quantized
    SUM runs on the builtin kernels, because LiteRT 2.3's reference SUM misreads int8 data; every other
    graph on the reference kernels. The C backend reads the same answer from its IR (``Graph.oracle``)
    and picks, for an op whose builtin kernel rounds differently, the variant of that oracle.
    """
    return BUILTIN if any(name == "SUM" and dtype in ("int8", "int16") for name, dtype in ops) else REFERENCE


def _reference_kernels_misread(interp) -> bool:
    """True when the graph has a quantized SUM, which LiteRT 2.3's reference kernel gets wrong.

    Its reference SUM reads int8 data as uint8 (a step of an int8 LTC collapses to -1 everywhere);
    LiteRT's builtin SUM kernel computes the sum. docs/ops.md has the measurements.
    """
    import numpy as np

    try:
        ops = interp._get_ops_details()
    except AttributeError:
        return False
    return oracle_kernels((op["op_name"], np.dtype(op["operand_types"][0]).name if len(op["operand_types"]) else "")
                          for op in ops) == BUILTIN


def load_interpreter(model: bytes | str | os.PathLike, preserve_all_tensors: bool = False):
    """An allocated interpreter for a .tflite file or its bytes, on the reference kernels (``preserve_all_tensors``:
    every intermediate tensor kept readable after an invoke).

    The reference kernels (no XNNPACK delegate) are the oracle the generated C is held against. A
    graph with a quantized SUM runs on LiteRT's builtin kernels instead (still without XNNPACK),
    because the reference SUM misreads int8 data.
    """
    cls = _interpreter_class()
    kwargs = {"experimental_preserve_all_tensors": True} if preserve_all_tensors else {}
    if isinstance(model, (bytes, bytearray)):
        kwargs["model_content"] = bytes(model)
    else:
        kwargs["model_path"] = os.fspath(model)
    try:
        from ai_edge_litert.interpreter import OpResolverType

        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_REF
    except ImportError:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            interp = cls(**kwargs)
        except TypeError:
            kwargs.pop("experimental_op_resolver_type", None)
            interp = cls(**kwargs)
        if "experimental_op_resolver_type" in kwargs and _reference_kernels_misread(interp):
            from ai_edge_litert.interpreter import OpResolverType

            kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
            interp = cls(**kwargs)
    interp.allocate_tensors()
    return interp
