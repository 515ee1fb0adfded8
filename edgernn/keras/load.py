"""Load a trained Keras model: Keras 3 or legacy tf_keras, .keras, .h5 or SavedModel, with ncps layers.

A file with a ``Lambda`` layer carries Python code that runs while the model is rebuilt. Keras'
``safe_mode`` stops it only for Keras 3 files, so edgernn reads every format's stored configuration
first, without deserializing anything (the .keras archive's config.json, the .h5 file's
``model_config`` attribute, a SavedModel's keras_metadata.pb), and refuses a model with code in it
before any of its code can run, unless the user passes ``--unsafe``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgernn.errors import EdgeRNNError
from edgernn import tfenv


@dataclass
class LoadedModel:
    model: Any
    flavour: str  # "keras" (Keras 3) or "tf_keras" (Keras 2)
    path: Path | None
    sha256: str
    # a model that was not Keras (edgernn.pytorch.source.Source): ``model`` is its Keras twin, and the source
    # itself is the float reference
    source: Any = None

    @property
    def source_format(self) -> str:
        return self.source.kind if self.source is not None else "keras"

    def source_entry(self) -> dict:
        """manifest ``source``: what the model came as (keras, onnx or torch) and its name."""
        if self.source is not None:
            return {"format": self.source.kind, "name": self.source.name}
        return {"format": "keras", "name": self.path.name if self.path else str(self.model.name)}

    @property
    def keras(self):
        """The Keras module that built this model, to build step models with the same classes."""
        return tfenv.keras3() if self.flavour == "keras" else tfenv.tf_keras()


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a model file, or of a SavedModel folder's files in sorted order."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def model_sha256(model: Any) -> str:
    """SHA-256 of an in-memory model: its architecture and weights."""
    digest = hashlib.sha256(json.dumps(model.get_config(), sort_keys=True, default=str).encode())
    for weight in model.get_weights():
        digest.update(weight.tobytes())
    return digest.hexdigest()


def _register_ncps() -> None:
    """Importing ncps' Keras 3 module registers CfC, LTC and their cells for deserialisation."""
    try:
        import ncps.keras  # noqa: F401
    except ImportError:
        pass


def _keras_version_of(path: Path) -> str | None:
    if path.suffix == ".keras":
        try:
            with zipfile.ZipFile(path) as archive:
                meta = json.loads(archive.read("metadata.json"))
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, OSError):
            raise EdgeRNNError(f"cannot load {path}: not a valid .keras archive (corrupt or truncated?)") from None
        return str(meta.get("keras_version", ""))
    if path.suffix in (".h5", ".hdf5"):
        try:
            import h5py

            with h5py.File(path, "r") as handle:
                version = handle.attrs.get("keras_version")
        except OSError:
            raise EdgeRNNError(f"cannot load {path}: not a valid HDF5 model file (corrupt or truncated?)") from None
        if isinstance(version, bytes):
            version = version.decode()
        return str(version) if version is not None else None
    return None


# Layer classes whose stored configuration carries Python code (marshalled bytecode) or a reference to
# a Python function that rebuilding the layer would call.
CODE_LAYERS = ("Lambda",)
_CODE_MARKERS = ("__lambda__", "lambda")  # Keras 3's and tf_keras' serialized function types


def _walk_code_layers(node: Any, found: list[str]) -> None:
    if isinstance(node, dict):
        name = node.get("class_name")
        config = node.get("config") if isinstance(node.get("config"), dict) else {}
        if name in CODE_LAYERS or name == "__lambda__" or config.get("function_type") in _CODE_MARKERS:
            found.append(str(config.get("name") or node.get("name") or name))
            return
        for value in node.values():
            _walk_code_layers(value, found)
    elif isinstance(node, list):
        for value in node:
            _walk_code_layers(value, found)


def _stored_config(path: Path) -> Any:
    """The model's stored configuration as JSON, read without building anything; None when absent."""
    if path.is_dir():
        meta = path / "keras_metadata.pb"
        if not meta.is_file():
            return None
        # keras_metadata.pb holds one JSON text per layer; they are found in its bytes without
        # parsing the protobuf (which would need TensorFlow).
        raw = meta.read_bytes()
        texts = []
        for match in re.finditer(rb'\{"class_name"', raw):
            depth, end = 0, None
            for i in range(match.start(), len(raw)):
                ch = raw[i]
                if ch == 0x7B:
                    depth += 1
                elif ch == 0x7D:
                    depth -= 1
                    if depth == 0:
                        end = i + 1
                        break
            if end is not None:
                try:
                    texts.append(json.loads(raw[match.start():end]))
                except ValueError:
                    pass
        lambdas = [m.group(0) for m in re.finditer(rb'"class_name":\s*"Lambda"', raw)]
        found: list[str] = []
        _walk_code_layers(texts, found)
        if lambdas and not found:  # a Lambda whose JSON text the scan above could not cut out whole
            texts.append({"class_name": "Lambda", "config": {"name": "Lambda"}})
        return texts
    if path.suffix == ".keras":
        try:
            with zipfile.ZipFile(path) as archive:
                return json.loads(archive.read("config.json"))
        except (zipfile.BadZipFile, KeyError, ValueError, OSError):
            raise EdgeRNNError(f"cannot load {path}: not a valid .keras archive (corrupt or truncated?)") from None
    try:
        import h5py

        with h5py.File(path, "r") as handle:
            config = handle.attrs.get("model_config")
    except OSError:
        raise EdgeRNNError(f"cannot load {path}: not a valid HDF5 model file (corrupt or truncated?)") from None
    if config is None:
        return None
    if isinstance(config, bytes):
        config = config.decode("utf-8", "replace")
    try:
        return json.loads(config)
    except ValueError:
        raise EdgeRNNError(f"cannot load {path}: its model_config is not valid JSON (corrupt?)") from None


def code_layers(path: str | os.PathLike) -> list[str]:
    """Names of the layers in a model file whose loading would run code stored in the file."""
    found: list[str] = []
    _walk_code_layers(_stored_config(Path(path)), found)
    return list(dict.fromkeys(found))


def _refusal(path: Path, exc: BaseException) -> EdgeRNNError:
    text = str(exc)
    if "safe_mode" in text or "Lambda" in text:
        return EdgeRNNError(
            f"{path.name} contains a Lambda layer: loading it runs Python code stored in the file. "
            "If you trust the file, pass --unsafe"
        )
    if "Unknown layer" in text or "Could not locate class" in text or "custom_objects" in text:
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return EdgeRNNError(f"cannot load {path.name}: it uses a layer edgernn does not know ({first})")
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return EdgeRNNError(f"cannot load {path}: {first}")


def check_model_path(path: Path) -> None:
    """What every model path is checked for first: it is there, and is a file or a folder."""
    if not path.exists():
        raise EdgeRNNError(f"model file {path} does not exist")
    kind = path.stat().st_mode
    if not stat.S_ISDIR(kind) and not stat.S_ISREG(kind):
        raise EdgeRNNError(f"model {path} is not a regular file (a FIFO, socket or device); save the model "
                           "to a .keras file")


def check_readable(path: Path) -> None:
    if not os.access(path, os.R_OK):
        raise EdgeRNNError(f"model {path} cannot be read (permission denied)")


def load_model(source: Any, *, unsafe: bool = False) -> LoadedModel:
    """Load ``source``: a path, or a model object already in memory (Keras 3 or tf_keras)."""
    if not isinstance(source, (str, os.PathLike)):
        return _wrap_in_memory(source)

    path = Path(source)
    check_model_path(path)
    if path.is_dir() and not (path / "saved_model.pb").exists():
        raise EdgeRNNError(f"{path} is a folder but not a SavedModel (no saved_model.pb)")
    if path.is_dir() and not (path / "keras_metadata.pb").is_file():
        raise EdgeRNNError(f"{path} is a SavedModel without Keras layers (written by Keras 3 `model.export()` or "
                           "tf.saved_model.save), so its layers cannot be recovered; save the Keras model with "
                           "model.save('model.keras') instead")
    if path.is_file() and path.suffix.lower() in (".pt", ".pth", ".ckpt"):
        raise EdgeRNNError(f"{path}: a PyTorch {path.suffix} file holds weights (and Python code run to load them), not a "
                           "graph edgernn can read; export it with torch.onnx.export, or pass the module to "
                           "edgernn.convert in Python")
    if path.is_file() and path.suffix not in (".keras", ".h5", ".hdf5"):
        raise EdgeRNNError(f"{path}: unknown model format {path.suffix or '(no suffix)'}; use .keras, .h5, .onnx or a SavedModel folder")
    check_readable(path)
    if not unsafe:
        risky = code_layers(path)
        if risky:
            raise EdgeRNNError(
                f"{path.name} contains a Lambda layer ({', '.join(risky[:3])}): loading it runs Python code stored "
                "in the file. If you trust the file, pass --unsafe"
            )

    version = _keras_version_of(path)
    flavour = "tf_keras" if path.is_dir() or (version or "").startswith("2.") else "keras"
    sha = file_sha256(path)
    tfenv.tensorflow()
    _register_ncps()
    module = tfenv.keras3() if flavour == "keras" else tfenv.tf_keras()
    if module is None:
        raise EdgeRNNError(f"{path.name} was saved by Keras {version or '2'}: install tf_keras to load it (pip install tf-keras)")
    try:
        with tfenv.native_stderr_captured():
            if path.is_dir():
                model = module.models.load_model(path, compile=False)
            else:
                model = module.models.load_model(path, compile=False, safe_mode=not unsafe)
    except EdgeRNNError:
        raise
    except Exception as exc:  # Keras raises anything from ValueError to OSError for bad files
        raise _refusal(path, exc) from None
    return LoadedModel(model=model, flavour=flavour, path=path.resolve(), sha256=sha)


def check_finite_weights(loaded: LoadedModel) -> None:
    """Refuse a model whose weights hold NaN or infinite values (a training that diverged): every later stage
    would fail on it, and only with a symptom (the converted model disagreeing with Keras, a calibration
    range of NaN)."""
    import numpy as np

    for weight in getattr(loaded.model, "weights", []):
        values = np.asarray(weight.numpy())
        if values.dtype.kind != "f":
            continue
        bad = int(np.count_nonzero(~np.isfinite(values)))
        if bad:
            name = getattr(weight, "path", None) or weight.name
            where = f"{loaded.path.name}: " if loaded.path is not None else ""
            raise EdgeRNNError(f"{where}weight {name!r} holds {bad} NaN or infinite value(s) of {values.size}: "
                               "the model cannot be run (did its training diverge?)")


def _wrap_in_memory(model: Any) -> LoadedModel:
    module = type(model).__module__
    if module.startswith("tf_keras") or module.startswith("keras.src.engine") or module.startswith("tf_keras.src"):
        flavour = "tf_keras"
    elif hasattr(model, "layers"):
        flavour = "tf_keras" if _is_tf_keras(model) else "keras"
    else:
        raise EdgeRNNError(f"expected a Keras model, a torch module or a model path, got {type(model).__name__}")
    return LoadedModel(model=model, flavour=flavour, path=None, sha256=model_sha256(model))


def _is_tf_keras(model: Any) -> bool:
    legacy = tfenv.tf_keras()
    return legacy is not None and isinstance(model, legacy.Model)
