"""edgernn: trained recurrent Keras models on microcontroller-class devices, proven step by step.

The heavy stages import TensorFlow lazily, so ``import edgernn`` stays cheap.
"""

from edgernn._version import __version__

__all__ = ["__version__", "convert", "inspect", "EdgeRNNError", "lstm_from_torch", "lstm_from_cudnn",
           "keras_lstm_weights", "keras_lstm_weights_from_cudnn"]

from edgernn.errors import EdgeRNNError
from edgernn.keras.interop import keras_lstm_weights, keras_lstm_weights_from_cudnn, lstm_from_cudnn, lstm_from_torch


def convert(model, out, **options):
    """Convert a Keras RNN model into a step model folder. See :func:`edgernn.pipeline.convert.convert_model`."""
    from edgernn.pipeline.convert import convert_model

    return convert_model(model, out, **options)


def inspect(model, **options):
    """Describe how each layer of a Keras model would stream. See :func:`edgernn.pipeline.inspect.inspect_model`."""
    from edgernn.pipeline.inspect import inspect_model

    return inspect_model(model, **options)
