"""edgernn: trained recurrent Keras models on microcontroller-class devices, proven step by step.

The heavy stages import TensorFlow lazily, so ``import edgernn`` stays cheap.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "convert", "inspect", "EdgeRNNError", "lstm_from_torch", "lstm_from_cudnn",
           "keras_lstm_weights", "keras_lstm_weights_from_cudnn"]

from edgernn.errors import EdgeRNNError
from edgernn.interop import keras_lstm_weights, keras_lstm_weights_from_cudnn, lstm_from_cudnn, lstm_from_torch


def convert(model, out, **options):
    """Convert a Keras RNN model into a step model folder. See :func:`edgernn.convert.convert_model`."""
    from edgernn.conversion import convert_model

    return convert_model(model, out, **options)


def inspect(model, **options):
    """Describe how each layer of a Keras model would stream. See :func:`edgernn.inspection.inspect_model`."""
    from edgernn.inspection import inspect_model

    return inspect_model(model, **options)
