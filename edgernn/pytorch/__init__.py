"""Stage 2, PyTorch: PyTorch's models through edgernn: ONNX files (onnx.py) and torch modules (module.py, ncps.py).

Each is mapped onto the equivalent Keras model with exact weights; from there the pipeline is the one Keras
models take. The source itself stays the float reference: :class:`Source` carries the function that runs it.
Neither ``onnx`` nor ``torch`` is imported until a model of theirs arrives.
"""
