"""Boards are data: one TOML file each under boards/, or a path the user gives."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgernn.errors import EdgeRNNError
from edgernn.resources import boards_dir

_REQUIRED = ("name", "description", "cpu", "memory", "toolchain", "serial", "hal")


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    path: Path
    data: dict[str, Any] = field(repr=False)

    @property
    def emulated(self) -> bool:
        return bool(self.data.get("emulated", False))

    @property
    def memories(self) -> list[dict[str, Any]]:
        return list(self.data["memory"])

    def memory(self, name: str) -> dict[str, Any]:
        for mem in self.memories:
            if mem["name"] == name:
                return mem
        raise EdgeRNNError(f"board {self.name}: no memory named {name!r} in {self.path}")

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def known_boards() -> list[str]:
    return sorted(p.stem for p in boards_dir().glob("*.toml"))


def load_board(name_or_path: str | Path) -> Board:
    """A board by shipped name (``host``) or by the path of the user's own TOML file."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" and candidate.is_file():
        path = candidate
    else:
        path = boards_dir() / f"{name_or_path}.toml"
        if not path.is_file():
            raise EdgeRNNError(
                f"unknown board {str(name_or_path)!r}: known boards are {', '.join(known_boards())}, "
                "or pass the path of a board .toml file"
            )
    data = _read_board_file(path, seen=())
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise EdgeRNNError(f"board file {path} lacks {', '.join(missing)}")
    _check_board_data(path, data)
    return Board(name=data["name"], description=data["description"], path=path, data=data)


def _check_board_data(path: Path, data: dict[str, Any]) -> None:
    """The facts other modules read without asking: each a one-line refusal when absent or wrong."""
    memories = data["memory"]
    if not isinstance(memories, list) or not memories:
        raise EdgeRNNError(f"board file {path}: memory must be a list of [[memory]] tables")
    for index, mem in enumerate(memories):
        if not isinstance(mem, dict):
            raise EdgeRNNError(f"board file {path}: memory entry {index + 1} is not a [[memory]] table")
        for key, kind in (("name", str), ("size", int)):
            if key not in mem:
                raise EdgeRNNError(f"board file {path}: memory entry {index + 1} lacks memory.{key}")
            if not isinstance(mem[key], kind) or isinstance(mem[key], bool):
                raise EdgeRNNError(f"board file {path}: memory.{key} of entry {index + 1} must be "
                                   f"{'a string' if kind is str else 'a whole number of bytes'}")
        if mem["size"] <= 0:
            raise EdgeRNNError(f"board file {path}: memory.size of {mem['name']} must be positive")
    for table in ("cpu", "toolchain", "serial", "hal"):
        if not isinstance(data[table], dict):
            raise EdgeRNNError(f"board file {path}: {table} must be a table")
    if not isinstance(data["name"], str) or not data["name"]:
        raise EdgeRNNError(f"board file {path}: name must be a string")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; anything else (a value, an array) in ``over`` replaces ``base``'s."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_board_file(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """A board file's data, with ``extends = "other"`` resolved: the other board's data (a shipped
    name, or a path relative to this file), overridden table by table by this file's."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise EdgeRNNError(f"board file {path}: {exc}") from None
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise EdgeRNNError(f"board file {path}: extends must name a board, not {parent!r}")
    parent_path = path.parent / parent if parent.endswith(".toml") else boards_dir() / f"{parent}.toml"
    if not parent_path.is_file():
        raise EdgeRNNError(f"board file {path} extends {parent!r}, which is not a board file ({parent_path})")
    if parent_path.resolve() in seen:
        raise EdgeRNNError(f"board file {path}: extends goes round in a circle through {parent_path.name}")
    base = _read_board_file(parent_path, seen + (path.resolve(),))
    return _merge(base, data)
