"""Where the shipped templates and board files are, and edgernn's cache.

In a wheel they sit inside the package (``edgernn/templates``, ``edgernn/boards``); in a source
checkout or an editable install they sit beside the package at the repository root.
"""

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"edgernn is installed without its {name}/ folder")


def templates_dir() -> Path:
    return _data_dir("templates")


def boards_dir() -> Path:
    return _data_dir("boards")


def cache_root() -> Path:
    """edgernn's cache: ``$EDGERNN_CACHE``, else ``$XDG_CACHE_HOME/edgernn``, else ``~/.cache/edgernn``."""
    if os.environ.get("EDGERNN_CACHE"):
        return Path(os.environ["EDGERNN_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "edgernn"
    return Path.home() / ".cache" / "edgernn"
