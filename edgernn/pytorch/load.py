"""One door for every model: ``.onnx`` files and torch modules through their mappings, the rest through
edgernn.keras.load."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from edgernn.errors import EdgeRNNError
from edgernn.keras.load import (LoadedModel, check_finite_weights, check_model_path, check_readable, file_sha256,
                                load_model, model_sha256)
from edgernn.pytorch.module import from_torch, is_torch_module
from edgernn.pytorch.source import Source, keras_name


def load_any(model: Any, *, unsafe: bool = False, roll: bool = False) -> LoadedModel:
    """``model``: a path (.keras, .h5, SavedModel folder, .onnx), a Keras model, or a torch module; refused
    when its weights hold NaN or infinite values.

    ``roll``: take an .onnx export unrolled over time back to its repeated cell instead of refusing it.
    """
    loaded = _load_any(model, unsafe, roll)
    check_finite_weights(loaded)
    return loaded


def _load_any(model: Any, unsafe: bool, roll: bool) -> LoadedModel:
    if isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() == ".onnx":
        return _onnx(Path(model), roll)
    if is_torch_module(model):
        source = from_torch(model)
        return LoadedModel(model=source.model, flavour="keras", path=None, sha256=module_sha256(model),
                           source=source)
    if isinstance(model, Source):
        return LoadedModel(model=model.model, flavour="keras", path=None, sha256=model_sha256(model.model), source=model)
    return load_model(model, unsafe=unsafe)


def _onnx(path: Path, roll: bool) -> LoadedModel:
    from edgernn.pytorch.onnx import load_onnx, read_onnx

    check_model_path(path)
    if path.is_dir():
        raise EdgeRNNError(f"{path} is a folder, not an .onnx model file")
    check_readable(path)
    model = read_onnx(path)
    from edgernn.pytorch.onnx_frames import is_frame_model, load_frame_onnx

    if is_frame_model(model):   # a per-frame CNN (or MLP) with no recurrent node: a stateless model
        source = load_frame_onnx(path, model)
    else:
        source = _onnx_cell(path, model, roll) or load_onnx(path, model)
    return LoadedModel(model=source.model, flavour="keras", path=path.resolve(), sha256=file_sha256(path),
                       source=source)


def _onnx_cell(path: Path, model: Any, roll: bool) -> Source | None:
    """An export of one step of a cell, or one unrolled over time (rolled back when ``roll``, else refused);
    None for the rest, which edgernn.pytorch.onnx reads."""
    from edgernn.pytorch import onnx_cell

    step = onnx_cell.cell_step(model, path.name)
    if step is not None:
        return _cell_source(path, step, onnx_cell.step_reference(model, step), True)
    if roll:
        rolled = onnx_cell.roll(model, path.name)
        if rolled is None:
            return None
        run = onnx_cell.step_reference(rolled.cell_model, rolled.step)
        reference = run if rolled.return_sequences else (lambda seqs: run(seqs)[:, -1])
        return _cell_source(path, rolled.step, reference, rolled.return_sequences)
    steps = onnx_cell.unrolled_steps(model)
    if steps is not None:
        raise EdgeRNNError(f"{path.name} is a cell unrolled over {steps} fixed steps (its input taken one step at a "
                           "time); export the cell instead, torch.onnx.export(model.rnn_cell, (x_t, h, 1.0), ...) for "
                           "ncps, or pass the torch module to edgernn.convert/edgernn.build in Python; or pass "
                           "--roll to take the export back to its repeated cell")
    return None


def _cell_source(path: Path, step: Any, reference: Any, return_sequences: bool) -> Source:
    """The Keras model of one ONNX cell (an RNN layer over it) with its reference."""
    from edgernn import tfenv
    from edgernn.pytorch import onnx_cell

    keras = tfenv.keras3()
    name = keras_name(path.stem, "onnx")
    layer = onnx_cell.keras_layer(step, keras, return_sequences=return_sequences, name=name)
    model = keras.Sequential([keras.Input((None, step.features), name="x"), layer], name=name)
    return Source(model=model, kind="onnx", name=path.name, reference=reference)


def module_sha256(module: Any) -> str:
    """SHA-256 of a torch module: its class, its structure and its parameters and buffers."""
    digest = hashlib.sha256(f"{type(module).__module__}.{type(module).__qualname__}\n{module!r}".encode())
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()

