"""One door for every model: ``.onnx`` files and torch modules through their mappings, the rest through
edgernn.keras.load."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from edgernn.errors import EdgeRNNError
from edgernn.keras.load import LoadedModel, file_sha256, load_model
from edgernn.pytorch.module import from_torch, is_torch_module
from edgernn.pytorch.source import Source


def load_any(model: Any, *, unsafe: bool = False, roll: bool = False) -> LoadedModel:
    """``model``: a path (.keras, .h5, SavedModel folder, .onnx), a Keras model, or a torch module.

    ``roll``: take an .onnx export unrolled over time back to its repeated cell instead of refusing it.
    """
    if isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() == ".onnx":
        return _onnx(Path(model), roll)
    if is_torch_module(model):
        source = from_torch(model)
        return LoadedModel(model=source.model, flavour="keras", path=None, sha256=module_sha256(model),
                           source=source)
    if isinstance(model, Source):
        return LoadedModel(model=model.model, flavour="keras", path=None, sha256=model_digest(model), source=model)
    return load_model(model, unsafe=unsafe)


def _onnx(path: Path, roll: bool) -> LoadedModel:
    from edgernn.pytorch.onnx import load_onnx

    if not path.exists():
        raise EdgeRNNError(f"model file {path} does not exist")
    if not path.is_file():
        raise EdgeRNNError(f"model {path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise EdgeRNNError(f"model {path} cannot be read (permission denied)")
    source = load_onnx(path, roll=roll)
    return LoadedModel(model=source.model, flavour="keras", path=path.resolve(), sha256=file_sha256(path),
                       source=source)


def module_sha256(module: Any) -> str:
    """SHA-256 of a torch module: its class, its structure and its parameters and buffers."""
    digest = hashlib.sha256(f"{type(module).__module__}.{type(module).__qualname__}\n{module!r}".encode())
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def model_digest(source: Source) -> str:
    from edgernn.keras.load import model_sha256

    return model_sha256(source.model)
