"""Load a trained Keras model: Keras 3 or legacy tf_keras, .keras, .h5 or SavedModel, with ncps layers.

Keras' ``safe_mode`` stays on: a file with a ``Lambda`` layer would run Python code stored in it, so
it is refused unless the user passes ``--unsafe``.
"""

from __future__ import annotations

import hashlib
import json
import os
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


def load_model(source: Any, *, unsafe: bool = False) -> LoadedModel:
    """Load ``source``: a path, or a model object already in memory (Keras 3 or tf_keras)."""
    if not isinstance(source, (str, os.PathLike)):
        return _wrap_in_memory(source)

    path = Path(source)
    if not path.exists():
        raise EdgeRNNError(f"model file {path} does not exist")
    if path.is_dir() and not (path / "saved_model.pb").exists():
        raise EdgeRNNError(f"{path} is a folder but not a SavedModel (no saved_model.pb)")
    if path.is_file() and path.suffix not in (".keras", ".h5", ".hdf5"):
        raise EdgeRNNError(f"{path}: unknown model format {path.suffix or '(no suffix)'}; use .keras, .h5 or a SavedModel folder")

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


def _wrap_in_memory(model: Any) -> LoadedModel:
    module = type(model).__module__
    if module.startswith("tf_keras") or module.startswith("keras.src.engine") or module.startswith("tf_keras.src"):
        flavour = "tf_keras"
    elif hasattr(model, "layers"):
        flavour = "tf_keras" if _is_tf_keras(model) else "keras"
    else:
        raise EdgeRNNError(f"expected a Keras model or a model path, got {type(model).__name__}")
    return LoadedModel(model=model, flavour=flavour, path=None, sha256=model_sha256(model))


def _is_tf_keras(model: Any) -> bool:
    legacy = tfenv.tf_keras()
    return legacy is not None and isinstance(model, legacy.Model)
