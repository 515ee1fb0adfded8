"""edgernn: trained recurrent models (Keras, ONNX, torch) on microcontroller-class devices, proven step by step.

The heavy stages import TensorFlow (and torch, onnx) lazily, so ``import edgernn`` stays cheap.
"""

from edgernn._version import __version__

__all__ = ["__version__", "convert", "build", "inspect", "from_torch", "from_onnx", "EdgeRNNError",
           "lstm_from_torch", "lstm_from_cudnn", "keras_lstm_weights", "keras_lstm_weights_from_cudnn",
           "keras_gru_weights", "keras_rnn_weights"]

from edgernn.errors import EdgeRNNError
from edgernn.keras.interop import (keras_gru_weights, keras_lstm_weights, keras_lstm_weights_from_cudnn,
                                   keras_rnn_weights, lstm_from_cudnn, lstm_from_torch)


def convert(model, out, **options):
    """Convert a model into a step model folder: a path (.keras, .h5, .onnx, SavedModel), a Keras model or a
    torch module. Returns the manifest as a JSON object. See :func:`edgernn.pipeline.convert.convert`."""
    from edgernn.pipeline.convert import convert as convert_folder

    return convert_folder(model, out, **options).as_dict()


def build(model, out, *, board, **options):
    """Convert ``model`` (as :func:`convert` takes it) and build its firmware for ``board`` into ``out``.
    See :func:`edgernn.pipeline.build.build_model`."""
    from edgernn.pipeline.build import build_model

    return build_model(model, out, board=board, **options)


def inspect(model, **options):
    """Describe how each layer of a model would stream. See :func:`edgernn.pipeline.inspection.inspect_model`."""
    from edgernn.pipeline.inspection import inspect_model

    return inspect_model(model, **options)


def from_torch(module):
    """The Keras model computing what a torch module computes (nn.Sequential or a simple forward of
    nn.Linear, activations, nn.LSTM/GRU/RNN, ncps.torch CfC/LTC), with its weights."""
    from edgernn.pytorch.module import from_torch as mapped

    return mapped(module).model


def from_onnx(path):
    """The Keras model computing what an ONNX file of a recurrent model computes, with its weights."""
    from edgernn.pytorch.onnx import load_onnx

    return load_onnx(path).model
