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
    if not path.exists():
        raise EdgeRNNError(f"model file {path} does not exist")
    if not path.is_file():
        raise EdgeRNNError(f"model {path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise EdgeRNNError(f"model {path} cannot be read (permission denied)")
    source = _onnx_cell(path, roll)
    if source is None:
        from edgernn.pytorch.onnx import load_onnx

        source = load_onnx(path)
    return LoadedModel(model=source.model, flavour="keras", path=path.resolve(), sha256=file_sha256(path),
                       source=source)


def _onnx_cell(path: Path, roll: bool) -> Source | None:
    """An export of one step of a cell, or one unrolled over time (rolled back when ``roll``, else refused);
    None for the rest, which edgernn.pytorch.onnx reads."""
    from edgernn import tfenv
    from edgernn.pytorch import onnx_cell

    try:
        import onnx
    except ImportError:
        raise EdgeRNNError("reading .onnx models needs the onnx package: pip install 'edgernn[onnx]'") from None
    try:
        model = onnx.load(str(path))
    except Exception:  # noqa: BLE001 - edgernn.pytorch.onnx says what is wrong with the file
        return None
    keras = tfenv.keras3()
    step = onnx_cell.cell_step(model, path.name)
    if step is not None:
        layer = onnx_cell.keras_layer(step, keras, name=_layer_name(path))
        model_k = keras.Sequential([keras.Input((None, step.features), name="x"), layer], name=_layer_name(path))
        return Source(model=model_k, kind="onnx", name=path.name, reference=onnx_cell.step_reference(model, step))
    steps = onnx_cell.unrolled_steps(model)
    if steps is None:
        return None
    if not roll:
        raise EdgeRNNError(f"{path.name} is a cell unrolled over {steps} fixed steps (its input taken one step at a "
                           "time); export the cell instead, torch.onnx.export(model.rnn_cell, (x_t, h, 1.0), ...) for "
                           "ncps, or pass the torch module to edgernn.convert/edgernn.build in Python; or pass "
                           "--roll to take the export back to its repeated cell")
    rolled = onnx_cell.roll(model, path.name)
    if rolled is None:
        return None
    layer = onnx_cell.keras_layer(rolled.step, keras, return_sequences=rolled.return_sequences,
                                  name=_layer_name(path))
    model_k = keras.Sequential([keras.Input((None, rolled.step.features), name="x"), layer], name=_layer_name(path))
    run = onnx_cell.step_reference(rolled.cell_model, rolled.step)
    reference = run if rolled.return_sequences else (lambda seqs: run(seqs)[:, -1])
    return Source(model=model_k, kind="onnx", name=path.name, reference=reference)


def _layer_name(path: Path) -> str:
    stem = "".join(c if c.isalnum() else "_" for c in path.stem).strip("_") or "onnx"
    return stem if stem[0].isalpha() else f"m_{stem}"


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
