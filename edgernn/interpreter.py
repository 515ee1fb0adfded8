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


def load_interpreter(model: bytes | str | os.PathLike):
    """An allocated interpreter for a .tflite file or its bytes, on the reference kernels.

    The reference kernels (no XNNPACK delegate) are the oracle the generated C is held against.
    """
    cls = _interpreter_class()
    kwargs = {}
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
    interp.allocate_tensors()
    return interp
